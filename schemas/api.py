"""HTTP request and response bodies of the interact API (camelCase on the wire)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from veriloop.schemas.base import WireModel
from veriloop.schemas.observation import Observation
from veriloop.schemas.verification import FailureCategory

TaskStatus = Literal["executing", "completed", "failed"]


class InteractRequest(Observation):
    """POST /api/agent/interact: one page snapshot."""

    request_id: str | None = Field(default=None, description="Client-chosen id; a retry with the same id gets the same answer.")


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
