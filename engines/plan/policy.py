"""Which steps may run next, and what a failed step does to the run.

Readiness: steps run level by level (a step's level is one more than its deepest dependency).
The next batch is the unfinished steps of the lowest level that still has any (the first ones,
when the caller limits a batch's size). A step whose
dependency failed or was blocked is blocked itself and never runs; a dependency that was
*skipped* (failed, but its policy lets the run go on) leaves the step runnable with that
dependency's result missing (``None``).

Failure policy (seed 003's matrix; ``critical`` decides what an exhausted step does):

=========== ========================== ==========================
on_failure  critical                   not critical
=========== ========================== ==========================
stop        halt the run               skip (log and continue)
skip        skip                       skip
retry       halt (fix loop exhausted)  skip (fix loop exhausted)
replan      replan; halt when budgets  replan; skip when budgets
            are spent                  are spent
=========== ========================== ==========================

A failed synthesis gate or a rejected human review never skips: everything downstream of it is
blocked (and a critical one halts the run), because its consumers would get garbage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from veriloop.engines.plan.manifest import dependency_levels
from veriloop.schemas.manifest import Manifest, ManifestStep
from veriloop.schemas.plan_run import FINISHED_STATUSES

Disposition = Literal["continue", "skip", "block", "halt", "replan"]
"""continue: the step completed. skip: failed, the run goes on without it. block: failed, its
downstream is blocked. halt: failed, the run stops. replan: failed, ask the replanner."""

_RUNNABLE_DEPENDENCY = frozenset({"completed", "skipped"})
_FAILED = frozenset({"failed", "test_failed", "blocked"})


@dataclass(frozen=True)
class Batch:
    """The next steps to run, and steps found blocked on the way."""

    ready: list[str]
    blocked: dict[str, str]
    """step id -> why it can never run (a failed or blocked dependency)."""


def next_batch(
    manifest: Manifest,
    results: Mapping[str, Mapping[str, Any]],
    levels: Sequence[Sequence[str]] | None = None,
    limit: int | None = None,
) -> Batch:
    """The runnable unfinished steps of the lowest level that has any (the first ``limit`` of
    them); blocked steps are named. ``levels``: the manifest's :func:`dependency_levels`, when
    the caller keeps them."""
    status = {step_id: result.get("status") for step_id, result in results.items()}
    blocked: dict[str, str] = {}
    for level in levels if levels is not None else dependency_levels(manifest):
        ready = []
        for step_id in level:
            if status.get(step_id) in FINISHED_STATUSES:
                continue
            failed = [
                dep
                for dep in manifest.step(step_id).depends_on
                if status.get(dep) in _FAILED or dep in blocked
            ]
            if failed:
                blocked[step_id] = f"dependency {', '.join(failed)} did not complete"
                continue
            ready.append(step_id)
        if ready:
            return Batch(ready=ready[:limit], blocked=blocked)
    return Batch(ready=[], blocked=blocked)


def dependency_results(
    step: ManifestStep, results: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """``depends`` for a step: each dependency's output (None for a skipped one)."""
    return {
        dep: (results.get(dep) or {}).get("output")
        if (results.get(dep) or {}).get("status") == "completed"
        else None
        for dep in step.depends_on
    }


def disposition(step: ManifestStep, status: str, *, replan_allowed: bool) -> Disposition:
    """What the step's final ``status`` does to the run (see the module docstring)."""
    if status == "completed":
        return "continue"
    if step.type in ("synthesis_gate", "human_review"):
        return "halt" if step.critical else "block"
    if step.on_failure == "replan" and replan_allowed:
        return "replan"
    if step.on_failure == "skip":
        return "skip"
    return "halt" if step.critical else "skip"


def replan_allowed(
    step_id: str,
    *,
    attempts_by_step: Mapping[str, int],
    replans_in_run: int,
    max_per_step: int,
    max_per_run: int,
) -> bool:
    """Replanning ``step_id`` stays within the per-step and per-run budgets."""
    return attempts_by_step.get(step_id, 0) < max_per_step and replans_in_run < max_per_run


def run_completed(manifest: Manifest, results: Mapping[str, Mapping[str, Any]]) -> bool:
    """Every step of the manifest completed (skipped, failed or blocked steps mean it did not)."""
    return all((results.get(step.id) or {}).get("status") == "completed" for step in manifest.steps)
