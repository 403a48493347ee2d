"""completion_audit node: before finish(), one audit of the whole trajectory must agree with the verifier."""

from __future__ import annotations

from langgraph.runtime import Runtime

from veriloop.context import Context
from veriloop.engines.completion import AuditOutcome, audit_completion, build_trajectory
from veriloop.graph.state import State
from veriloop.llm import get_llm
from veriloop.nodes.support import task_log
from veriloop.schemas.verification import CompletionAuditResult


async def completion_audit(state: State, runtime: Runtime[Context]) -> dict:
    """Audit the goal against every verified action's changes; a veto takes back goal_achieved.

    When the audit already ran beside this verdict (audit_ahead), its answer is used: no second call.
    """
    ahead = state.get("audit_ahead")
    if ahead is not None:
        result, update = CompletionAuditResult.model_validate(ahead), {}
    else:
        outcome = await run_audit(state, runtime)
        result, update = outcome.result, {"usage": outcome.usage}
    update["completion_audit"] = result.model_dump()
    if not result.agreed:
        update["verification_result"] = {**state["verification_result"], "goal_achieved": False}
    return update


async def run_audit(
    state: State, runtime: Runtime[Context], *, pending: dict | None = None
) -> AuditOutcome:
    """The audit call on this task's verified trajectory, plus ``pending`` (a verdict not in yet)."""
    ctx = runtime.context or Context()
    verified = state.get("verification_history") or []
    return await audit_completion(
        goal=state["goal"],
        trajectory=build_trajectory(
            state.get("action_history") or [], [*verified, pending] if pending else verified
        ),
        llm=get_llm(ctx, "audit"),
        goal_threshold=ctx.goal_threshold,
        log=task_log(state, "completion_audit"),
    )
