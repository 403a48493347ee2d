"""Running one attempt of a step with the executor its manifest names, and the command-approval rule.

Safety: a plan a model wrote never runs an arbitrary command. Shell commands, command checks and
test commands of ``origin="model"`` steps run without a person's approval only when they are one
simple command whose argv starts with an allowlisted argv prefix (:func:`allowlisted`); anything
else pauses the step for review.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from veriloop.engines.plan.confinement.sandbox import DEFAULT_CONFINEMENT, Confinement, problem
from veriloop.engines.plan.executors import run_llm_step, run_python_step, run_shell_step
from veriloop.llm.base import AsyncStructuredLLM
from veriloop.schemas.manifest import AgentSpec, ManifestStep
from veriloop.schemas.plan_run import ExecutionResult

DEFAULT_AGENT = AgentSpec(
    prompt="You carry out one step of a plan in a workspace directory.",
    tools=["read_file", "write_file", "list_files"],
)
"""Runs ``llm`` steps that name no agent: the workspace file tools only."""


SHELL_SYNTAX = frozenset(";&|<>(){}[]*?~#!")
"""Characters that make a string more than one plain command when they are outside quotes
(operators, redirections, subshells, globs, brace and tilde expansion, comments, history)."""
EXPANSIONS = frozenset("$`\\")
"""Characters that expand even inside double quotes (``$VAR``, ``$(...)``, backticks, escapes):
anywhere in a command, they need approval."""
WRAPPERS = frozenset(
    {
        "sh", "bash", "dash", "zsh", "ksh", "fish", "eval", "exec", "env", "xargs", "nohup",
        "timeout", "nice", "ionice", "sudo", "su", "doas", "command", "builtin", "time", "stdbuf",
        "setsid", "chroot", "unshare", "nsenter", "flock", "watch", "script", "busybox", "source",
        ".", "coproc", "strace", "gdb", "parallel", "find",
    }
)  # fmt: skip
"""Programs that run another command from their arguments: never allowlisted, whatever the list
says (an entry ``bash`` would otherwise allow ``bash -c anything``)."""


def commands_needing_approval(step: ManifestStep, allowlist: str) -> list[str]:
    """The commands of a model-written step that are not allowlisted (none for a user's step)."""
    if step.origin != "model":
        return []
    prefixes = [argv for entry in allowlist.split(",") if (argv := command_argv(entry))]
    commands = [step.command, step.test_command, *(c.command for c in step.checks)]
    return [c for c in commands if c and not allowlisted(c, prefixes)]


def allowlisted(command: str, prefixes: list[list[str]]) -> bool:
    """``command`` is one simple command whose argv starts with one of the argv ``prefixes``."""
    argv = command_argv(command)
    return bool(argv) and any(argv[: len(prefix)] == prefix for prefix in prefixes)


def command_argv(command: str) -> list[str] | None:
    """The argv of ``command`` when it is one plain command: printable ASCII words, quoted or not,
    no :data:`SHELL_SYNTAX` outside quotes, no :data:`EXPANSIONS` anywhere, no variable assignment
    in front, no :data:`WRAPPERS` program. None for anything else, including what does not parse."""
    if any(not (" " <= ch <= "~") or ch in EXPANSIONS for ch in command):
        return None  # newlines, control characters, non-ASCII lookalikes, expansions
    if _unquoted(command) & SHELL_SYNTAX:
        return None
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote
        return None
    if not tokens or "=" in tokens[0] or Path(tokens[0]).name in WRAPPERS:
        return None
    return tokens


def _unquoted(command: str) -> set[str]:
    """The characters of ``command`` outside single and double quotes."""
    seen: set[str] = set()
    quote = ""
    for ch in command:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        else:
            seen.add(ch)
    return seen


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
    confinement: Confinement = DEFAULT_CONFINEMENT,
) -> ExecutionResult:
    """One execution of ``step``; an executor that cannot start is an execution failure, and so is
    a step that would start processes ``confinement`` cannot start (shell, command checks, tests)."""
    refused = starts_processes(step) and await asyncio.to_thread(problem, confinement)
    if refused:
        return ExecutionResult(ok=False, error=f"step {step.id!r} was not run: {refused}")
    if step.executor == "shell":
        return await run_shell_step(
            step.command or "", workspace=workspace, timeout_s=timeout_s, confinement=confinement
        )
    if step.executor == "python":
        fn = tools.get(step.function or "")
        if fn is None:
            return ExecutionResult(
                ok=False, error=f"no callable named {step.function!r} is registered"
            )
        return await run_python_step(
            fn,
            input=step.input,
            depends=dict(depends),
            workspace=workspace,
            timeout_s=timeout_s,
            confinement=confinement,
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


def starts_processes(step: ManifestStep) -> bool:
    """The step runs a shell command, a command check or a declared test run (tests found by
    convention are only known at check time)."""
    return (
        step.executor == "shell"
        or bool(step.test_command)
        or bool(step.requires_testing)
        or any(check.kind == "command" for check in step.checks)
    )
