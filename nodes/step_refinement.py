"""step_refinement node: one concrete instruction for the current step, grounded on the page."""

from __future__ import annotations

from langgraph.runtime import Runtime

from veriloop.context import Context
from veriloop.engines.planning import current_sub_task
from veriloop.engines.refinement import refine_step
from veriloop.graph.state import State
from veriloop.llm import get_llm
from veriloop.nodes.support import plan_of, step_context


async def step_refinement(state: State, runtime: Runtime[Context]) -> dict:
    """Refine the current plan step (and sub-task) into an instruction."""
    ctx = runtime.context or Context()
    plan = plan_of(state)
    if plan is None:
        raise RuntimeError("step_refinement needs a plan: planning or replanning runs first")
    step_index = state.get("current_step_index", 0)
    outcome = await refine_step(
        get_llm(ctx, "refinement"),
        await step_context(state, ctx),
        step=plan.steps[step_index],
        sub_task=current_sub_task(plan, step_index, state.get("current_sub_task_index", 0)),
    )
    return {
        "refined_instruction": outcome.step.instruction,
        "target_element_id": outcome.step.target_element_id,
        "usage": outcome.usage,
    }
