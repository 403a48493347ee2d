"""Run-time settings every node reads through ``runtime.context`` (``Context()`` when none is given)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Annotated, Any


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
    dom_context_chars: int = field(
        default=8000,
        metadata={"description": "Size of the DOM window shown to refinement and action prompts."},
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            env = os.environ.get(f"VERILOOP_{f.name.upper()}")
            if env is None or getattr(self, f.name) != f.default:
                continue
            kind = type(f.default) if f.default is not None else str
            if kind is bool:
                setattr(self, f.name, env.strip().lower() in ("1", "true", "yes", "on"))
            else:
                setattr(self, f.name, kind(env))


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
            "description": "Comma-separated command prefixes a model-written shell step or command check may run "
            "without a human review (user manifests always may)."
        },
    )
    max_depth: int = field(
        default=3, metadata={"description": "Deepest nesting of plan steps inside plan steps."}
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
