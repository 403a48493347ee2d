"""HTTP request and response bodies of the interact API (camelCase on the wire)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from veriloop.schemas.actions import Action
from veriloop.schemas.base import WireModel
from veriloop.schemas.observation import BeforeStateSummary, Observation
from veriloop.schemas.plan import Plan
from veriloop.schemas.plan_run import Critique, PlanRunReport, ReviewDecision, RunStatus
from veriloop.schemas.records import ActionSource
from veriloop.schemas.text import clean_strings
from veriloop.schemas.usage import Usage
from veriloop.schemas.verification import FailureCategory, VerificationResult

TaskStatus = Literal["executing", "completed", "failed", "cancelled"]
"""cancelled: a person stopped it (POST /api/tasks/{taskId}/cancel); it takes no more steps."""


class CleanInput(WireModel):
    """A request body: its strings are cleaned on the way in (``veriloop.schemas.text``, the one place)."""

    @model_validator(mode="before")
    @classmethod
    def _clean(cls, data: Any) -> Any:
        return clean_strings(data)


class InteractRequest(Observation, CleanInput):
    """POST /api/agent/interact: one page snapshot."""

    request_id: str | None = Field(
        default=None, description="Client-chosen id; a retry with the same id gets the same answer."
    )
    step_index: int | None = Field(
        default=None,
        ge=0,
        lt=2**63,  # what JSON encoders and the checkpointer hold; a larger one is a 422, not a 500
        description="stepIndex of the answer whose action the client just executed; a retry of an answered request is recognised by it.",
    )


class VerificationSummary(WireModel):
    """The verdict on the previous action, as the client sees it."""

    goal_achieved: bool | None = None
    success: bool
    confidence: float
    observations: list[str] = Field(default_factory=list)
    semantic_summary: str = ""
    failure_category: FailureCategory | None = None
    model_called: bool = Field(
        default=False,
        description="Whether the model was asked for this verdict (a no-change failure is judged without it).",
    )


class InteractResponse(WireModel):
    """The next action for the client to execute."""

    task_id: str
    step_index: int
    action: str
    parsed_action: Action | None = Field(
        default=None,
        description="The action as fields (kind, elementId, text, seconds), so a client need not parse it.",
    )
    target: str | None = Field(
        default=None,
        description='What a person would call the element the action targets ("Save" for click(9)), '
        "read from the page sent with this request.",
    )
    thought: str = ""
    status: TaskStatus
    verification: VerificationSummary | None = None
    correction_strategy: str | None = Field(
        default=None,
        description="The correction strategy that chose this action, e.g. alternative_element(12); "
        "None when the action came from the plan.",
    )


class TaskSummary(WireModel):
    """A task as the task index knows it (GET /api/session/{sessionId}/task/active)."""

    task_id: str
    session_id: str | None = None
    goal: str
    url: str = Field(description="The page URL of the task's latest observation.")
    status: TaskStatus
    step_index: int = Field(description="stepIndex of the task's latest answer.")
    created_at: str = Field(description="ISO 8601, UTC.")
    updated_at: str = Field(description="ISO 8601, UTC.")


class ActionSummary(WireModel):
    """One action of a task's history (GET /api/tasks/{taskId})."""

    step_index: int
    action: str
    target: str | None = Field(
        default=None,
        description='What a person would call the element the action targets ("Save" for click(9)).',
    )
    thought: str = ""
    source: ActionSource = "action_generation"
    plan_step_index: int | None = None
    before_state: BeforeStateSummary | None = None
    expected_outcome: str | None = Field(
        default=None, description="What the action should do (the prediction path)."
    )
    correction_strategy: str | None = Field(
        default=None, description="The correction strategy that chose this action, if one did."
    )


class TaskDetail(TaskSummary):
    """GET /api/tasks/{taskId}: status, plan, action and verification history, usage and cost."""

    plan: Plan | None = None
    actions: list[ActionSummary] = Field(default_factory=list)
    verifications: list[VerificationResult] = Field(default_factory=list)
    usage: dict[str, Usage] = Field(
        default_factory=dict, description="Per purpose (planning, action, verification, ...)."
    )
    total_usage: Usage = Field(
        default_factory=Usage, description="Sum over all purposes; costUsd is the task's cost."
    )


class ErrorBody(WireModel):
    """Every error answer except 422: a message, and the task's status when it matters."""

    detail: str
    task_id: str | None = None
    status: TaskStatus | RunStatus | None = None
    code: str | None = Field(
        default=None,
        description="A machine-readable reason when it matters: no_model (503 that waiting does "
        "not cure: the service has no model configured).",
    )


# -- plan runs (POST /api/plans ...) ---------------------------------------------------------

RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
"""Client-chosen plan run ids: letters, digits and ``._:-``, at most 128 characters."""


class PlanRunRequest(CleanInput):
    """POST /api/plans: start a plan run from a manifest, a goal, or both."""

    manifest: dict[str, Any] | str | None = Field(
        default=None,
        description="The manifest: an object, or YAML/JSON text (a ``` fenced block is accepted). "
        "Without one, the meta-planner writes a manifest from the goal.",
    )
    goal: str | None = Field(
        default=None, description="What the plan is for; required when no manifest is given."
    )
    run_id: str | None = Field(
        default=None,
        pattern=RUN_ID_PATTERN,
        description="Client-chosen run id (default: a new random one); a taken id answers 409.",
    )
    concurrency: int = Field(
        default=4, ge=1, le=64, description="Steps of one dependency level run at once."
    )

    @field_validator("manifest")
    @classmethod
    def _storable(cls, manifest: Any) -> Any:
        """Every integer must fit the 64 bits that the checkpointer and the store can hold."""
        stack = [manifest]
        while stack:
            value = stack.pop()
            if isinstance(value, dict):
                stack.extend(value.values())
            elif isinstance(value, list):
                stack.extend(value)
            elif isinstance(value, int) and not -(2**63) <= value < 2**64:
                raise ValueError(f"integer {value} does not fit in 64 bits")
        return manifest


class PlanRunStarted(WireModel):
    """202 from POST /api/plans, .../reviews and .../resume: the run goes on in the server."""

    run_id: str
    status: RunStatus = Field(description="The run's status when the answer was sent.")


class PlanReviewRequest(CleanInput):
    """POST /api/plans/{runId}/reviews: answers to pending human reviews, by step id."""

    decisions: dict[str, ReviewDecision] = Field(
        min_length=1, description='Step id -> {"approved": bool, "comment": str}.'
    )


class PlanRunDetail(PlanRunReport):
    """GET /api/plans/{runId}: the run's report, plus whether a server is executing it now."""

    executing: bool = Field(
        default=False, description="A server process is running the run right now."
    )
    error: str | None = Field(
        default=None,
        description="Why the last execution stopped early (model provider down, a crash inside a "
        "step); the run kept its progress: POST /api/plans/{runId}/resume continues it.",
    )


# -- lists (GET /api/plans, GET /api/tasks) and manifest checks ------------------------------


class PlanRunSummary(WireModel):
    """One plan run in GET /api/plans."""

    run_id: str
    goal: str = ""
    status: RunStatus
    executing: bool = Field(default=False, description="A server process is running it now.")
    steps_total: int = Field(description="Steps of the manifest (or with a result, without one).")
    steps_done: int = Field(description="Steps with a finished status (completed, failed, ...).")
    pending_reviews: int = Field(default=0, description="Reviews and approvals it waits for.")
    cost_usd: float = 0.0
    created_at: str = Field(description="When the run was started (ISO 8601, UTC).")
    updated_at: str = Field(description="When its last execution started or ended (ISO 8601, UTC).")


class Page(WireModel):
    """Where a page of a list starts and how to ask for the next one."""

    offset: int
    limit: int
    next_offset: int | None = Field(
        default=None, description="The offset of the next page; absent on the last page."
    )


class PlanRunList(Page):
    """GET /api/plans: the tenant's plan runs, newest first."""

    items: list[PlanRunSummary]


class TaskList(Page):
    """GET /api/tasks: the tenant's browser tasks, most recently updated first."""

    items: list[TaskSummary]


class ManifestCheck(WireModel):
    """POST /api/plans/validate: what the parser and the critic say before anything runs."""

    runnable: bool = Field(description="No critical finding: POST /api/plans would run it.")
    critique: Critique = Field(
        description="Parse and structure problems (located, as critical findings) or the critic's review."
    )
    steps: list[str] = Field(default_factory=list, description="Step ids, when it parsed.")
