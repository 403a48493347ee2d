"""verification node: judge the previous action with the verification engine; track sub-tasks."""

from __future__ import annotations

from langgraph.runtime import Runtime

from veriloop.context import Context
from veriloop.engines.planning import (
    apply_sub_task_verdict,
    current_sub_task,
    hierarchical_plan_complete,
)
from veriloop.engines.verification import verify_action_with_observations
from veriloop.graph.state import State
from veriloop.llm import get_llm
from veriloop.llm.search import search_for
from veriloop.nodes.support import plan_of, task_log
from veriloop.schemas.observation import BeforeState, ClientObservations
from veriloop.schemas.records import ActionRecord


async def verification(state: State, runtime: Runtime[Context]) -> dict:
    """Verify the last action against this observation (route_entry only comes here with a before_state)."""
    ctx = runtime.context or Context()
    last = ActionRecord.model_validate(state["action_history"][-1])
    plan = plan_of(state)
    step_index = state.get("current_step_index", 0)
    sub_task_index = state.get("current_sub_task_index", 0)
    sub_task = current_sub_task(plan, step_index, sub_task_index)
    client = state.get("client_observations")
    outcome = await verify_action_with_observations(
        goal=state["goal"],
        action=last.action,
        step_index=last.step_index,
        before_state=BeforeState.model_validate(state["before_state"]),
        current_dom=state["dom"],
        current_url=state["url"],
        llm=get_llm(ctx, "verification"),
        client_observations=ClientObservations.model_validate(client) if client else None,
        current_active_element=state.get("active_element"),
        sub_task_objective=sub_task.objective if sub_task else None,
        seen_fingerprints=state.get("action_fingerprints") or [],
        success_threshold=ctx.success_threshold,
        goal_threshold=ctx.goal_threshold,
        low_confidence_threshold=ctx.low_confidence_threshold,
        search=search_for(ctx, "verification"),
        log=task_log(state, "verification"),
    )
    result = outcome.result
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
    return {
        **update,
        "verification_result": dump,
        "verification_history": [dump],
        "page_state": outcome.page_state.model_dump(),
        "action_fingerprints": [outcome.fingerprint],
        "usage": outcome.usage,
    }
