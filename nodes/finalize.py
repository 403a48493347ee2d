"""finalize node: record the action with its before_state, set the status and counters, clear run scratch."""

from __future__ import annotations

from veriloop.engines.dom_context import compact_page
from veriloop.engines.prediction import predict_outcome
from veriloop.engines.task import finalize_update
from veriloop.graph.io import current_verification
from veriloop.graph.state import State
from veriloop.nodes.support import plan_of, task_log
from veriloop.schemas.actions import Action


def finalize(state: State) -> dict:
    """Close the invocation; the client executes the recorded action and sends the next observation."""
    if not state.get("action"):
        raise RuntimeError("finalize reached without an action")
    if not state.get("page_state"):  # the node that chose the action captured it
        raise RuntimeError("finalize reached without the page state the action was chosen on")
    action = Action.model_validate(state["action"])
    verification = current_verification(state) or {}
    # The action's expected outcome, read on the page it was chosen on (the compact parse the
    # prompts already made), for correction and display.
    plan, index = plan_of(state), state.get("current_step_index")
    step = plan.steps[index] if plan and index is not None and index < len(plan.steps) else None
    page = compact_page(state.get("dom") or "")
    action_type, expected = predict_outcome(
        action, page.html, step_expectation=step.expected_outcome if step else None
    )
    # The target's name, from the same parse; the record keeps it, so it outlives the page.
    target = page.target(action.element_id)
    update = finalize_update(
        action=action,
        target=target,
        thought=state.get("thought", ""),
        source=state.get("action_source") or "action_generation",
        history_length=len(state.get("action_history") or []),
        before_state=state["page_state"],
        plan_step_index=state.get("current_step_index"),
        verified_success=bool(verification.get("success")),
        correction_attempts=state.get("correction_attempts", 0),
        tried_strategies=state.get("tried_strategies") or [],
        correction_strategy=state.get("correction_strategy"),
        action_type=action_type,
        expected_outcome=expected.description if expected else None,
    )
    task_log(state, "finalize").info(
        "step %d: %s (status %s)", len(state.get("action_history") or []), action, update["status"]
    )
    # Per-run scratch: the next observation brings its own page and choices. The page itself is not
    # kept either: the action's before_state (hash + skeleton) is all the next verification needs,
    # and a 100+ kB DOM in every checkpoint costs storage and time on every load.
    return {
        **update,
        "dom": "",
        "page_state": None,
        "needs_correction": False,
        "correction_strategy": None,
        "action_source": None,
        "refined_instruction": None,
        "target_element_id": None,
        "action_observation": None,
        "lookahead_planned": False,
        "lookahead": None,
        "audit_ahead_planned": False,
        "audit_ahead": None,
    }
