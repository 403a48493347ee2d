"""Plans of tool-using steps: the manifest (agents and steps) that the plan graph runs.

A manifest is what a user writes (YAML or JSON) or the meta-planner drafts. The
lenient reading of what people and models actually write (``tasks`` for
``steps``, ``requires`` for ``depends_on``, a string where a list is expected,
code fences...) lives in ``engines/plan/manifest.py``; these models are the
normalised form that every layer passes around.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints, model_validator

from veriloop.schemas.base import WireModel

StepType = Literal["task", "synthesis_gate", "human_review", "plan"]
"""task: one executor run; synthesis_gate: combines its dependencies' results and halts everything
downstream when it fails; human_review: pauses the run for a person's verdict; plan: a nested
sub-plan that completes only when every child step is verified."""
ExecutorKind = Literal["llm", "shell", "python", "plan", "human"]
"""How a step acts: a tool-calling model agent, a shell command, a Python callable, a nested plan,
or a person (human_review)."""
OnFailure = Literal["halt_if_critical", "continue", "retry", "replan"]
"""What the run does about a failed step, together with ``critical`` (seed 003's matrix, in
``engines/plan/policy.py``): halt_if_critical: a critical step halts the run, another one lets it
continue without it; continue: the run goes on without the step, critical or not; retry: like
halt_if_critical, and the step's corrective attempts go on even after it reports a blocker
(``[FAIL]:``); replan: ask the replanner, then halt_if_critical once the budgets are spent."""
DEPRECATED_ON_FAILURE = {"stop": "halt_if_critical", "skip": "continue"}
"""Old spellings, still accepted and rewritten (deprecated: ``stop`` did not stop a non-critical
step's run, and ``skip`` named what happened to the step, not to the run)."""


def canonical_on_failure(value: Any) -> Any:
    """``on_failure`` under its current name (a deprecated spelling is rewritten)."""
    return DEPRECATED_ON_FAILURE.get(value, value) if isinstance(value, str) else value


OnFailurePolicy = Annotated[OnFailure, BeforeValidator(canonical_on_failure)]
"""An ``on_failure`` field: the current names, deprecated spellings accepted."""
Origin = Literal["user", "model"]
"""Who wrote a step: the user's manifest, or a model (meta-planner, replanner). Model-written shell
commands run only when allowlisted or approved by a person."""
CheckKind = Literal["predicate", "command"]
SandboxMode = Literal["auto", "required", "off"]
"""How a step's processes run: required: in bubblewrap or not at all; auto: in bubblewrap when it
works on this machine; off: never sandboxed."""
PlanShell = Literal["off", "sandboxed", "host"]
"""Whether plan runs started over HTTP may start processes (shell steps, command checks, test
runs): off: never, a manifest asking for one is a 422; sandboxed: only in bubblewrap (no network,
the workspace the only writable folder); host: unsandboxed, as the service's user."""
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128)]


def _relative_path_pattern(value: str) -> str:
    """A path or glob relative to the workspace: not absolute, no ``..``, no NUL."""
    if not value or value.startswith("/") or "\x00" in value or ".." in value.split("/"):
        raise ValueError(f"{value!r} is not a path relative to the workspace (no leading /, no ..)")
    return value


PathPattern = Annotated[
    str, StringConstraints(max_length=300), AfterValidator(_relative_path_pattern)
]
"""A glob relative to the workspace (``*`` within a folder, ``**`` across folders, ``?``, ``[...]``)."""
TestId = Annotated[str, StringConstraints(min_length=1, max_length=500)]
"""A pytest node id relative to the workspace (``tests/test_x.py::test_y``) or a test file."""
MAX_PATTERNS = 200
"""Most globs or test ids one list of a manifest holds."""

MAX_RETRIES_CAP = 5
"""Corrective attempts per step never exceed this, whatever the manifest says."""


class AgentSpec(WireModel):
    """A named agent that ``llm`` steps run as: its system prompt, tool names and optional model."""

    prompt: str = ""
    tools: list[str] = Field(default_factory=list)
    model: str | None = Field(default=None, description="Overrides the context's model.")
    env: list[EnvName] = Field(
        default_factory=list,
        description="Environment variables the processes of this agent's steps need, passed from the "
        "runner's environment (see docs/plans.md, Security).",
    )


class CheckSpec(WireModel):
    """A check declared on a step, beyond the output schema, notes contract and tests."""

    kind: CheckKind
    expr: str | None = Field(
        default=None,
        description="Predicate over input, result and depends; true, false or a diagnosis string.",
    )
    command: str | None = Field(default=None, description="A command whose exit status 0 passes.")
    description: str | None = None
    timeout_s: float | None = None

    @model_validator(mode="after")
    def _one_body(self) -> CheckSpec:
        body = self.expr if self.kind == "predicate" else self.command
        if not (body or "").strip():
            field_name = "expr" if self.kind == "predicate" else "command"
            raise ValueError(f"a {self.kind} check needs a non-empty {field_name!r}")
        return self


class ManifestStep(WireModel):
    """One step of a manifest, normalised."""

    id: str
    type: StepType = "task"
    executor: ExecutorKind = Field(
        description="Derived when not given: human_review -> human, plan -> plan, command -> shell, "
        "function -> python, otherwise llm."
    )
    agent: str | None = Field(default=None, description="Agent name for llm steps.")
    input: Any = Field(default="", description="The step's task text or JSON input.")
    command: str | None = Field(default=None, description="Shell command for shell steps.")
    function: str | None = Field(
        default=None, description="Name of a registered callable for python steps."
    )
    plan: Manifest | None = Field(default=None, description="The nested manifest of a plan step.")
    depends_on: list[str] = Field(default_factory=list)
    on_failure: OnFailurePolicy = "halt_if_critical"
    max_retries: int = Field(
        default=0, ge=0, le=MAX_RETRIES_CAP, description="Corrective attempts after the first."
    )
    critical: bool = False
    requires_testing: bool | None = Field(
        default=None,
        description="True: tests must exist and pass; None: run tests found by convention; False: no tests.",
    )
    test_command: str | None = None
    writes_tests: bool = Field(
        default=False,
        description="The step's declared job is writing tests, so changing test modules and test "
        "data is allowed (never a conftest.py: that needs a writes: glob).",
    )
    writes: list[PathPattern] | None = Field(
        default=None,
        max_length=MAX_PATTERNS,
        description="Globs of the files the step may change; None: the default scope (the "
        "project's Python source, no tests, runner configuration, hidden or data files; see "
        "docs/plans.md, What a step can change and what judges it).",
    )
    fail_to_pass: list[TestId] = Field(
        default_factory=list,
        max_length=MAX_PATTERNS,
        description="Tests (node ids or files) the step must make pass: each must be collected "
        "and pass in the judge's run.",
    )
    pass_to_pass: list[TestId] = Field(
        default_factory=list,
        max_length=MAX_PATTERNS,
        description="Tests (node ids or files) that must keep passing: each must be collected and "
        "pass in the judge's run.",
    )
    checks: list[CheckSpec] = Field(default_factory=list)
    output_schema: dict[str, Any] | None = Field(
        default=None, description="JSON schema the step's output must validate against."
    )
    timeout_s: float | None = Field(default=None, description="Overrides the context's timeout.")
    env: list[EnvName] = Field(
        default_factory=list,
        description="Environment variables the step's processes need, passed from the runner's "
        "environment (see docs/plans.md, Security).",
    )
    network: bool = Field(
        default=False, description="The step's processes need the network inside the sandbox."
    )
    origin: Origin = "user"

    @property
    def self_correcting(self) -> bool:
        """Only a model can act on a corrective prompt; re-running a deterministic executor changes nothing."""
        return self.executor == "llm"


class Manifest(WireModel):
    """A plan of tool-using steps."""

    goal: str = ""
    agents: dict[str, AgentSpec] = Field(default_factory=dict)
    steps: list[ManifestStep] = Field(default_factory=list)
    sandbox: SandboxMode | None = Field(
        default=None,
        description="How the plan's processes run; the stricter of this and the run's setting applies.",
    )
    hidden: list[PathPattern] = Field(
        default_factory=list,
        max_length=MAX_PATTERNS,
        description="Globs of tests and fixtures no step sees: they leave the workspace while the "
        "plan runs, and only the judge's tree has them.",
    )

    def step(self, step_id: str) -> ManifestStep:
        """The step with ``step_id`` (KeyError when absent)."""
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(step_id)


ManifestStep.model_rebuild()
