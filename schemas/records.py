"""History records kept in graph state and returned by the task API."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from veriloop.schemas.base import WireModel
from veriloop.schemas.observation import BeforeStateSummary

ActionSource = Literal["action_generation", "correction", "goal_achieved"]


class ActionRecord(WireModel):
    """An action handed to the client, with a summary of the page it was chosen on (not its skeleton)."""

    step_index: int = Field(description="0-based position in the task's action history.")
    action: str = Field(description="Canonical protocol form, e.g. click(169).")
    thought: str = ""
    before_state: BeforeStateSummary | None = None
    plan_step_index: int | None = None
    source: ActionSource = "action_generation"


class ReplanningResult(WireModel):
    """What replanning did."""

    plan_regenerated: bool = False
    plan_modified: bool = False
    reason: str = ""
