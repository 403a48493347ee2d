"""verification node: the model's verdict on the observed change; tracks sub-tasks."""

from __future__ import annotations

from langgraph.runtime import Runtime

from veriloop.context import Context
from veriloop.engines.planning import (
    apply_sub_task_verdict,
    current_sub_task,
    hierarchical_plan_complete,
)
from veriloop.engines.verification import judge_action
from veriloop.graph.state import State
from veriloop.llm import get_llm
from veriloop.llm.search import search_for
from veriloop.nodes.support import plan_of, task_log
from veriloop.schemas.verification import VerificationResult


async def verification(state: State, runtime: Runtime[Context]) -> dict:
    """Judge the last action (the observation node saw a change; a no-change run never comes here)."""
    ctx = runtime.context or Context()
    plan = plan_of(state)
    step_index = state.get("current_step_index", 0)
    sub_task_index = state.get("current_sub_task_index", 0)
    sub_task = current_sub_task(plan, step_index, sub_task_index)
    result, usage = await judge_action(
        VerificationResult.model_validate(state["action_observation"]),
        goal=state["goal"],
        action=state["action_history"][-1]["action"],
        llm=get_llm(ctx, "verification"),
        sub_task_objective=sub_task.objective if sub_task else None,
        success_threshold=ctx.success_threshold,
        goal_threshold=ctx.goal_threshold,
        low_confidence_threshold=ctx.low_confidence_threshold,
        search=search_for(ctx, "verification"),
        log=task_log(state, "verification"),
    )
    update: dict = {}
    if plan is not None and sub_task is not None:
        plan, step_index, sub_task_index = apply_sub_task_verdict(
            plan,
            step_index,
            sub_task_index,
            sub_task_completed=result.sub_task_completed,
            confident=result.confidence >= ctx.success_threshold,
            success=result.success,
        )
        update = {
            "plan": plan.model_dump(),
            "current_step_index": step_index,
            "current_sub_task_index": sub_task_index,
        }
        if hierarchical_plan_complete(plan):
            # Every sub-task of the plan was verified done: that is the goal (seed, sub-task verification).
            result = result.model_copy(update={"goal_achieved": True})
    dump = result.model_dump()
    return {**update, "verification_result": dump, "verification_history": [dump], "usage": usage}
