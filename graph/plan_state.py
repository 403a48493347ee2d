"""The plan graph's state: one plan run (thread id = run id), and one step's verify-fix loop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from langgraph.channels import DeltaChannel
from typing_extensions import TypedDict

from veriloop.graph.state import history
from veriloop.schemas.manifest import SandboxMode
from veriloop.schemas.usage import add_usage

StepMove = Literal[
    "verified", "retry", "partial_pass", "execution_failed", "oscillating", "blocker"
]

RESULTS_SNAPSHOT_EVERY = 200
"""``step_results`` is stored whole at every 200th update, as the new results only in between.

A checkpoint that stored every result so far made a chain's bytes grow with the square of its
length (131.7 MB for 200 steps). A whole copy every 200 updates (about one a step in a chain,
one a batch in a fan) costs a 1,000-step chain five copies; loading a run replays at most 200
updates of results (``benchmarks.plan_scaling``, docs/plans.md)."""


def merge_results(
    results: dict[str, dict[str, Any]], batches: Sequence[dict[str, dict[str, Any] | None]]
) -> dict[str, dict[str, Any]]:
    """Reducer of ``step_results``: each batch's results by step id, in order; ``None`` removes
    a key (a step a replan replaced). Parallel steps write disjoint keys."""
    merged = dict(results or {})
    for batch in batches:
        for step_id, result in (batch or {}).items():
            if result is None:
                merged.pop(step_id, None)
            else:
                merged[step_id] = result
    return merged


def _latest(value: Any, writes: Sequence[Any]) -> Any:
    """The last write wins."""
    return writes[-1]


def results() -> DeltaChannel:
    """Step results' channel: a checkpoint stores the results its superstep wrote."""
    return DeltaChannel(merge_results, snapshot_frequency=RESULTS_SNAPSHOT_EVERY)


def per_revision() -> DeltaChannel:
    """A value that changes a few times a run and may be large (the manifest, its critique): stored
    with the checkpoint that changed it, not copied into every later one."""
    return DeltaChannel(_latest, snapshot_frequency=1)


class PlanInput(TypedDict, total=False):
    """What starts a plan run."""

    run_id: str
    """The run (also the checkpointer thread id)."""
    goal: str
    """What the plan is for; the meta-planner writes a manifest from it when none is given."""
    manifest: Any
    """The user's manifest: a mapping, or YAML/JSON text; None to let the meta-planner write one.
    Cleared once the plan node parsed it."""
    depth: int
    """Nesting depth: 1 for a top-level run, one more inside each plan step."""
    plan: Annotated[dict[str, Any], per_revision()]
    """The normalised Manifest dump being run (a nested plan step passes it in; replans replace
    it); empty or None while there is none."""
    plan_origin: Literal["user", "model"]
    """Who wrote the plan: a user's plan is never sent back to the planner."""


class PlanState(PlanInput, total=False):
    """Everything a plan run keeps."""

    critique: Annotated[dict[str, Any], per_revision()]
    """Critique dump of the current plan (empty or None before the critic ran)."""
    hidden: Annotated[dict[str, str], per_revision()]
    """The manifest's hidden files, moved out of the workspace while the run goes on:
    ``{path: sha256}`` of their copies in the snapshot store (restored by finalize)."""
    model: str
    """The context's model when the run started (agents may name their own), for reports."""
    plan_revisions: int
    """Times a model-written plan went back to the planner."""
    plan_approved: bool
    """The critic found nothing critical in the current plan."""
    lanes: list[list[str]]
    """The current batch: one lane per ``Send``, a ready step and the chain run after it."""
    window: list[str]
    """Steps the current batch's lanes may also take, each once its dependencies completed."""
    batch_id: str
    """Names the current batch in the process running it (``nodes/plan/lane``)."""
    step_results: Annotated[dict[str, dict[str, Any]], results()]
    """StepResult dumps by step id; parallel steps write disjoint keys."""
    superseded: Annotated[list[dict[str, Any]], history()]
    """StepResult dumps of failed steps that a replan replaced (kept for the report)."""
    replan_required: bool
    """The last batch ended with steps whose policy asks for a replan."""
    replan_steps: list[str]
    """The blocked steps the next replan covers."""
    replan_count: int
    """Replans spent in this run."""
    replan_attempts: dict[str, int]
    """Replans asked for by each step id."""
    replan_history: Annotated[list[dict[str, Any]], history()]
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
    """What the plan graph sends a lane (one ``Send`` each); what a lane's steps only read is
    stored with the checkpoint that changed it, not copied into every later one."""

    run_id: str
    """The run this step belongs to."""
    goal: Annotated[str, per_revision()]
    """The run's goal, for reviews."""
    step: Annotated[dict[str, Any], per_revision()]
    """The ManifestStep dump."""
    agents: Annotated[dict[str, Any], per_revision()]
    """The manifest's agents (AgentSpec dumps by name)."""
    depends: Annotated[dict[str, Any], per_revision()]
    """Outputs of the step's dependencies (None for a skipped one)."""
    depth: int
    """Nesting depth of the run."""
    sandbox: SandboxMode | None
    """The manifest's sandbox setting (the stricter of it and the context's applies)."""
    hidden: Annotated[dict[str, str], per_revision()]
    """The run's hidden files (``PlanState.hidden``): the judge's tree has them."""
    claimed: Annotated[dict[str, list[str]], per_revision()]
    """The ``writes:`` globs each step of the manifest declares (a step's scope check does not
    count another step's declared files as its own)."""
    lane: Annotated[list[dict[str, Any]], per_revision()]
    """ManifestStep dumps of the steps run after this one, in order, each once the one before it
    completed (``engines.plan.policy.lanes``); stored when it changes, not in every checkpoint."""
    batch_id: str
    """The batch this step was sent in (``PlanState.batch_id``)."""
    windowed: bool
    """The batch has a window: a lane at the end of its chain may take one of its steps."""


class StepOutput(TypedDict, total=False):
    """What a step hands back to the plan graph."""

    step_results: Annotated[dict[str, dict[str, Any]], results()]
    """``{step_id: StepResult dump}``."""
    usage: Annotated[dict[str, dict[str, Any]], add_usage]
    """What the step's attempts cost, per purpose."""


class StepState(StepInput, StepOutput, total=False):
    """One step's verify-fix loop; every attempt is a checkpoint. What an attempt writes once and
    later nodes only read (the task, the baseline, the execution, the attempts) is stored with the
    checkpoint that changed it, not copied into every later one of the step."""

    task: Annotated[str, per_revision()]
    """The original task text (input with dependency results), kept for every corrective prompt."""
    prompt: Annotated[str, per_revision()]
    """What the executor gets on the next attempt: the task, then corrective prompts."""
    baseline: Annotated[dict[str, Any], per_revision()]
    """The pre-step tree (copies in the snapshot store) and fingerprints of tests and check scripts."""
    commands_approved: bool
    """A person approved this model-written step's commands (or none needed approval)."""
    execution: Annotated[dict[str, Any], per_revision()]
    """ExecutionResult dump of the latest attempt."""
    started_at: float
    """Epoch seconds when the latest attempt started (wall clock: an attempt may resume elsewhere)."""
    attempts: Annotated[list[dict[str, Any]], per_revision()]
    """AttemptReport dumps, in order."""
    move: StepMove
    """The fix loop's decision after the latest attempt."""
    review: dict[str, Any] | None
    """A human review's answer: {approved, comment}."""
    sub_run: dict[str, Any] | None
    """PlanRunReport dump of a nested plan."""
    lane_move: Literal["next", "end"]
    """After a step: its lane's next step starts ("next"), or this task ends."""
