"""Running one attempt of a step with the executor its manifest names, and the command-approval rule.

Safety: a plan a model wrote never runs an arbitrary command. Shell commands, command checks and
test commands of ``origin="model"`` steps run only when they start with an allowlisted prefix;
anything else needs a person's approval first (the step pauses for review).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool

from veriloop.engines.plan.executors import run_llm_step, run_python_step, run_shell_step
from veriloop.llm.base import AsyncStructuredLLM
from veriloop.schemas.manifest import AgentSpec, ManifestStep
from veriloop.schemas.plan_run import ExecutionResult

DEFAULT_AGENT = AgentSpec(
    prompt="You carry out one step of a plan in a workspace directory.",
    tools=["read_file", "write_file", "list_files"],
)
"""Runs ``llm`` steps that name no agent: the workspace file tools only."""


def commands_needing_approval(step: ManifestStep, allowlist: str) -> list[str]:
    """The commands of a model-written step that are not allowlisted (none for a user's step)."""
    if step.origin != "model":
        return []
    prefixes = [p.strip() for p in allowlist.split(",") if p.strip()]
    commands = [step.command, step.test_command, *(c.command for c in step.checks)]
    return [
        c for c in commands if c and not any(c.strip().startswith(prefix) for prefix in prefixes)
    ]


async def execute_step(
    step: ManifestStep,
    *,
    prompt: str,
    agent: AgentSpec | None,
    depends: Mapping[str, Any],
    tools: Mapping[str, Any],
    workspace: Path,
    llm: AsyncStructuredLLM | None,
    timeout_s: float,
    max_turns: int,
) -> ExecutionResult:
    """One execution of ``step``; an executor that cannot start is an execution failure."""
    if step.executor == "shell":
        return await run_shell_step(step.command or "", workspace=workspace, timeout_s=timeout_s)
    if step.executor == "python":
        fn = tools.get(step.function or "")
        if fn is None:
            return ExecutionResult(
                ok=False, error=f"no callable named {step.function!r} is registered"
            )
        return await run_python_step(
            _callable(fn), input=step.input, depends=dict(depends), timeout_s=timeout_s
        )
    if step.executor == "llm" and llm is not None:
        return await run_llm_step(
            llm,
            step_id=step.id,
            agent=agent or DEFAULT_AGENT,
            task=prompt,
            tools=tools,
            max_turns=max_turns,
            timeout_s=timeout_s,
        )
    return ExecutionResult(ok=False, error=f"step {step.id!r}: no executor for {step.executor!r}")


def _callable(obj: Any) -> Any:
    """A python step calls the function itself, also when it was registered as a LangChain tool."""
    if isinstance(obj, BaseTool):
        return getattr(obj, "coroutine", None) or getattr(obj, "func", None) or obj.invoke
    return obj
