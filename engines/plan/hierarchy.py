"""A plan run as a tree (seed 001's hierarchy views): its steps in plan order, a nested plan's steps
indented under its plan step, and each parent's aggregate over its own child steps (done/total,
failed, cost). Read from a report, so it works on a live run's checkpoint as well as a finished
one; a nested plan still running has no ``sub_run`` yet, so its report comes from ``live``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from veriloop.schemas.plan_run import PlanRunReport, StepResult
from veriloop.schemas.usage import total_usage

_FAILED = frozenset({"failed", "test_failed"})


@dataclass(frozen=True)
class Aggregate:
    """A plan's child steps: how many completed, how many there are, how many failed, the cost."""

    done: int
    total: int
    failed: int
    cost_usd: float


@dataclass(frozen=True)
class TreeRow:
    """One step of the tree."""

    path: str
    """Step ids from the top, joined by ``/`` (a nested plan's run id is its parent's plus its id)."""
    depth: int
    """0 for a step of the run itself, one more per nested plan."""
    result: StepResult
    children: Aggregate | None
    """The nested plan's aggregate, for a plan step whose child run exists."""


def aggregate(report: PlanRunReport) -> Aggregate:
    """Done/total over the manifest's steps (unscheduled ones count), failed, and the run's cost."""
    total = len(report.manifest.steps) if report.manifest else len(report.steps)
    statuses = [result.status for result in report.steps.values()]
    return Aggregate(
        done=statuses.count("completed"),
        total=total,
        failed=sum(status in _FAILED for status in statuses),
        cost_usd=total_usage(report.usage).cost_usd,
    )


def plan_tree(
    report: PlanRunReport,
    *,
    live: Mapping[str, PlanRunReport] | None = None,
    max_depth: int | None = None,
) -> list[TreeRow]:
    """The run's steps, depth first; ``live``: nested runs still going, by run id; ``max_depth``:
    1 shows only the run's own steps (a plan step still shows its aggregate)."""
    return list(_rows(report, "", 0, live or {}, max_depth))


def _rows(report, prefix, depth, live, max_depth):
    for result in _results(report):
        path = f"{prefix}{result.step_id}"
        child = _child(report, result, live)
        yield TreeRow(
            path=path,
            depth=depth,
            result=result,
            children=aggregate(child) if child is not None else None,
        )
        if child is not None and (max_depth is None or depth + 1 < max_depth):
            yield from _rows(child, f"{path}/", depth + 1, live, max_depth)


def _results(report: PlanRunReport) -> list[StepResult]:
    """Every step in plan order: results as reported, unscheduled steps ``pending``."""
    order = [step.id for step in report.manifest.steps] if report.manifest else []
    extra = [step_id for step_id in report.steps if step_id not in order]
    return [
        report.steps.get(step_id) or StepResult(step_id=step_id, status="pending")
        for step_id in [*order, *extra]
    ]


def _child(
    report: PlanRunReport, result: StepResult, live: Mapping[str, PlanRunReport]
) -> PlanRunReport | None:
    if result.sub_run is not None:
        return PlanRunReport.model_validate(result.sub_run)
    return live.get(f"{report.run_id}/{result.step_id}")
