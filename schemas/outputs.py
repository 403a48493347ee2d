"""Structured outputs the model must return (snake_case JSON, validated by pydantic)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from veriloop.schemas.base import ModelOutput
from veriloop.schemas.verification import FailureCategory

CorrectionStrategy = Literal[
    "retry_with_delay", "alternative_element", "scroll_into_view", "refresh_page", "fail"
]


class SemanticVerdict(ModelOutput):
    """The model's judgement of one action from the observation list."""

    action_succeeded: bool = Field(description="This action did something useful toward the goal.")
    task_completed: bool = Field(
        description="The ENTIRE user goal is now achieved (not just this step)."
    )
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str = Field(description="Short explanation for people; never used for routing.")
    sub_task_completed: bool | None = Field(
        default=None,
        description="The current sub-task's objective is achieved (hierarchical plans only).",
    )
    failure_category: FailureCategory | None = None
    impossible: bool = Field(
        default=False, description="The page shows the goal cannot be achieved."
    )
    lookup_query: str | None = Field(
        default=None,
        description="A web search query for a fact the observations cannot settle; null when they do.",
    )
    evidence: list[int] = Field(
        default_factory=list,
        description="Numbers of the observation lines (as numbered) that show the goal is met; "
        "required for task_completed.",
    )


class CompletionAudit(ModelOutput):
    """A second, independent look before finish(): does the whole trajectory show the goal is met?"""

    goal_met: bool = Field(
        description="The changes observed over the whole task show the ENTIRE goal is achieved."
    )
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str = Field(description="Short explanation for people; never used for routing.")


class PlannedStep(ModelOutput):
    """One step as the model proposes it."""

    description: str
    expected_outcome: str | None = None
    sub_tasks: list[str] = Field(
        default_factory=list, description="Objectives of sub-tasks, in order."
    )


class PlanOutput(ModelOutput):
    """A plan as the model proposes it."""

    steps: list[PlannedStep] = Field(min_length=1)


class RefinedStep(ModelOutput):
    """One concrete instruction for the current step, grounded on the page."""

    instruction: str
    target_element_id: int | None = Field(
        default=None, description="The numbered element to act on, if any."
    )


class ActionChoice(ModelOutput):
    """The next action, in protocol form (parsed strictly afterwards)."""

    thought: str
    action: str = Field(
        description='One call such as click(12), setValue(3, "text"), wait(0.5), finish().'
    )


class CorrectionChoice(ModelOutput):
    """A recovery strategy after a failed verification."""

    strategy: CorrectionStrategy
    thought: str
    element_id: int | None = Field(
        default=None, description="Element for alternative_element / scroll_into_view."
    )


class PlanValidation(ModelOutput):
    """The model's check of the remaining plan against what happened."""

    valid: bool
    minor_modifications_only: bool = Field(
        description="True when editing the remaining steps in place suffices."
    )
    suggested_changes: list[str] = Field(default_factory=list)
    modified_steps: list[PlannedStep] | None = Field(
        default=None, description="Replacement for the remaining steps when the changes are minor."
    )


class CriticReview(ModelOutput):
    """A critic's review; approval is read only from <Approved>YES</Approved> / <Approved>NO</Approved>."""

    review: str
