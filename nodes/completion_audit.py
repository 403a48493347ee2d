"""completion_audit node: before finish(), one audit of the whole trajectory must agree with the verifier."""

from __future__ import annotations

from langgraph.runtime import Runtime

from veriloop.context import Context
from veriloop.engines.completion import audit_completion, build_trajectory
from veriloop.graph.state import State
from veriloop.llm import get_llm
from veriloop.nodes.support import task_log


async def completion_audit(state: State, runtime: Runtime[Context]) -> dict:
    """Audit the goal against every verified action's changes; a veto takes back goal_achieved."""
    ctx = runtime.context or Context()
    outcome = await audit_completion(
        goal=state["goal"],
        trajectory=build_trajectory(
            state.get("action_history") or [], state.get("verification_history") or []
        ),
        llm=get_llm(ctx, "audit"),
        goal_threshold=ctx.goal_threshold,
        log=task_log(state, "completion_audit"),
    )
    update: dict = {"completion_audit": outcome.result.model_dump(), "usage": outcome.usage}
    if not outcome.result.agreed:
        update["verification_result"] = {**state["verification_result"], "goal_achieved": False}
    return update
