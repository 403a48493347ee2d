"""lookahead node: the next step's action, prepared while verification judges the last one."""

from __future__ import annotations

from langgraph.runtime import Runtime

from veriloop.context import Context
from veriloop.engines.lookahead import prepare_next_action
from veriloop.graph.state import State
from veriloop.llm import get_llm
from veriloop.nodes.support import plan_of, step_context
from veriloop.prompts.progress import pending_verdict


async def lookahead(state: State, runtime: Runtime[Context]) -> dict:
    """Prepare what a verified success leads to; use_lookahead takes it only after that success."""
    ctx = runtime.context or Context()
    plan = plan_of(state)
    if plan is None:
        raise RuntimeError("lookahead needs a plan: the observation node plans it only with one")
    prepared, usage = await prepare_next_action(
        lambda purpose: get_llm(ctx, purpose),
        # The verdict is not known yet: the prompts show the observations and say it is pending.
        await step_context(
            state, ctx, verification=pending_verdict(state["action_observation"]["observations"])
        ),
        plan=plan,
        step_index=state.get("current_step_index", 0),
        sub_task_index=state.get("current_sub_task_index", 0),
        verified_step_index=state["action_history"][-1].get("plan_step_index"),
    )
    return {"lookahead": prepared.dump(), "usage": usage}
