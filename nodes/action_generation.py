"""action_generation node: a valid action for this page, or a hand-over to correction."""

from __future__ import annotations

from langgraph.runtime import Runtime

from veriloop.context import Context
from veriloop.engines.actions import choose_action
from veriloop.graph.state import State
from veriloop.llm import get_llm
from veriloop.nodes.support import page_state, step_context, task_log


async def action_generation(state: State, runtime: Runtime[Context]) -> dict:
    """Choose the action; keep the page state it is chosen on (finalize records it as before_state)."""
    ctx = runtime.context or Context()
    outcome = await choose_action(
        get_llm(ctx, "action"),
        await step_context(state, ctx),
        instruction=state.get("refined_instruction") or state["goal"],
        target_element_id=state.get("target_element_id"),
    )
    update = {
        "page_state": await page_state(state, ctx),
        "thought": outcome.thought,
        "usage": outcome.usage,
    }
    if outcome.action is None:
        task_log(state, "action_generation").warning(
            "no valid action: %s", "; ".join(outcome.rejections)
        )
        return {**update, "action": None, "needs_correction": True}
    return {
        **update,
        "action": outcome.action.model_dump(),
        "action_source": "action_generation",
        "needs_correction": False,
    }
