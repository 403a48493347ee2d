"""History records kept in graph state and returned by the task API."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from veriloop.schemas.base import WireModel
from veriloop.schemas.observation import BeforeStateSummary

ActionSource = Literal["action_generation", "correction", "goal_achieved"]
ActionType = Literal["navigation", "dropdown", "generic"]
"""The prediction path's classes of action: navigation and dropdowns have fixed expected outcomes."""


class ActionRecord(WireModel):
    """An action handed to the client, with a summary of the page it was chosen on (not its skeleton)."""

    step_index: int = Field(description="0-based position in the task's action history.")
    action: str = Field(description="Canonical protocol form, e.g. click(169).")
    target: str | None = Field(
        default=None,
        description='What a person would call the element the action targets ("Save" for '
        "click(9)), read from the page it was chosen on.",
    )
    thought: str = ""
    before_state: BeforeStateSummary | None = None
    plan_step_index: int | None = None
    source: ActionSource = "action_generation"
    action_type: ActionType | None = Field(
        default=None, description="How the prediction path classified the action."
    )
    expected_outcome: str | None = Field(
        default=None,
        description="What the action should do: a fixed template for navigation and dropdowns, "
        "the plan step's expected outcome otherwise; correction compares it with what was observed.",
    )
    correction_strategy: str | None = Field(
        default=None,
        description="The correction strategy that chose this action (source 'correction').",
    )


class StepChanges(WireModel):
    """A structural comparison of a plan's remaining steps with a proposed replacement."""

    before: int = Field(description="Remaining steps compared.")
    after: int = Field(description="Steps proposed in their place.")
    changed: int = Field(description="Steps added, removed or edited.")
    minor: bool = Field(
        description="Within the rule for editing in place (engines/step_diff.py): the same number "
        "of steps give or take one, and at most one step or a third of them changed."
    )
    diff: dict[str, Any] = Field(
        default_factory=dict,
        description="DeepDiff's report (values_changed, iterable_item_added, ...), by position.",
    )


class ReplanningResult(WireModel):
    """What replanning did."""

    plan_regenerated: bool = False
    plan_modified: bool = False
    reason: str = ""
    step_changes: StepChanges | None = Field(
        default=None,
        description="How the proposed steps differ from the remaining ones (None: none proposed).",
    )
