"""Structured outputs the plan graph asks models for (strict snake_case JSON, validated by pydantic).

Drafts are deliberately flatter than :class:`~veriloop.schemas.manifest.Manifest` (lists instead of
maps, text input) so that strict json_schema mode accepts them; the manifest parser turns a draft
into a manifest and checks it like any other.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from veriloop.schemas.base import ModelOutput
from veriloop.schemas.manifest import OnFailurePolicy


class AgentDraft(ModelOutput):
    """An agent as the planner proposes it."""

    name: str
    prompt: str
    tools: list[str] = Field(default_factory=list)


class CheckDraft(ModelOutput):
    """A predicate or command check as the planner proposes it."""

    kind: Literal["predicate", "command"]
    expr: str | None = None
    command: str | None = None


class StepDraft(ModelOutput):
    """A step as the planner proposes it."""

    id: str
    type: Literal["task", "synthesis_gate", "human_review"] = "task"
    agent: str | None = None
    input: str = ""
    command: str | None = Field(default=None, description="A shell command (needs approval).")
    function: str | None = Field(
        default=None, description="A registered Python callable to run instead of an agent."
    )
    depends_on: list[str] = Field(default_factory=list)
    on_failure: OnFailurePolicy = "halt_if_critical"
    max_retries: int = Field(default=0, ge=0, le=5)
    critical: bool = False
    requires_testing: bool | None = None
    test_command: str | None = None
    checks: list[CheckDraft] = Field(default_factory=list)


class ManifestDraft(ModelOutput):
    """A whole plan written by the meta-planner from a goal."""

    agents: list[AgentDraft] = Field(default_factory=list)
    steps: list[StepDraft] = Field(min_length=1)


class RepairDraft(ModelOutput):
    """A replan: replacement steps for the blocked steps and everything downstream of them.

    Steps that already completed are kept as they are and must not be repeated here; a replacement
    may depend on them by id.
    """

    summary: str = Field(description="What changed and why, for people; never routed on.")
    agents: list[AgentDraft] = Field(default_factory=list)
    steps: list[StepDraft] = Field(default_factory=list)


class StepReviewVerdict(ModelOutput):
    """An LLM review of a critical step's output."""

    passed: bool
    diagnosis: str = Field(description="What is wrong (or right), for people and the fix prompt.")
    confidence: float = Field(ge=0.0, le=1.0)
