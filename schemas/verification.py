"""The verification result the engine produces and routers read."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from veriloop.schemas.base import WireModel

FailureCategory = Literal[
    "no_effect",
    "element_missing",
    "wrong_page",
    "error_message",
    "blocked_auth",
    "captcha",
    "unknown",
]


class VerificationResult(WireModel):
    """Whether the last action worked and whether the whole goal is done.

    Routers read only the typed flags (``goal_achieved``, ``success``,
    ``sub_task_completed``, ``impossible``, ``repeated_action``); ``reason``
    and ``semantic_summary`` are for people.
    """

    step_index: int = Field(description="Index in the action history of the action verified.")
    success: bool = Field(description="action_succeeded and confidence >= the success threshold.")
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str = Field(description="For logs and display only; never routed on.")
    action_succeeded: bool = False
    task_completed: bool = False
    goal_achieved: bool | None = Field(
        default=None,
        description="Set only from a structured verdict; None when no verdict was obtained.",
    )
    sub_task_completed: bool | None = None
    semantic_summary: str = Field(
        default="", description="First 300 characters of the verdict's reason."
    )
    observations: list[str] = Field(default_factory=list)
    failure_category: FailureCategory | None = None
    impossible: bool = Field(default=False, description="The page shows the task cannot be done.")
    repeated_action: bool = Field(
        default=False,
        description="The same action on an unchanged page fingerprint was seen before in this step.",
    )
    meaningful_content_change: bool = False
    url_changed: bool = False
    client_saw_something: bool = False
    model_called: bool = Field(
        default=False, description="Whether a semantic verdict was requested."
    )
    grounding_sources: list[str] = Field(
        default_factory=list,
        description="URLs of the web lookup the verdict was judged again with (also cited in reason).",
    )
    evidence: list[int] = Field(
        default_factory=list,
        description="Observation line numbers (1-based) the verdict cited as showing the goal is met.",
    )
    uncited_completion: bool = Field(
        default=False,
        description="The verdict claimed completion without citing existing change lines: not achieved.",
    )


class CompletionAuditResult(WireModel):
    """The finish audit's decision: finish() only when it agrees with the verifier."""

    agreed: bool = Field(description="goal_met and confidence >= the goal threshold.")
    goal_met: bool = False
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    reason: str = Field(default="", description="For logs and display only; never routed on.")
