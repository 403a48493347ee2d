"""What running a manifest produces: executions, check results, attempts, step results, critiques,
replans and the run report. Routers read only the typed fields here (``status``,
``verification_status``, ``passed``), never ``notes``, ``diagnosis`` or other prose."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticSerializationError, to_json

from veriloop.schemas.base import WireModel
from veriloop.schemas.manifest import Manifest

PlanStepStatus = Literal[
    "pending",
    "running",
    "testing",
    "completed",
    "test_failed",
    "failed",
    "blocked",
    "awaiting_review",
    "cancelled",
]
"""What happened to the step. completed: every applicable check passed. test_failed: its tests
failed. failed: another check failed, the executor failed, or a person rejected it. blocked: never
ran (an upstream gate failed, a dependency failed, or the run halted). cancelled: unfinished
when a person cancelled the run. What the run did about a
failed step is its ``disposition``, never its status."""
FINISHED_STATUSES: frozenset[str] = frozenset(
    {"completed", "test_failed", "failed", "blocked", "cancelled"}
)
VerificationStatus = Literal["verified", "partial_pass", "execution_failed", "rejected"]
"""The verify-fix loop's outcome (seed 004): all checks passed; the budget was spent with checks
still failing; the executor itself failed (not a verification failure, no budget spent); a person
rejected the step (human_review)."""
Disposition = Literal["continue", "skip", "block", "halt", "replan"]
"""What the run did about a finished step, from its on_failure policy: continue: it completed.
skip: it failed, the run went on without it. block: it failed, its downstream is blocked. halt: it
failed, the run stopped. replan: it failed, the replanner redesigned it."""
CheckType = Literal[
    "schema",
    "predicate",
    "notes",
    "pending_tool_calls",
    "command",
    "tests",
    "integrity",
    "review",
    "human_review",
    "sub_plan",
]
"""In cost order. integrity: the step did not change its tests or check scripts, forge its test
report or add a tamper-scan trick (applies only where one of these could happen). human_review: a person's verdict. sub_plan: every step of a nested plan completed."""
ToolCallStatus = Literal["ok", "error", "pending"]
Severity = Literal["critical", "warning"]
RunStatus = Literal[
    "running", "awaiting_review", "paused", "completed", "failed", "rejected", "cancelled"
]
"""completed: every step completed. failed: anything else once the run stopped. rejected: the
manifest did not pass the critic (nothing ran). cancelled: a person cancelled it (POST
/api/plans/{runId}/cancel); its unfinished steps are cancelled too. paused (the service's view):
it stopped early (a model outage, a crash, a restart) and nothing executes it; ``error`` says why
and POST /api/plans/{runId}/resume continues it."""
ENDED_STATUSES: frozenset[str] = frozenset({"completed", "failed", "rejected", "cancelled"})
"""Run statuses after which nothing more runs."""


STEP_OUTPUT_BYTES = 100_000
"""A step's output is stored whole while its JSON is at most this long; a larger one as a marker."""
OUTPUT_NESTING = 64
"""Levels of lists and mappings a stored output may have (the checkpointer's encoder stops at 254)."""
OUTPUT_HEAD_CHARS = 2_000
"""How much of an output's JSON a marker keeps."""
REPORT_BYTES = 8_000_000
"""A report's JSON past this gives way (:meth:`PlanRunReport.within`): outputs, earlier attempts,
the manifest, in that order."""


def capped_output(output: Any) -> Any:
    """``output`` as it is stored and checked: itself, or, when its JSON is over
    :data:`STEP_OUTPUT_BYTES`, nested deeper than :data:`OUTPUT_NESTING` or not encodable at all,
    the marker ``{"truncated": true, "bytes": <its JSON's size>, "head": "...", "reason": "..."}``.
    Checks read the marker, so an output too large to keep never passes a check on its content."""
    try:
        text = to_json(output, fallback=str)
    except PydanticSerializationError as exc:  # too deep for any encoder, or containing itself
        return {"truncated": True, "bytes": None, "head": "", "reason": str(exc)}
    if len(text) > STEP_OUTPUT_BYTES:
        reason = f"over {STEP_OUTPUT_BYTES} bytes of JSON"
    elif _nesting(output) > OUTPUT_NESTING:
        reason = f"nested deeper than {OUTPUT_NESTING} levels"
    else:
        return output
    head = text[:OUTPUT_HEAD_CHARS].decode("utf-8", errors="ignore")
    return {"truncated": True, "bytes": len(text), "head": head, "reason": reason}


def _nesting(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


StepOutput = Annotated[Any, AfterValidator(capped_output)]
"""A step's output, capped when it is stored (:func:`capped_output`)."""


class ToolCallRecord(WireModel):
    """One tool call an ``llm`` step made; ``pending`` means it never got a result."""

    id: str
    name: str
    arguments: Any = None
    status: ToolCallStatus
    result: str = Field(default="", description="The result or error text, truncated.")


class ExecutionResult(WireModel):
    """What one executor run produced, before any check."""

    ok: bool = Field(description="The executor itself worked (False: execution_failed).")
    output: StepOutput = None
    notes: str = Field(default="", description="The executor's own notes ([SUCCESS]: / [FAIL]:).")
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    error: str | None = Field(default=None, description="Why the executor failed, when not ok.")
    usage: dict[str, dict[str, Any]] = Field(default_factory=dict, description="Usage per purpose.")
    layers: list[str] | None = Field(
        default=None,
        description="The confinement layers the executor's process ran under (limits, "
        "namespaces, user, no_caps, seccomp, paths; see docs/plans.md); None: it started none.",
    )


class CheckResult(WireModel):
    """One check's result on one attempt."""

    name: str = Field(description="Stable within a step: 'schema', 'predicate[0]', 'tests', ...")
    type: CheckType
    passed: bool
    errored: bool = Field(
        default=False, description="The check itself could not run (counts as not passed)."
    )
    diagnosis: str = Field(default="", description="Why it failed, for people and the fix prompt.")
    output: str = Field(default="", description="Check output (test failures...), truncated.")
    details: dict[str, Any] = Field(
        default_factory=dict, description="Structured facts, e.g. tests: collected, failed."
    )


class AttemptReport(WireModel):
    """One execute-and-check round of a step."""

    run_number: int = Field(ge=1)
    execution_ok: bool
    output_excerpt: str = ""
    notes: str = ""
    error: str | None = None
    checks: list[CheckResult] = Field(default_factory=list)
    passed: bool = Field(description="Executed, and every applicable check passed.")
    blocker: bool = Field(
        default=False,
        description="The executor reported that it cannot go on ([FAIL]: notes) without calling "
        "any tool: a corrective prompt would not give it what it lacks.",
    )
    usage: dict[str, dict[str, Any]] = Field(default_factory=dict)
    corrective_prompt: str | None = Field(
        default=None,
        description="What a retry was told: the task, the latest failure, the checks to keep "
        "passing (None for a first attempt).",
    )
    started_at: datetime | None = Field(default=None, description="When the attempt started (UTC).")
    duration_s: float = Field(default=0.0, description="Wall time of the execution and its checks.")
    layers: list[str] | None = Field(
        default=None,
        description="The confinement layers the processes of this attempt (shell step, command "
        "checks, test runs) ran under (limits, namespaces, user, no_caps, seccomp, paths); "
        "None: it started none.",
    )


class StepResult(WireModel):
    """A step's final state in a run."""

    step_id: str
    status: PlanStepStatus
    verification_status: VerificationStatus | None = None
    output: StepOutput = None
    notes: str = ""
    diagnosis: str = Field(default="", description="The latest failure, for people and replans.")
    attempts: list[AttemptReport] = Field(default_factory=list)
    oscillated: bool = Field(
        default=False, description="The loop stopped early: the same checks kept alternating."
    )
    usage: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Usage per purpose, summed over attempts."
    )
    review: dict[str, Any] | None = Field(
        default=None, description="A human review's answer: {approved, comment}."
    )
    sub_run: dict[str, Any] | None = Field(
        default=None, description="PlanRunReport dump of a nested plan step."
    )
    disposition: Disposition | None = Field(
        default=None,
        description="What the run did about the failed step (skip, block, halt, replan); None "
        "while it runs and for a completed step.",
    )
    duration_s: float | None = Field(
        default=None,
        description="Wall time from the first attempt's start to the step's result; None for a "
        "step that never ran or a human review (a person's wait is not the step's work).",
    )

    @model_validator(mode="before")
    @classmethod
    def _skipped_was_a_disposition(cls, data: Any) -> Any:
        # Checkpoints written before statuses and dispositions were separated say "skipped".
        if isinstance(data, dict) and data.get("status") == "skipped":
            return {**data, "status": "failed", "disposition": "skip"}
        return data


class CriticFinding(WireModel):
    """One problem the plan critic found."""

    rule: str = Field(description="missing_gate, parallel_explosion, optimism_bias, ...")
    severity: Severity
    message: str
    step_ids: list[str] = Field(default_factory=list)


class Critique(WireModel):
    """The plan critic's report."""

    score: int = Field(ge=0, le=10)
    findings: list[CriticFinding] = Field(default_factory=list)
    summary: str = ""
    recommendations: list[str] = Field(default_factory=list)
    llm_approved: bool | None = Field(
        default=None, description="The optional LLM review's <Approved> tag; None when not asked."
    )

    @property
    def has_critical(self) -> bool:
        """A critical finding, or an LLM review that did not approve."""
        return self.llm_approved is False or any(f.severity == "critical" for f in self.findings)


class ReplanRecord(WireModel):
    """One replan: which blocked steps caused it, why, and what changed."""

    round: int = Field(ge=1)
    blocked: list[str] = Field(description="The failed steps that asked for the replan.")
    replaced: list[str] = Field(
        description="Steps redesigned: the blocked ones and their downstream."
    )
    diagnosis: dict[str, str] = Field(default_factory=dict)
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    changes: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Replaced step id -> DeepDiff's field-level difference between the step and "
        "its replacement with the same id (values_changed, iterable_item_added, ...).",
    )
    summary: str = Field(default="", description="The replanner's own account of the change.")


class ReviewDecision(WireModel):
    """A person's answer to a human review step or a command approval."""

    approved: bool
    comment: str = ""


class PendingReview(WireModel):
    """A human review the run is waiting for."""

    step_id: str
    interrupt_id: str
    question: str
    context: dict[str, Any] = Field(default_factory=dict)


class PlanRunReport(WireModel):
    """A plan run as its checkpoint holds it."""

    run_id: str
    status: RunStatus
    goal: str = ""
    model: str = Field(default="", description="The run's default model (agents may name others).")
    manifest: Manifest | None = None
    critique: Critique | None = None
    steps: dict[str, StepResult] = Field(default_factory=dict)
    superseded: list[StepResult] = Field(
        default_factory=list, description="Failed steps a replan replaced, kept for the record."
    )
    replan_history: list[ReplanRecord] = Field(default_factory=list)
    halted: bool = False
    halt_reason: str = ""
    pending_reviews: list[PendingReview] = Field(default_factory=list)
    usage: dict[str, dict[str, Any]] = Field(default_factory=dict)
    started_at: datetime | None = Field(default=None, description="When the run started (UTC).")
    ended_at: datetime | None = Field(
        default=None,
        description="When the run ended (UTC); None while it runs or waits for review.",
    )
    duration_s: float | None = Field(
        default=None, description="Wall time from start to end; None until the run ended."
    )
    truncated: dict[str, Any] | None = Field(
        default=None,
        description="Set when the report was cut to fit: {bytes: its full size, omitted: what "
        "gave way (step outputs, earlier attempts, the manifest)}.",
    )

    def within(self, max_bytes: int = REPORT_BYTES) -> PlanRunReport:
        """This report, or, when its JSON is over ``max_bytes``, a copy that fits as well as it
        can: steps' outputs and nested runs become size markers (notes and diagnoses keep their
        head), then each step keeps only its last attempt, then the manifest goes; ``truncated``
        says what gave way."""
        size = len(self.model_dump_json())
        if size <= max_bytes:
            return self
        report, omitted = self, []
        for what, cut in _REPORT_CUTS:
            report = cut(report)
            omitted.append(what)
            if len(report.model_dump_json()) <= max_bytes:
                break
        return report.model_copy(update={"truncated": {"bytes": size, "omitted": omitted}})


def _each_step(report: PlanRunReport, cut: Callable[[StepResult], StepResult]) -> PlanRunReport:
    return report.model_copy(
        update={
            "steps": {step_id: cut(step) for step_id, step in report.steps.items()},
            "superseded": [cut(step) for step in report.superseded],
        }
    )


def _without_output(step: StepResult) -> StepResult:
    size = len(to_json(step.output, fallback=str))
    marker = {"truncated": True, "bytes": size, "head": "", "reason": "the report is too large"}
    sub_run = step.sub_run and {key: step.sub_run.get(key) for key in ("run_id", "status")}
    texts = {name: getattr(step, name)[:OUTPUT_HEAD_CHARS] for name in ("notes", "diagnosis")}
    return step.model_copy(update={"output": marker, "sub_run": sub_run, **texts})


_REPORT_CUTS = (
    ("step outputs", lambda report: _each_step(report, _without_output)),
    (
        "earlier attempts",
        lambda report: _each_step(
            report, lambda step: step.model_copy(update={"attempts": step.attempts[-1:]})
        ),
    ),
    ("manifest", lambda report: report.model_copy(update={"manifest": None})),
)
