"""planning node: generate the plan, or keep it and move on after a verified success."""

from __future__ import annotations

import logging

from langgraph.runtime import Runtime

from veriloop.context import Context
from veriloop.engines.log import MISSING_BEFORE_STATE
from veriloop.engines.planning import plan_next
from veriloop.graph.state import State
from veriloop.llm import get_llm
from veriloop.nodes.support import page_state, plan_of, step_context, task_log


async def planning(state: State, runtime: Runtime[Context]) -> dict:
    """Plan (or advance the plan) for this invocation."""
    ctx = runtime.context or Context()
    log = task_log(state, "planning")
    actions = state.get("action_history") or []
    if actions and not state.get("before_state"):
        # route_entry sent us here without verifying: the last action cannot be judged.
        log.event(
            MISSING_BEFORE_STATE,
            f"action {actions[-1]['action']} not verified",
            level=logging.WARNING,
        )
    # A task's first page: its page state (which action_generation records) and the compact
    # page the prompts read, from one parse.
    captured = await page_state(state, ctx)
    plan = plan_of(state)
    now = await step_context(state, ctx)
    validation = state.get("plan_validation") or {}
    outcome = await plan_next(
        get_llm(ctx, "planning"),
        now,
        plan=plan,
        step_index=state.get("current_step_index", 0),
        sub_task_index=state.get("current_sub_task_index", 0),
        verified_step_index=actions[-1].get("plan_step_index") if actions else None,
        succeeded=bool(now.verification and now.verification.get("success")),
        # No plan after a replan means "regenerated": the plan check's reasons go to the planner.
        suggestions=list(validation.get("suggested_changes") or []) if plan is None else [],
    )
    if outcome.generated:
        log.info("plan generated: %d steps", len(outcome.plan.steps))
    return {
        "page_state": captured,
        "plan": outcome.plan.model_dump(),
        "current_step_index": outcome.step_index,
        "current_sub_task_index": outcome.sub_task_index,
        "usage": outcome.usage,
    }
