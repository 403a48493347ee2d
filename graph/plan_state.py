"""The plan graph's state: one plan run (thread id = run id), and one step's verify-fix loop."""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal

from typing_extensions import TypedDict

from veriloop.schemas.manifest import SandboxMode
from veriloop.schemas.usage import add_usage

StepMove = Literal[
    "verified", "retry", "partial_pass", "execution_failed", "oscillating", "blocker"
]


def merge_results(
    left: dict[str, dict[str, Any]] | None, right: dict[str, dict[str, Any] | None] | None
) -> dict[str, dict[str, Any]]:
    """Reducer of ``step_results``: parallel steps write disjoint keys; ``None`` removes a key."""
    merged = dict(left or {})
    for step_id, result in (right or {}).items():
        if result is None:
            merged.pop(step_id, None)
        else:
            merged[step_id] = result
    return merged


class PlanInput(TypedDict, total=False):
    """What starts a plan run."""

    run_id: str
    """The run (also the checkpointer thread id)."""
    goal: str
    """What the plan is for; the meta-planner writes a manifest from it when none is given."""
    manifest: Any
    """The user's manifest: a mapping, or YAML/JSON text; None to let the meta-planner write one."""
    depth: int
    """Nesting depth: 1 for a top-level run, one more inside each plan step."""
    plan: dict[str, Any] | None
    """The normalised Manifest dump being run (a nested plan step passes it in; replans replace it)."""
    plan_origin: Literal["user", "model"]
    """Who wrote the plan: a user's plan is never sent back to the planner."""


class PlanState(PlanInput, total=False):
    """Everything a plan run keeps."""

    critique: dict[str, Any] | None
    """Critique dump of the current plan."""
    model: str
    """The context's model when the run started (agents may name their own), for reports."""
    plan_revisions: int
    """Times a model-written plan went back to the planner."""
    plan_approved: bool
    """The critic found nothing critical in the current plan."""
    ready: list[str]
    """Ids of the steps dispatched in the current batch."""
    step_results: Annotated[dict[str, dict[str, Any]], merge_results]
    """StepResult dumps by step id; parallel steps write disjoint keys."""
    superseded: Annotated[list[dict[str, Any]], operator.add]
    """StepResult dumps of failed steps that a replan replaced (kept for the report)."""
    replan_required: bool
    """The last batch ended with steps whose policy asks for a replan."""
    replan_steps: list[str]
    """The blocked steps the next replan covers."""
    replan_count: int
    """Replans spent in this run."""
    replan_attempts: dict[str, int]
    """Replans asked for by each step id."""
    replan_history: Annotated[list[dict[str, Any]], operator.add]
    """ReplanRecord dumps, in order."""
    halted: bool
    """A failed step's policy stopped the run."""
    halt_reason: str
    """Why the run stopped early, for people."""
    status: Literal["running", "completed", "failed", "rejected"]
    """The run's status once finalize ran (awaiting_review is read from pending interrupts)."""
    usage: Annotated[dict[str, dict[str, Any]], add_usage]
    """Usage per purpose over the whole run."""
    started_at: float
    """Epoch seconds when the run started (wall clock: a run may resume in another process)."""
    ended_at: float
    """Epoch seconds when finalize ran."""


class StepInput(TypedDict, total=False):
    """What the plan graph sends a step (one ``Send`` per ready step)."""

    run_id: str
    """The run this step belongs to."""
    goal: str
    """The run's goal, for reviews."""
    step: dict[str, Any]
    """The ManifestStep dump."""
    agents: dict[str, Any]
    """The manifest's agents (AgentSpec dumps by name)."""
    depends: dict[str, Any]
    """Outputs of the step's dependencies (None for a skipped one)."""
    depth: int
    """Nesting depth of the run."""
    sandbox: SandboxMode | None
    """The manifest's sandbox setting (the stricter of it and the context's applies)."""


class StepOutput(TypedDict, total=False):
    """What a step hands back to the plan graph."""

    step_results: Annotated[dict[str, dict[str, Any]], merge_results]
    """``{step_id: StepResult dump}``."""
    usage: Annotated[dict[str, dict[str, Any]], add_usage]
    """What the step's attempts cost, per purpose."""


class StepState(StepInput, StepOutput, total=False):
    """One step's verify-fix loop; every attempt is a checkpoint."""

    task: str
    """The original task text (input with dependency results), kept for every corrective prompt."""
    prompt: str
    """What the executor gets on the next attempt: the task, then corrective prompts."""
    baseline: dict[str, Any]
    """The pre-step tree (copies in the snapshot store) and fingerprints of tests and check scripts."""
    commands_approved: bool
    """A person approved this model-written step's commands (or none needed approval)."""
    execution: dict[str, Any] | None
    """ExecutionResult dump of the latest attempt."""
    started_at: float
    """Epoch seconds when the latest attempt started (wall clock: an attempt may resume elsewhere)."""
    attempts: list[dict[str, Any]]
    """AttemptReport dumps, in order."""
    move: StepMove
    """The fix loop's decision after the latest attempt."""
    review: dict[str, Any] | None
    """A human review's answer: {approved, comment}."""
    sub_run: dict[str, Any] | None
    """PlanRunReport dump of a nested plan."""
