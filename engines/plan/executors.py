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
import copy
import inspect
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from veriloop.engines.plan.confinement.process import run_command
from veriloop.engines.plan.confinement.sandbox import (
    DEFAULT_CONFINEMENT,
    Confinement,
    ProcessRefused,
)
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
    ok: exit code 0 within ``timeout_s``. The process group is killed on timeout, on
    cancellation, and when the shell exits: a step leaves nothing running behind it. It runs with
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
    return ExecutionResult(ok=True, output=output, layers=layers)


# -- the python executor ---------------------------------------------------------------------


async def run_python_step(
    fn: Callable[..., Any], *, input: Any, depends: Any, timeout_s: float
) -> ExecutionResult:
    """Call ``fn`` for a python step, within ``timeout_s``.

    Calling convention, from ``fn``'s signature: ``fn(input=..., depends=...)`` when it has a
    ``depends`` parameter or ``**kwargs``; otherwise ``fn(input)`` when it takes a positional
    argument; otherwise ``fn()``. ``depends`` maps each dependency's step id to its output. Sync
    functions run in a worker thread, async ones (or a returned awaitable) are awaited; a LangChain
    tool is invoked with ``input``.

    The return value is the output, except that a dict with ``"notes"`` or ``"output"`` keys (or
    an ExecutionResult) is taken as the executor's result. An exception or a timeout is
    ``ok=False`` with its text.
    """
    label = getattr(fn, "__name__", None) or getattr(fn, "name", None) or type(fn).__name__
    try:
        value = await asyncio.wait_for(_call_python(fn, input, depends), timeout_s)
    except TimeoutError:
        return ExecutionResult(ok=False, error=f"{label} timed out after {timeout_s:g}s")
    except Exception as exc:
        return ExecutionResult(ok=False, error=f"{label} raised {type(exc).__name__}: {exc}")
    if isinstance(value, ExecutionResult):
        return value
    if isinstance(value, dict) and ("notes" in value or "output" in value):
        notes = value.get("notes")
        return ExecutionResult(
            ok=True, output=value.get("output"), notes="" if notes is None else str(notes)
        )
    return ExecutionResult(ok=True, output=value)


async def _call_python(fn: Callable[..., Any], input: Any, depends: Any) -> Any:
    if isinstance(fn, BaseTool):
        return await _invoke_tool_input(fn, input)
    if not callable(fn):
        raise TypeError(f"{fn!r} is not callable")
    # Copies in and out: the step's code shares this process, and what other steps recorded
    # (its inputs) or what it returns must not change after the fact through a kept reference.
    input, depends = copy.deepcopy((input, depends))
    args, kwargs = _python_arguments(fn, input, depends)
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004
    ):
        value = await fn(*args, **kwargs)
    else:
        value = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(value):
        value = await value
    return copy.deepcopy(value)


async def _invoke_tool_input(tool: BaseTool, input: Any) -> Any:
    if _has_native_async(tool):
        return await tool.ainvoke(input)
    return await asyncio.to_thread(tool.invoke, input)


def _python_arguments(
    fn: Callable[..., Any], input: Any, depends: Any
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no signature (some builtins): the documented default
        return (), {"input": input, "depends": depends}
    kinds = {p.kind for p in parameters}
    names = {p.name for p in parameters}
    if "depends" in names or inspect.Parameter.VAR_KEYWORD in kinds:
        return (), {"input": input, "depends": depends}
    positional = {
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
    }
    if kinds & positional:
        return (input,), {}
    if "input" in names:  # keyword-only input
        return (), {"input": input}
    return (), {}
