"""What running a manifest produces: executions, check results, attempts, step results, critiques,
replans and the run report. Routers read only the typed fields here (``status``,
``verification_status``, ``passed``), never ``notes``, ``diagnosis`` or other prose."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field, model_validator

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
]
"""What happened to the step. completed: every applicable check passed. test_failed: its tests
failed. failed: another check failed, the executor failed, or a person rejected it. blocked: never
ran (an upstream gate failed, a dependency failed, or the run halted). What the run did about a
failed step is its ``disposition``, never its status."""
FINISHED_STATUSES: frozenset[str] = frozenset({"completed", "test_failed", "failed", "blocked"})
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
RunStatus = Literal["running", "awaiting_review", "completed", "failed", "rejected"]
"""completed: every step completed. failed: anything else once the run stopped. rejected: the
manifest did not pass the critic (nothing ran)."""


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
    output: Any = None
    notes: str = Field(default="", description="The executor's own notes ([SUCCESS]: / [FAIL]:).")
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    error: str | None = Field(default=None, description="Why the executor failed, when not ok.")
    usage: dict[str, dict[str, Any]] = Field(default_factory=dict, description="Usage per purpose.")
    sandboxed: bool | None = Field(
        default=None,
        description="The executor's process ran in bubblewrap (False: unsandboxed); None: it "
        "started no process.",
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
    started_at: datetime | None = Field(default=None, description="When the attempt started (UTC).")
    duration_s: float = Field(default=0.0, description="Wall time of the execution and its checks.")
    sandboxed: bool | None = Field(
        default=None,
        description="The processes of this attempt (shell step, command checks, test runs) ran in "
        "bubblewrap (False: unsandboxed); None: it started none.",
    )


class StepResult(WireModel):
    """A step's final state in a run."""

    step_id: str
    status: PlanStepStatus
    verification_status: VerificationStatus | None = None
    output: Any = None
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
