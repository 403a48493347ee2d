"""The executors of plan steps: a tool-calling model agent, a shell command, a Python callable.

All are async and never block the event loop: model calls go through
:meth:`AsyncStructuredLLM.atool_turn`, shell commands are asyncio subprocesses,
and sync tools and callables run in a worker thread (``asyncio.to_thread``).
A timed-out thread cannot be killed: its result is dropped and the thread
finishes on its own (it occupies one worker of the default pool until then).

Every executor returns an :class:`ExecutionResult`; ``ok=False`` means the
executor itself failed (execution_failed), not that the step's checks failed.
The one exception that escapes is :class:`LLMUnavailable`: a provider outage
is not a verdict on the step.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.machinery
import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from veriloop.engines.plan import python_child
from veriloop.engines.plan.confinement.limits import MIB, describe_bytes
from veriloop.engines.plan.confinement.paths import inside
from veriloop.engines.plan.confinement.process import CommandRun, run_command
from veriloop.engines.plan.confinement.sandbox import (
    DEFAULT_CONFINEMENT,
    Confinement,
    ProcessRefused,
)
from veriloop.engines.plan.python_child import step_function
from veriloop.engines.plan.tools import as_langchain_tool, openai_tool_schema
from veriloop.llm.base import AsyncStructuredLLM, LLMOutputError, Message, ToolCall, ToolTurn
from veriloop.prompts.plan_executor import (
    MARK_STEP,
    MARK_STEP_REMINDER,
    MARK_STEP_TOOL,
    executor_system_prompt,
    step_message,
)
from veriloop.schemas.manifest import AgentSpec
from veriloop.schemas.plan_run import ExecutionResult, ToolCallRecord
from veriloop.schemas.usage import Usage

MESSAGE_RESULT_CHARS = 4000
"""A tool result is cut to about this many characters in the conversation."""
RECORD_RESULT_CHARS = 1000
"""... and to about this many in its ToolCallRecord."""
SHELL_OUTPUT_CHARS = 4000
"""stdout and stderr of a shell step keep about this many trailing characters."""
"""After the shell exits, how long to wait for background children still holding its pipes."""

# -- the llm executor ------------------------------------------------------------------------


async def run_llm_step(
    llm: AsyncStructuredLLM,
    *,
    step_id: str,
    agent: AgentSpec,
    task: str,
    tools: Mapping[str, BaseTool | Callable[..., Any]],
    max_turns: int,
    timeout_s: float,
) -> ExecutionResult:
    """Run ``agent`` on ``task`` as a tool-calling loop until it calls ``mark_step``.

    The model is offered the agent's named tools (looked up in ``tools``) and ``mark_step``. Each
    turn, every requested tool call runs (in parallel); its result or error goes back as a tool
    message. ``mark_step``'s notes and output are the result; calls in the same message as
    ``mark_step`` still run first. ``timeout_s`` bounds the whole loop: a tool call still running
    at the deadline is recorded ``pending`` (it never got a result), as are the calls of the last allowed turn
    (``max_turns``) when that turn does not call ``mark_step``. A text answer without tool calls
    gets one reminder; a second one ends the step with the text as output. Whenever the loop ends
    without ``mark_step``, a ``pending`` mark_step record says so: the step's own completion call
    never happened, so the pending-tool-calls check fails it (seed 000: prose is not a verdict).

    Raises LLMUnavailable; an LLMOutputError becomes ``ExecutionResult(ok=False)``.
    """
    usage = Usage()
    records: list[ToolCallRecord] = []

    def result(**fields: Any) -> ExecutionResult:
        return ExecutionResult(
            tool_calls=records, usage={"execution": usage.model_dump()}, **fields
        )

    def unmarked(output: Any, why: str) -> ExecutionResult:
        records.append(
            ToolCallRecord(
                id=MARK_STEP, name=MARK_STEP, status="pending", result=f"never called: {why}"
            )
        )
        return result(ok=True, notes="", output=output)

    unknown = [name for name in agent.tools if name not in tools or name == MARK_STEP]
    if unknown:
        return result(
            ok=False,
            error=f"step {step_id}: the agent names tools that are not available: "
            f"{', '.join(unknown)} (available: {', '.join(sorted(tools)) or 'none'}; "
            f"{MARK_STEP!r} is reserved)",
        )
    try:
        offered = {name: as_langchain_tool(tools[name], name=name) for name in agent.tools}
        schemas = [openai_tool_schema(tool) for tool in offered.values()] + [MARK_STEP_TOOL]
    except (ValueError, TypeError) as exc:
        return result(ok=False, error=f"step {step_id}: cannot offer the agent's tools: {exc}")

    messages: list[Message] = [
        {"role": "system", "content": executor_system_prompt(agent.prompt)},
        {"role": "user", "content": step_message(step_id, task)},
    ]
    reminded = False
    last_text: str | None = None
    clock = asyncio.get_running_loop()
    deadline = clock.time() + timeout_s
    for turn_number in range(1, max(1, max_turns) + 1):
        try:
            turn = await asyncio.wait_for(
                llm.atool_turn("execution", messages, schemas), max(0.0, deadline - clock.time())
            )
        except TimeoutError:
            return unmarked(last_text, f"the step's {timeout_s:g} s ran out")
        except LLMOutputError as exc:
            return result(ok=False, error=f"step {step_id}: unusable model answer: {exc}")
        usage = usage + turn.usage
        last_text = turn.content
        if turn.finish_reason == "length":
            return result(
                ok=False, error=f"step {step_id}: the model's answer was cut off (token limit)"
            )

        if not turn.tool_calls:
            if reminded or turn_number >= max_turns:
                return unmarked(turn.content, "the model answered in text")
            reminded = True
            messages.append({"role": "assistant", "content": turn.content or ""})
            messages.append({"role": "user", "content": MARK_STEP_REMINDER})
            continue

        messages.append(_assistant_message(turn))
        marks = [call for call in turn.tool_calls if call.name == MARK_STEP]
        others = [call for call in turn.tool_calls if call.name != MARK_STEP]
        if not marks and turn_number >= max_turns:
            # The turn budget is spent: nobody would read these results, so they never run.
            records.extend(
                ToolCallRecord(
                    id=call.id,
                    name=call.name,
                    arguments=_arguments_for_record(call.arguments),
                    status="pending",
                    result=f"not executed: the step's {max_turns} model turns were used up",
                )
                for call in others
            )
            return unmarked(last_text, f"the step's {max_turns} model turns were used up")

        budget = max(0.0, deadline - clock.time())  # a tool call past the deadline stays pending
        outcomes = await asyncio.gather(*(_run_tool(call, offered, budget) for call in others))
        for call, (record, content) in zip(others, outcomes, strict=True):
            records.append(record)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})

        finished: tuple[str, Any] | None = None
        for call in marks:
            if finished is not None:
                records.append(_mark_record(call, "ok", "ignored: the step was already marked"))
                continue
            try:
                finished = _mark_arguments(call.arguments)
            except ValueError as exc:
                records.append(_mark_record(call, "error", str(exc)))
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": f"Error: {exc}"}
                )
            else:
                records.append(_mark_record(call, "ok", "step marked"))
        if finished is not None:
            notes, output = finished
            return result(ok=True, notes=notes, output=output)
        if turn_number >= max_turns:  # an invalid mark_step on the last turn
            return unmarked(last_text, "its only call on the last turn was invalid")

    return unmarked(last_text, "no turns")  # not reached: the last turn returns


async def _run_tool(
    call: ToolCall, offered: Mapping[str, BaseTool], timeout_s: float
) -> tuple[ToolCallRecord, str]:
    """Run one requested call: (its record, the tool message content). Never raises."""
    arguments: Any = _arguments_for_record(call.arguments)

    def outcome(status: str, text: str) -> tuple[ToolCallRecord, str]:
        record = ToolCallRecord(
            id=call.id,
            name=call.name,
            arguments=arguments,
            status=status,
            result=truncate(text, RECORD_RESULT_CHARS),
        )
        content = truncate(text, MESSAGE_RESULT_CHARS)
        return record, content if status == "ok" else f"Error: {content}"

    tool = offered.get(call.name)
    if tool is None:
        available = ", ".join([*offered, MARK_STEP])
        return outcome("error", f"unknown tool {call.name!r}; available: {available}")
    if not isinstance(arguments, dict):
        return outcome(
            "error", f"arguments must be a JSON object, got {_excerpt(call.arguments)!r}"
        )
    try:
        value = await asyncio.wait_for(_invoke(tool, arguments), timeout_s)
    except TimeoutError:
        return outcome(
            "pending", f"{call.name} was still running at the step's deadline; no result"
        )
    except Exception as exc:  # a tool's failure is the model's information, not ours
        return outcome("error", f"{type(exc).__name__}: {exc}")
    return outcome("ok", _as_text(value))


async def _invoke(tool: BaseTool, arguments: dict[str, Any]) -> Any:
    """Native async tools are awaited; sync ones run in a worker thread."""
    if _has_native_async(tool):
        return await tool.ainvoke(arguments)
    return await asyncio.to_thread(tool.invoke, arguments)


def _has_native_async(tool: BaseTool) -> bool:
    if isinstance(tool, StructuredTool):
        return tool.coroutine is not None
    return type(tool)._arun is not BaseTool._arun


def _assistant_message(turn: ToolTurn) -> Message:
    return {
        "role": "assistant",
        "content": turn.content,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in turn.tool_calls
        ],
    }


def _arguments_for_record(arguments: str) -> Any:
    """Parsed JSON arguments, or the raw text when they are not JSON."""
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments


def _mark_arguments(arguments: str) -> tuple[str, Any]:
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError as exc:
        raise ValueError(
            f"{MARK_STEP} arguments are not valid JSON: {_excerpt(arguments)!r}"
        ) from exc
    if not isinstance(parsed, dict) or not isinstance(parsed.get("notes"), str):
        raise ValueError(
            f'{MARK_STEP} needs {{"notes": "[SUCCESS]: ..." or "[FAIL]: ...", "output": ...}}, '
            f"got {_excerpt(arguments)!r}"
        )
    return parsed["notes"], parsed.get("output")


def _mark_record(call: ToolCall, status: str, text: str) -> ToolCallRecord:
    return ToolCallRecord(
        id=call.id,
        name=call.name,
        arguments=_arguments_for_record(call.arguments),
        status=status,
        result=truncate(text, RECORD_RESULT_CHARS),
    )


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    content = getattr(value, "content", None)  # a ToolMessage
    if isinstance(content, str):
        return content
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _excerpt(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def truncate(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and tail."""
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 2) // 2
    return f"{text[:keep]}\n... [{len(text) - 2 * keep} characters cut] ...\n{text[-keep:]}"


# -- the shell executor ----------------------------------------------------------------------


async def run_shell_step(
    command: str,
    *,
    workspace: Path,
    timeout_s: float,
    confinement: Confinement = DEFAULT_CONFINEMENT,
) -> ExecutionResult:
    """Run ``command`` with the shell in ``workspace``, in its own process group.

    ``output`` is ``{"exit_code", "stdout", "stderr"}`` (the last ~4000 characters of each).
    ok: exit code 0 within ``timeout_s``, nothing left running. The process group and session
    are killed on timeout, on cancellation, and when the shell exits: a step leaves nothing
    running behind it, and one that tried fails with what it left. It runs with
    a scrubbed environment, confined as ``confinement`` says (``layers`` records how). A command
    stopped at a limit (the workspace's size) fails with that reason.
    """
    try:
        run = await run_command(
            command,
            workspace,
            timeout_s=timeout_s,
            tail_chars=SHELL_OUTPUT_CHARS,
            split_stderr=True,
            confinement=confinement,
        )
    except (OSError, ProcessRefused) as exc:
        return ExecutionResult(
            ok=False,
            output={"exit_code": None, "stdout": "", "stderr": ""},
            error=f"could not start the command in {str(workspace)!r}: {exc}",
        )
    output = {"exit_code": run.exit_code, "stdout": run.output, "stderr": run.stderr}
    layers = list(run.layers)
    if run.stopped:
        return ExecutionResult(
            ok=False, output=output, error=f"stopped: {run.stopped}", layers=layers
        )
    if run.timed_out:
        output["stdout"] = output["stdout"].removesuffix(f"\n[killed after {timeout_s:g} s]")
        return ExecutionResult(
            ok=False,
            output=output,
            error=f"timed out after {timeout_s:g}s; the command's process group was killed",
            layers=layers,
        )
    if run.exit_code != 0:
        return ExecutionResult(
            ok=False,
            output=output,
            error=f"exit code {run.exit_code}: {command}",
            layers=layers,
        )
    if run.leftovers:
        return ExecutionResult(
            ok=False, output=output, error=left_running(command, list(run.leftovers)), layers=layers
        )
    return ExecutionResult(ok=True, output=output, layers=layers)


def left_running(what: str, leftovers: list[str]) -> str:
    """Why a step that left threads or processes running when it ended failed."""
    return (
        f"{what} left {len(leftovers)} thread(s) or process(es) running after it returned "
        f"(killed): {'; '.join(leftovers[:10])}"
    )


# -- the python executor ---------------------------------------------------------------------

PYTHON_RESULT_BYTES = 32 * MIB
"""The largest result a python step's process may hand back (its JSON)."""


@dataclass(frozen=True)
class FunctionReference:
    """How a python step's child process finds its function: ``reference`` in a tools spec's
    syntax (``module:attr`` or ``/path/to/file.py:attr``) and ``source``, the package folder or
    file the sandbox shows it read-only."""

    reference: str
    source: Path


def function_reference(fn: Any) -> FunctionReference:
    """Where ``fn`` (a registered callable or LangChain tool) can be imported from by another
    process: its module by name when this process imported it from ``sys.path``, else the module's
    file. ValueError, saying what to do instead, for what cannot be imported at all (a lambda, a
    function defined inside another, a callable object)."""
    fn = step_function(fn)
    qualname = getattr(fn, "__qualname__", None)
    owner = getattr(fn, "__objclass__", None)  # a method descriptor such as str.upper
    module_name = getattr(fn, "__module__", None) or getattr(owner, "__module__", None)
    label = qualname or repr(fn)
    if not module_name or not qualname or "<" in qualname:
        raise ValueError(
            f"{label} cannot be imported by the child process a python step runs in (a lambda, "
            "a function defined inside another, or a callable object): define it at the top "
            "level of a module or file"
        )
    module = sys.modules.get(module_name)
    if module is None or _attribute(module, qualname) is not fn:
        raise ValueError(f"{label} is not reachable as {module_name}:{qualname}")
    if module_name == "builtins":
        return FunctionReference(f"builtins:{qualname}", Path(sys.base_prefix))
    file = getattr(module, "__file__", None)
    if not file:
        raise ValueError(f"{label}: its module {module_name} has no file to import it from")
    file_path = Path(file).resolve()
    root = _import_root(module_name)
    if module_name != "__main__" and root is not None and inside(file_path, [root]):
        return FunctionReference(f"{module_name}:{qualname}", root)
    return FunctionReference(f"{file_path}:{qualname}", file_path)


def _attribute(module: Any, qualname: str) -> Any:
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return step_function(obj)


def _import_root(module_name: str) -> Path | None:
    """The package folder (or module file) another process would import ``module_name``'s top
    level from, looking where :func:`import_object` looks; None when it would find none."""
    top = module_name.partition(".")[0]
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.machinery.PathFinder.find_spec(top, [*sys.path, os.getcwd()])
        if spec is not None and spec.submodule_search_locations:
            return Path(next(iter(spec.submodule_search_locations))).resolve()
        if spec is not None and spec.origin:
            return Path(spec.origin).resolve()
    return None


async def run_python_step(
    fn: Any,
    *,
    input: Any,
    depends: Any,
    workspace: Path,
    timeout_s: float,
    confinement: Confinement = DEFAULT_CONFINEMENT,
) -> ExecutionResult:
    """Call ``fn`` for a python step in a process of its own, within ``timeout_s``.

    The process is confined as a shell step's (``confinement``; processes the service forbids are
    model-written commands, not the operator's functions, so ``forbidden`` does not apply) and
    works in ``workspace``. It gets a JSON request (``fn``'s reference, ``input``, ``depends``) and
    answers JSON (see :mod:`~veriloop.engines.plan.python_child`), so nothing the function does
    reaches another step's recorded data, and nothing it starts outlives it.

    The function's return value is the output, except that a dict with ``"notes"`` or ``"output"``
    keys is taken as notes and output. ``ok=False`` with the reason when the function cannot be
    referenced or imported, raises, times out, returns what is not JSON or over
    :data:`PYTHON_RESULT_BYTES`, the process dies without an answer, or threads or processes it
    started were still running when it returned (they are killed).
    """
    try:
        where = function_reference(fn)
    except ValueError as exc:
        return ExecutionResult(ok=False, error=f"python step function {exc}")
    request = {
        "function": where.reference,
        # "" is this process's working directory, not the child's (the workspace)
        "sys_path": [entry or os.getcwd() for entry in [*sys.path, ""]],
        "input": input,
        "depends": depends,
    }
    try:
        payload = json.dumps(request).encode()
    except (TypeError, ValueError) as exc:
        return ExecutionResult(ok=False, error=f"the step's input is not JSON: {exc}")
    try:
        run = await run_command(
            'exec "$0" -I -B -c "$1"',
            workspace,
            timeout_s=timeout_s,
            tail_chars=PYTHON_RESULT_BYTES,
            split_stderr=True,
            confinement=dataclasses.replace(confinement, forbidden=None),
            readonly=[where.source],
            args=(sys.executable, _child_source()),
            stdin=payload,
        )
    except (OSError, ProcessRefused) as exc:
        return ExecutionResult(ok=False, error=f"could not start {where.reference}: {exc}")
    return _python_result(run, where.reference, timeout_s)


def _python_result(run: CommandRun, reference: str, timeout_s: float) -> ExecutionResult:
    layers = list(run.layers)
    stderr = truncate(run.stderr, SHELL_OUTPUT_CHARS)

    def failed(error: str, **fields: Any) -> ExecutionResult:
        return ExecutionResult(ok=False, error=error, layers=layers, **fields)

    if run.timed_out:
        return failed(f"{reference} timed out after {timeout_s:g}s; its processes were killed")
    if run.stopped:
        return failed(f"stopped: {run.stopped}")
    if run.output_bytes > PYTHON_RESULT_BYTES:
        return failed(
            f"{reference} returned {describe_bytes(run.output_bytes)} of output, over the "
            f"limit of {describe_bytes(PYTHON_RESULT_BYTES)}"
        )
    try:
        answer = json.loads(run.output) if run.exit_code == 0 else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        how = f"exit status {run.exit_code}" if run.exit_code else "an unreadable answer"
        return failed(
            f"the process of {reference} ended without a result ({how})"
            + (f": {stderr.strip()}" if stderr.strip() else "")
        )
    notes = answer.get("notes")
    notes = "" if notes is None else str(notes)
    left = [str(item) for item in answer.get("leftovers") or []] + list(run.leftovers)
    if answer.get("error"):
        return failed(str(answer["error"]), notes=notes)
    if left:
        return failed(left_running(reference, left), output=answer.get("output"), notes=notes)
    return ExecutionResult(ok=True, output=answer.get("output"), notes=notes, layers=layers)


@cache
def _child_source() -> str:
    return Path(python_child.__file__).read_text(encoding="utf-8")
