"""Reading a plan run out of its state: the one report every interface (Python, CLI, HTTP, the
HTML page, a parent plan step) shows."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from veriloop.schemas.plan_run import FINISHED_STATUSES, PendingReview, PlanRunReport, StepResult


def state_to_report(
    values: Mapping[str, Any],
    *,
    pending_reviews: Sequence[PendingReview] = (),
    in_flight: Mapping[str, Mapping[str, Any]] | None = None,
) -> PlanRunReport:
    """The run's report; a run with pending reviews is ``awaiting_review`` whatever else it says.

    ``in_flight``: step id -> StepResult dump, for steps of the current batch whose results are
    not in the run's state yet (``veriloop.plans.steps_in_flight``: a report taken mid-run, paused,
    or after a crash).
    """
    status = values.get("status") or "running"
    if status == "cancelled":  # its pending reviews and in-flight steps ended with it
        pending_reviews, in_flight = (), None
    elif pending_reviews:
        status = "awaiting_review"
    order = [s["id"] for s in (values.get("plan") or {}).get("steps", [])]
    results = {**(in_flight or {}), **(values.get("step_results") or {})}
    steps = {
        step_id: StepResult.model_validate(results[step_id])
        for step_id in [*order, *sorted(set(results) - set(order))]
        if step_id in results
    }
    started, ended = values.get("started_at"), values.get("ended_at")
    return PlanRunReport(
        run_id=values.get("run_id", ""),
        status=status,
        goal=values.get("goal", ""),
        model=values.get("model", ""),
        manifest=values.get("plan") or None,
        critique=values.get("critique") or None,
        steps=steps,
        superseded=[StepResult.model_validate(r) for r in values.get("superseded") or []],
        replan_history=values.get("replan_history") or [],
        halted=bool(values.get("halted")),
        halt_reason=values.get("halt_reason", ""),
        pending_reviews=list(pending_reviews),
        usage=values.get("usage") or {},
        started_at=_moment(started),
        ended_at=_moment(ended),
        duration_s=round(ended - started, 3) if started and ended else None,
    )


def cancelled_update(report: PlanRunReport, reason: str) -> dict[str, Any]:
    """The state update that ends a run as ``cancelled``: every step of its plan without a finished
    status (running, testing, awaiting review, never started) is ``cancelled`` with ``reason``,
    keeping the attempts it made. Steps its lanes finished but had not handed over yet are
    written as they are (the update ends the lanes)."""
    steps = [step.id for step in report.manifest.steps] if report.manifest else []
    results = {
        step_id: StepResult(step_id=step_id, status="cancelled", diagnosis=reason)
        for step_id in steps
        if step_id not in report.steps
    }
    for step_id, result in report.steps.items():
        if result.status not in FINISHED_STATUSES:
            result = result.model_copy(
                update={"status": "cancelled", "diagnosis": result.diagnosis or reason}
            )
        results[step_id] = result
    return {
        **({"step_results": {k: r.model_dump() for k, r in results.items()}} if results else {}),
        "status": "cancelled",
        "ended_at": time.time(),
    }


def _moment(epoch_s: float | None) -> datetime | None:
    return datetime.fromtimestamp(epoch_s, UTC) if epoch_s else None
