"""Which steps may run next, and what a failed step does to the run.

Readiness: a step is ready once every dependency has finished (a step's level is one more than
its deepest dependency). The next batch is every ready step, lowest levels first and each level in
manifest order (the first ones, when the caller limits a batch's size): the remainder of a wide
level split over batches shares a batch with the next level's steps whose dependencies are done.
A batch sends each ready step with its *lane* (:func:`lanes`): the chain of steps after it that
each need only the step before, run one after another within the batch, so a chain does not wait
for its batch's slowest step at every link. A lane at its end takes the next step of the batch's
*window* (:func:`window`) whose dependencies have all completed, so joins, forks and the rest of a
wide level start as capacity frees too. A lane stops at a step that did not complete, and every
lane of the batch stops at its next step once any step of the batch did not complete: what was not
started is dispatched (or blocked) by the next batch, after the failure's policy applied.
Steps that may change the same files never run at the same time, so a step's diff holds its own
writes only (DESIGN.md, Trust): a batch keeps a lane's steps, and a window's, only while their
write scopes (:func:`write_globs`) cannot share a path with those of the batch's other lanes
(:func:`apart`); the rest wait for a later batch. Steps that declare disjoint ``writes:`` (or
change no file) run side by side.
A step whose dependency failed or was blocked is blocked itself and never runs, unless the failed
dependency's disposition is ``skip`` (its policy lets the run go on without it): then the step
runs with that dependency's result missing (``None``).

Failure policy (seed 003's matrix; ``critical`` decides what an exhausted step does). A step's
status always says what happened to it (``failed``, ``test_failed``); what the run did about it is
its separate ``disposition``:

================  ==========================  ==========================
on_failure        critical                    not critical
================  ==========================  ==========================
halt_if_critical  halt the run                continue without it
continue          continue without it         continue without it
retry             halt (retries spent)        continue (retries spent)
replan            replan; halt when budgets   replan; continue when
                  are spent                   budgets are spent
================  ==========================  ==========================

``stop`` and ``skip`` are deprecated spellings of ``halt_if_critical`` and ``continue``. ``retry``
also keeps the corrective loop going after the step reports a blocker (``[FAIL]:``).

A failed synthesis gate or a rejected human review never lets the run continue past it:
everything downstream of it is blocked (and a critical one halts the run), because its consumers
would get garbage.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from veriloop.engines.plan.judge.scope import literal_prefix
from veriloop.engines.plan.manifest import dependency_levels
from veriloop.schemas.manifest import AgentSpec, Manifest, ManifestStep, OnFailure
from veriloop.schemas.plan_run import FINISHED_STATUSES, Disposition

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
    """Every unfinished step whose dependencies have all finished, lowest levels first (the first
    ``limit`` of them); blocked steps are named. ``levels``: the manifest's
    :func:`dependency_levels`, when the caller keeps them."""
    status = {step_id: result.get("status") for step_id, result in results.items()}
    steps = {step.id: step for step in manifest.steps}
    ready: list[str] = []
    blocked: dict[str, str] = {}
    for level in levels if levels is not None else dependency_levels(manifest):
        untouched = True  # no step of this level has finished or is blocked
        for step_id in level:
            if status.get(step_id) in FINISHED_STATUSES:
                untouched = False
                continue
            deps = steps[step_id].depends_on
            failed = [
                dep
                for dep in deps
                if (status.get(dep) in _FAILED and not _skipped(results[dep])) or dep in blocked
            ]
            if failed:
                untouched = False
                blocked[step_id] = f"dependency {', '.join(failed)} did not complete"
            elif all(status.get(dep) in FINISHED_STATUSES for dep in deps):
                ready.append(step_id)
                if len(ready) == limit:
                    break
        if len(ready) == limit or untouched:
            # Every later step depends on an unfinished one of this level (a step's level is one
            # more than its deepest dependency's), so none is ready: a long chain's dispatch stops
            # here. Steps it would find blocked are named by a later dispatch: the last one, which
            # finds nothing ready, walks every level.
            break
    return Batch(ready=ready, blocked=blocked)


def lanes(
    manifest: Manifest,
    ready: Sequence[str],
    results: Mapping[str, Any],
    dependents: Mapping[str, Sequence[str]],
    max_steps: int,
    may_pause: Callable[[ManifestStep], bool] = lambda step: False,
) -> list[list[str]]:
    """Each ready step with the chain that follows it: its only dependent, when that dependent
    needs nothing else, then that step's only such dependent, and so on (``max_steps`` steps at
    most). A lane's next step needs only the step before it, so it may start the moment that step
    completed, whatever else its batch is still running. A step with a result (a blocked one a
    replan kept) ends a lane, and so does a step that may pause the run for a person (a human
    review, a nested plan, ``may_pause``): it starts a lane of its own in a later batch, so
    everything finished before a pause is in the run's state while it waits."""
    steps = {step.id: step for step in manifest.steps}
    found = []
    for head in ready:
        lane = [head]
        while len(lane) < max_steps:
            after = dependents.get(lane[-1], ())
            following = steps[after[0]] if len(after) == 1 else None
            if (
                following is None
                or len(following.depends_on) != 1
                or following.id in results
                or _pauses(following, may_pause)
            ):
                break
            lane.append(after[0])
        found.append(lane)
    return found


def window(
    manifest: Manifest,
    results: Mapping[str, Mapping[str, Any]],
    levels: Sequence[Sequence[str]],
    sent: Collection[str],
    limit: int | None,
    may_pause: Callable[[ManifestStep], bool] = lambda step: False,
) -> list[str]:
    """The steps a batch may also start, besides the lanes it was sent with: each the moment every
    one of its dependencies has completed, in the batch or before it (a lane that ends takes the
    next such step; joins and forks run this way). Unfinished steps whose every dependency
    completed before the batch, was ``sent``, or is an earlier step of the window; lowest levels
    first, at most ``limit``; never a step that may pause the run (see :func:`lanes`)."""
    steps = {step.id: step for step in manifest.steps}
    inside = set(sent)
    chosen: list[str] = []
    for level in levels:
        for step_id in level:
            if limit is not None and len(chosen) >= limit:
                return chosen
            step = steps[step_id]
            if step_id in inside or step_id in results or _pauses(step, may_pause):
                continue
            if all(
                dep in inside or (results.get(dep) or {}).get("status") == "completed"
                for dep in step.depends_on
            ):
                chosen.append(step_id)
                inside.add(step_id)
    return chosen


READ_ONLY_TOOLS = frozenset({"read_file", "list_files"})
"""Workspace tools that change no file: an agent with only these writes nothing."""


def write_globs(step: ManifestStep, agent: AgentSpec | None) -> list[str] | None:
    """The paths ``step`` may change, for scheduling: its ``writes:`` globs; none for a human review
    or an ``llm`` step whose agent has only read-only tools; None (any path) otherwise, and for a
    step that may write tests (test files are found by name, anywhere)."""
    if step.type == "human_review":
        return []
    if step.writes_tests:
        return None
    if step.writes is not None:
        return list(step.writes)
    if step.executor == "llm" and agent is not None and set(agent.tools) <= READ_ONLY_TOOLS:
        return []
    return None


@dataclass
class WriteClaims:
    """The write scopes of steps that run at the same time."""

    anything: bool = False
    """A step that may change any path is among them."""
    prefixes: list[str] = field(default_factory=list)
    """The literal prefixes of their globs, sorted (every path a glob matches starts with its
    prefix, so two globs whose prefixes do not start one another share no path)."""

    def admits(self, globs: list[str] | None) -> bool:
        """A step with these write globs could change no path the claimed ones may."""
        if globs == []:
            return True
        if globs is None:
            return not self.anything and not self.prefixes
        return not self.anything and not any(self._overlaps(literal_prefix(g)) for g in globs)

    def claim(self, globs: list[str] | None) -> None:
        if globs is None:
            self.anything = True
        for glob in globs or ():
            insort(self.prefixes, literal_prefix(glob))

    def _overlaps(self, prefix: str) -> bool:
        at = bisect_left(self.prefixes, prefix)  # a claimed prefix that starts with this one
        if at < len(self.prefixes) and self.prefixes[at].startswith(prefix):
            return True
        claimed = set(self.prefixes)  # or one this prefix starts with
        return any(prefix[:end] in claimed for end in range(len(prefix) + 1))


def apart(
    manifest: Manifest, lanes: Sequence[Sequence[str]], claims: WriteClaims | None = None
) -> tuple[list[list[str]], WriteClaims]:
    """The lanes cut where a step could change a path another lane's steps may (a lane's own
    steps run one after another); a lane whose first step is cut waits for a later batch. The
    first lane always runs. Returns the lanes kept and their claims (:meth:`WriteClaims.admits`
    then tells which window steps may join them)."""
    steps = {step.id: step for step in manifest.steps}
    claims = claims if claims is not None else WriteClaims()
    kept: list[list[str]] = []
    for lane in lanes:
        own: list[list[str] | None] = []
        for step_id in lane:
            step = steps[step_id]
            globs = write_globs(step, manifest.agents.get(step.agent or ""))
            if not claims.admits(globs):
                break
            own.append(globs)
        if own:
            kept.append(list(lane[: len(own)]))
            for globs in own:
                claims.claim(globs)
    return kept, claims


def _pauses(step: ManifestStep, may_pause: Callable[[ManifestStep], bool]) -> bool:
    """The step may pause the run for a person: a human review, a nested plan, or ``may_pause``."""
    return step.type == "human_review" or step.executor == "plan" or may_pause(step)


def _skipped(result: Mapping[str, Any]) -> bool:
    """A failed step whose policy lets the run go on without it."""
    return result.get("disposition") == "skip"


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
    if step.on_failure == "continue":
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


def policy_matrix() -> list[tuple[str, Disposition, Disposition, Disposition, Disposition]]:
    """Each ``on_failure`` policy's disposition of a failed task step, read off :func:`disposition`:
    (policy, critical, not critical, critical once replans are spent, not critical once spent)."""
    rows = []
    for policy in get_args(OnFailure):
        cells = [
            disposition(
                ManifestStep(id="s", executor="llm", on_failure=policy, critical=critical),
                "failed",
                replan_allowed=allowed,
            )
            for allowed in (True, False)
            for critical in (True, False)
        ]
        rows.append((policy, *cells))
    return rows
