"""observation node: what changed after the last action (no model call), and whether to look ahead."""

from __future__ import annotations

from langgraph.runtime import Runtime

from veriloop.context import Context
from veriloop.engines.lookahead import audit_ahead_allowed, lookahead_allowed
from veriloop.engines.verification import observe_action
from veriloop.graph.state import State
from veriloop.nodes.support import offload, plan_of
from veriloop.schemas.observation import ClientObservations
from veriloop.schemas.records import ActionRecord


async def observation(state: State, runtime: Runtime[Context]) -> dict:
    """Observe the last action's effect; nothing changed -> the no-change verdict, without a model call."""
    ctx = runtime.context or Context()
    history = state["action_history"]
    last = ActionRecord.model_validate(history[-1])
    client = state.get("client_observations")
    observed = await observe_action(
        action=last.action,
        step_index=last.step_index,
        before_state=state["before_state"],  # parsed by the page work, not here
        current_dom=state["dom"],
        current_url=state["url"],
        client_observations=ClientObservations.model_validate(client) if client else None,
        current_active_element=state.get("active_element"),
        seen_fingerprints=state.get("action_fingerprints") or [],
        offload=offload(ctx),
    )
    plan, step_index = plan_of(state), state.get("current_step_index", 0)
    ahead = ctx.lookahead and observed.no_change is None
    update: dict = {
        "page_state": observed.page_state,
        "action_fingerprints": [observed.fingerprint],
        "action_observation": observed.facts.model_dump(),
        # Only when a success would lead on at once: a repeat or a spent budget goes to correction.
        "lookahead_planned": ahead
        and not observed.facts.repeated_action
        and len(history) < ctx.max_steps_per_task
        and lookahead_allowed(plan, step_index, last.plan_step_index),
        "audit_ahead_planned": ahead
        and audit_ahead_allowed(plan, step_index, last.plan_step_index),
    }
    if observed.no_change is not None:
        verdict = observed.no_change.model_dump()
        update |= {"verification_result": verdict, "verification_history": [verdict]}
    return update
