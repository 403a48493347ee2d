"""A browser task's plan: a linear list of steps that a remote client executes (plans of tool-using
steps are manifests: ``schemas/manifest.py``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from veriloop.schemas.base import WireModel

StepStatus = Literal["pending", "in_progress", "completed", "failed", "skipped", "blocked"]


class SubTask(WireModel):
    """One objective inside a step of a hierarchical plan."""

    id: str
    objective: str
    status: StepStatus = "pending"


class PlanStep(WireModel):
    """One step of a plan."""

    id: str
    description: str
    status: StepStatus = "pending"
    depends_on: list[str] = Field(default_factory=list)
    expected_outcome: str | None = None
    sub_tasks: list[SubTask] = Field(default_factory=list)


class Plan(WireModel):
    """An ordered set of steps toward the goal."""

    goal: str
    steps: list[PlanStep] = Field(default_factory=list)

    @property
    def is_hierarchical(self) -> bool:
        """True when any step carries sub-tasks."""
        return any(step.sub_tasks for step in self.steps)
