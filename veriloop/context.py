"""Run-time settings every node reads through ``runtime.context`` (``Context()`` when none is given)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from typing import Annotated, Any, Literal, get_args

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

from veriloop.engines.plan.confinement.limits import Limits
from veriloop.engines.plan.confinement.user import DEFAULT_STEP_ID, StepUser
from veriloop.schemas.manifest import SandboxMode
from veriloop.schemas.usage import Purpose

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
"""The ``reasoning_effort`` values of the openai SDK (which ones a model accepts depends on the model)."""
SearchProvider = Literal["openai", "tavily"]
"""Where a grounded verifier looks facts up: the provider's own web search, or Tavily."""


@with_config(ConfigDict(extra="forbid"))
class PurposeSettings(TypedDict, total=False):
    """One purpose's model settings; a key left out takes the Context-wide default."""

    model: str
    """Chat model for this purpose's calls."""
    reasoning_effort: ReasoningEffort
    """Sent as ``reasoning_effort`` to models that accept it."""
    max_tokens: int
    """Cap on the output tokens of one call (``max_completion_tokens``)."""
    grounding: SearchProvider
    """Look facts up when a verdict needs them (verification only)."""


HIGHEST_EFFORT_PURPOSES = ("verification",)
"""Purposes that ask for their model's highest reasoning effort unless their own entry sets one."""
GROUNDED_PURPOSES = ("verification",)
"""Purposes whose engine can look facts up; ``grounding`` set for any other purpose is an error."""


@dataclass(kw_only=True)
class Context:
    """Model, thresholds and budgets for one graph invocation.

    A field left at its default takes the environment variable ``VERILOOP_<FIELD>``
    when set (``VERILOOP_MODEL=gpt-4.1``), so the same graph is configurable
    from Studio, LangServe (which passes no context) and the CLI.
    """

    model: Annotated[str, {"__template_metadata__": {"kind": "llm"}}] = field(
        default="gpt-4.1-mini",
        metadata={"description": "Chat model name sent to the OpenAI-compatible endpoint."},
    )
    reasoning_effort: ReasoningEffort | None = field(
        default=None,
        metadata={
            "description": "Reasoning effort for every purpose, sent only to models that accept it; "
            "None leaves it out. Verification asks for the highest its model supports unless "
            "purposes.verification.reasoning_effort says otherwise."
        },
    )
    max_tokens: int | None = field(
        default=None,
        metadata={
            "description": "Cap on output tokens per model call (max_completion_tokens); None: the provider's."
        },
    )
    purposes: dict[Purpose, PurposeSettings] = field(
        default_factory=dict,
        metadata={
            "description": 'Per-purpose settings over the defaults above, e.g. {"verification": '
            '{"model": "o4-mini", "reasoning_effort": "high", "grounding": "tavily"}}. '
            "Keys: model, reasoning_effort, max_tokens, grounding (openai | tavily; verification only)."
        },
    )
    base_url: str | None = field(
        default=None,
        metadata={
            "description": "OpenAI-compatible endpoint; None uses OPENAI_BASE_URL or the SDK default."
        },
    )
    structured_output: str | None = field(
        default=None,
        metadata={
            "description": "Structured-output dialect of the endpoint: json_schema, json_object_schema, "
            "json_object or tool_call; None (or auto) learns it from the server's first rejection."
        },
    )
    llm_timeout_s: float = field(
        default=60.0, metadata={"description": "Per-call model timeout in seconds."}
    )
    llm_max_retries: int = field(
        default=2,
        metadata={
            "description": "Retries of transient model errors (timeout, connection, 429, 5xx); the only retry layer."
        },
    )
    success_threshold: float = field(
        default=0.70, metadata={"description": "success = action_succeeded and confidence >= this."}
    )
    goal_threshold: float = field(
        default=0.70,
        metadata={"description": "goal_achieved = task_completed and confidence >= this."},
    )
    low_confidence_threshold: float = field(
        default=0.85,
        metadata={
            "description": "A completion below this confidence logs 'Low confidence completion'."
        },
    )
    max_corrections_per_step: int = field(
        default=3, metadata={"description": "Correction attempts on one step before replanning."}
    )
    max_replans_per_task: int = field(
        default=3, metadata={"description": "Replans per task before the task fails."}
    )
    max_steps_per_task: int = field(
        default=40, metadata={"description": "Actions per task before the task fails."}
    )
    lookahead: bool = field(
        default=True,
        metadata={
            "description": "Prepare the next action while the verdict is computed (2 model calls on the critical path instead of 3), or on the plan's last step the finish audit; a verdict that does not use it discards it."
        },
    )
    dom_context_chars: int = field(
        default=8000,
        metadata={"description": "Size of the DOM window shown to refinement and action prompts."},
    )
    page_processes: int = field(
        default=0,
        metadata={
            "description": "Processes that parse, diff and compact pages beside the event loop (0: a thread of this process; the service uses one on a machine with more than one CPU)."
        },
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            env = os.environ.get(f"VERILOOP_{f.name.upper()}")
            default = f.default_factory() if f.default is MISSING else f.default  # type: ignore[misc]
            if env is None or getattr(self, f.name) != default:
                continue
            if f.name == "purposes":
                setattr(self, f.name, _env_json(f.name, env))
                continue
            kind = type(f.default) if f.default is not None else str
            if kind is bool:
                setattr(self, f.name, env.strip().lower() in ("1", "true", "yes", "on"))
            elif f.name == "max_tokens":
                setattr(self, f.name, int(env))
            else:
                setattr(self, f.name, kind(env))
        if self.reasoning_effort is not None and self.reasoning_effort not in get_args(
            ReasoningEffort
        ):
            raise ValueError(
                f"Context.reasoning_effort: {self.reasoning_effort!r} is not one of {get_args(ReasoningEffort)}"
            )
        if self.page_processes < 0:
            raise ValueError(
                f"Context.page_processes: must be 0 or more, got {self.page_processes}"
            )
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"Context.max_tokens: must be at least 1, got {self.max_tokens}")
        self.purposes = _checked_purposes(self.purposes)

    def for_purpose(self, purpose: Purpose | None) -> PurposeSettings:
        """The settings a call for ``purpose`` uses: its own entry over the defaults (None: the defaults)."""
        resolved: PurposeSettings = {"model": self.model}
        if self.reasoning_effort is not None and purpose not in HIGHEST_EFFORT_PURPOSES:
            resolved["reasoning_effort"] = self.reasoning_effort
        if self.max_tokens is not None:
            resolved["max_tokens"] = self.max_tokens
        if purpose is not None:
            resolved.update(self.purposes.get(purpose, {}))
        return resolved


def cli_settings(
    models: Sequence[str] = (), efforts: Sequence[str] = (), groundings: Sequence[str] = ()
) -> dict[str, Any]:
    """Context keyword arguments from the CLI's repeatable options.

    ``--model NAME`` sets the default of every purpose and ``--model PURPOSE=NAME`` one purpose's;
    ``--reasoning-effort`` alike; ``--grounding PROVIDER`` enables a lookup for verification (or
    ``PURPOSE=PROVIDER``). Context validates the result (unknown purposes and values are errors).
    """
    settings: dict[str, Any] = {}
    purposes: dict[str, dict[str, str]] = {}
    for key, values in (
        ("model", models),
        ("reasoning_effort", efforts),
        ("grounding", groundings),
    ):
        for value in values:
            purpose, has_purpose, name = value.partition("=")
            if not has_purpose and key == "grounding":
                purpose, has_purpose, name = GROUNDED_PURPOSES[0], "=", value
            if has_purpose:
                purposes.setdefault(purpose.strip(), {})[key] = name.strip()
            else:
                settings[key] = value.strip()
    if purposes:
        settings["purposes"] = purposes
    return settings


@cache
def _purposes_adapter() -> TypeAdapter:
    return TypeAdapter(dict[Purpose, PurposeSettings])


def _env_json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"VERILOOP_{name.upper()} must be a JSON object: {exc}") from exc


def _checked_purposes(purposes: Any) -> dict[str, PurposeSettings]:
    """``purposes`` validated (known purposes, keys and values), or ValueError saying what is wrong."""
    try:
        checked = _purposes_adapter().validate_python(purposes or {})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'purposes'}: {error['msg']}"
            for error in exc.errors()
        )
        raise ValueError(f"Context.purposes: {problems}") from exc
    for purpose, settings in checked.items():
        if "grounding" in settings and purpose not in GROUNDED_PURPOSES:
            raise ValueError(
                f"Context.purposes.{purpose}.grounding: only {', '.join(GROUNDED_PURPOSES)} can look facts up"
            )
    return checked


@dataclass(kw_only=True)
class PlanContext(Context):
    """The model settings of :class:`Context` plus what the plan graph reads: where steps work, which
    tools they may use, and the budgets of checks, corrections and replans."""

    workspace: str = field(
        default=".",
        metadata={
            "description": "Directory that shell steps, test runs and llm file tools work in; file tools cannot leave it."
        },
    )
    tools: Any = field(
        default=None,
        metadata={
            "description": "Tools for llm agents and callables for python steps: an import path 'module:attr' "
            "(a list or dict of LangChain tools or typed functions), or the objects themselves in Python."
        },
    )
    shell_allowlist: str = field(
        default="",
        metadata={
            "description": "Comma-separated commands (argv prefixes such as 'pytest' or 'python -m pytest') a "
            "model-written shell step, command check or test command may run without a human review when it "
            "is one plain command (user manifests always may)."
        },
    )
    sandbox: SandboxMode = field(
        default="auto",
        metadata={
            "description": "How steps' processes run: auto (in bubblewrap when it works here), required "
            "(in bubblewrap or not at all: the step fails as execution_failed), off. A manifest's "
            "sandbox setting can only make it stricter."
        },
    )
    private_root: str = field(
        default="",
        metadata={
            "description": "A folder sandboxed steps cannot see, except their own workspace inside it "
            "(PlanRunner's workspace_per_run sets its base workspace: runs never read each other's files)."
        },
    )
    sandbox_ro: str = field(
        default="",
        metadata={
            "description": "Paths every sandboxed step may read (separated by ':', like PATH) besides "
            "the system folders, the interpreter and its workspace (veriloop serve --sandbox-ro)."
        },
    )
    step_uid: int = field(
        default=DEFAULT_STEP_ID,
        metadata={
            "description": "The uid step processes run as when this process is root (an ordinary "
            "user on the host; it owns the workspace while steps run)."
        },
    )
    step_gid: int = field(
        default=DEFAULT_STEP_ID,
        metadata={"description": "The gid step processes run as when this process is root."},
    )
    limit_memory_mb: int = field(
        default=1024,
        metadata={"description": "Address space of each step process, MiB (RLIMIT_AS)."},
    )
    limit_processes: int = field(
        default=256,
        metadata={
            "description": "Processes of the step's uid (RLIMIT_NPROC: counted host-wide, so "
            "steps running at once share it)."
        },
    )
    limit_cpu_s: int = field(
        default=600, metadata={"description": "CPU seconds of each step process (RLIMIT_CPU)."}
    )
    limit_file_mb: int = field(
        default=1024,
        metadata={"description": "Largest file a step process may write, MiB (RLIMIT_FSIZE)."},
    )
    limit_open_files: int = field(
        default=1024,
        metadata={"description": "Open files of each step process (RLIMIT_NOFILE)."},
    )
    limit_disk_mb: int = field(
        default=2048,
        metadata={
            "description": "What a step's workspace may hold, MiB (read while it runs: past it the "
            "step is stopped and fails); also the size of its private /tmp."
        },
    )
    max_timeout_s: float = field(
        default=0.0,
        metadata={
            "description": "The longest timeout_s a manifest may ask for a step (0: no maximum); "
            "the service answers 422 past it."
        },
    )
    pass_env: str = field(
        default="",
        metadata={
            "description": "Comma-separated environment variables passed from this process to every step's "
            "processes (they get only PATH, LANG, LC_*, TZ, TERM, HOME=workspace and TMPDIR otherwise)."
        },
    )
    manifest_env: bool = field(
        default=True,
        metadata={
            "description": "Pass the variables a user-written step or its agent declares (env:) from this "
            "process's environment; the service sets False (its callers are not its operator)."
        },
    )
    allow_network: bool = field(
        default=True,
        metadata={
            "description": "Give sandboxed steps that declare network: true the network; False: no step "
            "gets it (the service's sandboxed mode)."
        },
    )
    allow_shell: bool = field(
        default=True,
        metadata={
            "description": "Steps may start processes (shell steps, command checks, test runs); False: "
            "such a step fails as execution_failed (the service's plan_shell=off)."
        },
    )
    max_depth: int = field(
        default=3, metadata={"description": "Deepest nesting of plan steps inside plan steps."}
    )
    max_parallel_steps: int = field(
        default=10,
        metadata={
            "description": "Steps one dependency level may hold before the critic's parallel_explosion "
            "finding: critical for a model-written plan, a warning for a user's manifest."
        },
    )
    lane_steps: int = field(
        default=16,
        metadata={
            "description": "Most steps one lane of a batch runs one after another: a chain's next "
            "step, or another step of the batch whose dependencies all completed, starts the moment "
            "the lane's step before it completed, not when the whole batch ended. 1: every step "
            "waits for its batch."
        },
    )
    max_plan_revisions: int = field(
        default=2,
        metadata={
            "description": "Times a model-written manifest with a critical critic finding goes back to the planner."
        },
    )
    llm_plan_review: bool = field(
        default=False,
        metadata={
            "description": "Also ask the critic model to approve the plan (<Approved>YES</Approved>)."
        },
    )
    review_critical_steps: bool = field(
        default=True,
        metadata={"description": "Run an LLM review check on steps marked critical."},
    )
    max_replans_per_step: int = field(
        default=3, metadata={"description": "Replans one failed step may ask for."}
    )
    max_replans_per_run: int = field(
        default=5, metadata={"description": "Replans in one plan run, all steps together."}
    )
    replan_cooldown_s: float = field(
        default=1.0, metadata={"description": "Pause before each replan call, in seconds."}
    )
    step_timeout_s: float = field(
        default=300.0,
        metadata={
            "description": "Time limit of one execution (shell command, python call, llm turns)."
        },
    )
    check_timeout_s: float = field(
        default=300.0, metadata={"description": "Time limit of one command check or test run."}
    )
    max_turns: int = field(
        default=12, metadata={"description": "Model turns an llm step may take in one attempt."}
    )

    def step_limits(self) -> Limits:
        """The ``limit_*`` fields as one value (ValueError for a limit that is not positive)."""
        return Limits.of(
            memory_mb=self.limit_memory_mb,
            processes=self.limit_processes,
            cpu_s=self.limit_cpu_s,
            file_mb=self.limit_file_mb,
            open_files=self.limit_open_files,
            disk_mb=self.limit_disk_mb,
        )

    def __post_init__(self) -> None:
        super().__post_init__()
        self.step_limits()
        StepUser(self.step_uid, self.step_gid)
        if self.sandbox not in get_args(SandboxMode):
            raise ValueError(
                f"PlanContext.sandbox: {self.sandbox!r} is not one of {get_args(SandboxMode)}"
            )
