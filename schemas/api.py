"""HTTP request and response bodies of the interact API (camelCase on the wire)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from veriloop.schemas.base import WireModel
from veriloop.schemas.observation import Observation
from veriloop.schemas.plan import Plan
from veriloop.schemas.records import ActionSource
from veriloop.schemas.usage import Usage
from veriloop.schemas.verification import FailureCategory, VerificationResult

TaskStatus = Literal["executing", "completed", "failed"]


class InteractRequest(Observation):
    """POST /api/agent/interact: one page snapshot."""

    request_id: str | None = Field(
        default=None, description="Client-chosen id; a retry with the same id gets the same answer."
    )
    step_index: int | None = Field(
        default=None,
        ge=0,
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


class InteractResponse(WireModel):
    """The next action for the client to execute."""

    task_id: str
    step_index: int
    action: str
    thought: str = ""
    status: TaskStatus
    verification: VerificationSummary | None = None


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


class BeforeStateSummary(WireModel):
    """The page an action was chosen on, without the skeleton itself."""

    url: str
    dom_hash: str
    active_element: str | None = None
    skeleton_elements: int | None = Field(
        default=None,
        description="Elements in the semantic skeleton; None when it was not extracted.",
    )


class ActionSummary(WireModel):
    """One action of a task's history (GET /api/tasks/{taskId})."""

    step_index: int
    action: str
    thought: str = ""
    source: ActionSource = "action_generation"
    plan_step_index: int | None = None
    before_state: BeforeStateSummary | None = None


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
    status: TaskStatus | None = None
