"""replanning node: validate the plan, then edit the remaining steps in place or ask planning for a new plan."""

from __future__ import annotations

from langgraph.runtime import Runtime

from veriloop.context import Context
from veriloop.engines.replanning import replan
from veriloop.graph.state import State
from veriloop.llm import get_llm
from veriloop.nodes.support import plan_of, step_context, task_log


async def replanning(state: State, runtime: Runtime[Context]) -> dict:
    """Spend one replan of the task budget; the step gets a fresh correction budget."""
    ctx = runtime.context or Context()
    outcome = await replan(
        get_llm(ctx, "replanning"),
        await step_context(state, ctx),
        plan=plan_of(state),
        step_index=state.get("current_step_index", 0),
    )
    replans = state.get("replan_count", 0) + 1
    task_log(state, "replanning").info(
        "replan %d: %s",
        replans,
        "regenerate" if outcome.result.plan_regenerated else "modify remaining steps",
    )
    return {
        "plan": outcome.plan.model_dump() if outcome.plan is not None else None,
        "current_step_index": outcome.step_index,
        "current_sub_task_index": 0,
        "plan_validation": outcome.validation.model_dump(),
        "replanning_result": outcome.result.model_dump(),
        "replan_count": replans,
        "correction_attempts": 0,
        "tried_strategies": [],
        "usage": outcome.usage,
    }
