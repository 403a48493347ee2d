"""Translating between a client's observation, the graph's input, and the answer a client gets.

Every client (Python API, HTTP service, LangServe wrapper, Playwright runner)
goes through these two functions, so one observation always means one
invocation and one answer.
"""

from __future__ import annotations

from typing import Any

from veriloop.schemas.actions import parse_action
from veriloop.schemas.api import InteractResponse, VerificationSummary
from veriloop.schemas.observation import Observation


def observation_to_input(
    observation: Observation, task_id: str, *, new_task: bool
) -> dict[str, Any]:
    """The graph input for one observation of ``task_id``.

    ``new_task`` is True when the task has no checkpoint yet; the goal is only
    taken then (a later ``query`` cannot rewrite a running task's goal).
    """
    update: dict[str, Any] = {
        "task_id": task_id,
        "url": observation.url,
        "dom": observation.dom,
        "active_element": observation.active_element,
        "previous_url": observation.previous_url,
        "client_observations": _dump(observation.client_observations),
        "client_verification": _dump(observation.client_verification),
    }
    if observation.session_id is not None:
        update["session_id"] = observation.session_id
    if new_task:
        if not (observation.query or "").strip():
            raise ValueError("query: a new task needs a non-empty goal")
        update["goal"] = observation.query.strip()
    return update


def current_verification(state: dict[str, Any]) -> dict[str, Any] | None:
    """Inside a run (before finalize): this run's verdict on the last action, or None if it was not verified.

    ``verification_result`` persists across runs; when a run skips verification
    (new task, missing before_state) the stored verdict is an older one.
    """
    result = state.get("verification_result")
    history = state.get("action_history") or []
    if not result or not history:
        return None
    return result if result.get("step_index") == len(history) - 1 else None


def state_to_response(state: dict[str, Any]) -> InteractResponse:
    """The answer for the invocation that produced ``state``: its action, status and verdict."""
    history = state.get("action_history") or []
    if not history:
        raise ValueError("the graph produced no action")
    last = history[-1]
    verification = state.get("verification_result")
    summary = None
    # The verdict belongs to this answer only if it judged the action before the one just chosen.
    if verification and verification.get("step_index") == last["step_index"] - 1:
        summary = VerificationSummary(
            goal_achieved=verification.get("goal_achieved"),
            success=verification["success"],
            confidence=verification["confidence"],
            observations=verification.get("observations", []),
            semantic_summary=verification.get("semantic_summary", ""),
            failure_category=verification.get("failure_category"),
            model_called=verification.get("model_called", False),
        )
    return InteractResponse(
        task_id=state["task_id"],
        step_index=last["step_index"],
        action=last["action"],
        parsed_action=parse_action(last["action"]),
        target=last.get("target"),
        thought=last.get("thought", ""),
        status=state.get("status", "executing"),
        verification=summary,
        correction_strategy=last.get("correction_strategy"),
    )


def _dump(model) -> dict[str, Any] | None:
    return model.model_dump() if model is not None else None
