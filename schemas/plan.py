"""Plans and plan steps. A browser task is a linear plan whose steps a remote client executes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from veriloop.schemas.base import WireModel

StepStatus = Literal["pending", "in_progress", "completed", "failed", "skipped", "blocked"]
StepType = Literal["task", "synthesis_gate", "human_review"]
OnFailure = Literal["stop", "skip", "retry", "replan"]


class SubTask(WireModel):
    """One objective inside a step of a hierarchical plan."""

    id: str
    objective: str
    status: StepStatus = "pending"


class Check(WireModel):
    """A verification check attached to a plan step (predicates, commands, files; used by tool plans)."""

    kind: Literal["predicate", "command", "file"]
    spec: str = Field(description="The predicate expression, command line or file path.")
    description: str | None = None


class PlanStep(WireModel):
    """One step of a plan."""

    id: str
    description: str
    status: StepStatus = "pending"
    depends_on: list[str] = Field(default_factory=list)
    expected_outcome: str | None = None
    sub_tasks: list[SubTask] = Field(default_factory=list)
    type: StepType = "task"
    on_failure: OnFailure = "replan"
    max_retries: int = 3
    critical: bool = True
    checks: list[Check] = Field(default_factory=list)


class Plan(WireModel):
    """An ordered set of steps toward the goal."""

    goal: str
    steps: list[PlanStep] = Field(default_factory=list)

    @property
    def is_hierarchical(self) -> bool:
        """True when any step carries sub-tasks."""
        return any(step.sub_tasks for step in self.steps)
