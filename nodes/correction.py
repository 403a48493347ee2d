"""correction node: a retry action for the failed step, fail() when the task budget is spent, or nothing (replan)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from veriloop.context import Context
from veriloop.engines.correction import CorrectionDecision, choose_correction, decide_correction
from veriloop.engines.prediction import check_recorded_prediction
from veriloop.graph.io import current_verification
from veriloop.graph.state import State
from veriloop.llm import get_llm
from veriloop.nodes.support import page_state, step_context, task_log
from veriloop.schemas.actions import Action, parse_action
from veriloop.schemas.observation import ClientVerification
from veriloop.schemas.records import ActionRecord


def correction_decision(state: State, ctx: Context) -> CorrectionDecision:
    """Retry, replan or fail, from this run's typed flags and the budget counters (the router reads it too)."""
    verification = current_verification(state) or {}
    return decide_correction(
        impossible=bool(verification.get("impossible")),
        repeated_action=bool(verification.get("repeated_action")),
        correction_attempts=state.get("correction_attempts", 0),
        replan_count=state.get("replan_count", 0),
        steps_taken=len(state.get("action_history") or []),
        max_corrections=ctx.max_corrections_per_step,
        max_replans=ctx.max_replans_per_task,
        max_steps=ctx.max_steps_per_task,
    )


async def correction(state: State, runtime: Runtime[Context]) -> dict:
    """Apply the decision: a strategy's action, fail("reason"), or leave it to replanning."""
    ctx = runtime.context or Context()
    log = task_log(state, "correction")
    decision = correction_decision(state, ctx)
    if decision.move == "replan":
        log.info("escalating to replanning: %s", decision.reason)
        return {}
    update = {
        "page_state": await page_state(state, ctx),
        "action_source": "correction",
    }
    if decision.move == "fail":
        log.warning("task failed: %s", decision.reason)
        action = Action(kind="fail", text=decision.reason)
        return {
            **update,
            "action": action.model_dump(),
            "thought": f"Giving up: {decision.reason}.",
        }
    failed = None if state.get("needs_correction") else _step_attempt(state)
    problem = (
        "no valid action could be chosen" if failed is None else "the last action did not work"
    )
    now = await step_context(state, ctx)
    verification = current_verification(state) or {}
    history = state.get("action_history") or []
    prediction = None
    if failed is not None and history:  # the verified action against what it was expected to do
        client = state.get("client_verification")
        prediction = check_recorded_prediction(
            ActionRecord.model_validate(history[-1]),
            page_html=now.page.html,
            url=state["url"],
            semantic_confidence=float(verification.get("confidence", 0.0)),
            client_verification=ClientVerification.model_validate(client) if client else None,
        )
    outcome = await choose_correction(
        get_llm(ctx, "correction"),
        now,
        failed_action=failed,
        problem=problem,
        tried=list(state.get("tried_strategies") or []),
        prediction=prediction,
        observed=verification.get("observations") or [verification.get("reason", "")],
    )
    log.info("correction strategy %s -> %s", outcome.strategy, outcome.action)
    return {
        **update,
        "action": outcome.action.model_dump(),
        "thought": outcome.thought,
        "correction_strategy": outcome.strategy,
        "usage": outcome.usage,
    }


def _step_attempt(state: State) -> Action | None:
    """The step's own last attempt (the action alternative_element varies), not an earlier correction."""
    for record in reversed(state.get("action_history") or []):
        if record.get("source") == "action_generation":
            return parse_action(record["action"])
    return None
