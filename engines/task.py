"""Task bookkeeping for goal_achieved and finalize: the finish action, status, history record, counters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from veriloop.schemas.actions import Action
from veriloop.schemas.api import TaskStatus
from veriloop.schemas.observation import BeforeStateSummary
from veriloop.schemas.records import ActionRecord, ActionSource, ActionType


def finish_action(verification: Mapping[str, Any]) -> tuple[Action, str]:
    """finish() with a description from the verdict's ``semantic_summary`` (never parsed out of ``reason``)."""
    summary = verification.get("semantic_summary") or "the goal was verified as achieved"
    return Action(kind="finish"), f"Task complete. {summary}"


def task_status(action: Action) -> TaskStatus:
    """``completed`` after finish(), ``failed`` after fail(), otherwise ``executing``."""
    return {"finish": "completed", "fail": "failed"}.get(action.kind, "executing")


def finalize_update(
    *,
    action: Action,
    thought: str,
    source: ActionSource,
    history_length: int,
    before_state: Mapping[str, Any] | None,
    plan_step_index: int | None,
    verified_success: bool,
    correction_attempts: int,
    tried_strategies: Sequence[str],
    correction_strategy: str | None,
    action_type: ActionType | None = None,
    expected_outcome: str | None = None,
    target: str | None = None,
) -> dict[str, Any]:
    """The state update closing a run: the history record, the status, and the per-step correction counters.

    ``before_state`` is kept whole in its own field (the next run verifies
    against it, and the next record replaces it); the history record keeps
    only its summary, so what a step writes does not grow with the task.

    A verified success starts a fresh correction budget for the next step; a
    correction strategy counts against the current step and is remembered so
    it is not offered again.
    """
    record = ActionRecord(
        step_index=history_length,
        action=str(action),
        target=target,
        thought=thought,
        before_state=BeforeStateSummary.of(before_state) if before_state else None,
        plan_step_index=plan_step_index,
        source=source,
        action_type=action_type,
        expected_outcome=expected_outcome,
        correction_strategy=correction_strategy,
    )
    attempts, tried = (0, []) if verified_success else (correction_attempts, list(tried_strategies))
    if correction_strategy is not None:
        attempts, tried = attempts + 1, [*tried, correction_strategy]
    return {
        "action_history": [record.model_dump()],
        "before_state": dict(before_state) if before_state else None,
        "status": task_status(action),
        "correction_attempts": attempts,
        "tried_strategies": tried,
    }
