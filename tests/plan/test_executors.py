"""The plan step executors (llm tool-calling loop, shell, python) and tool loading."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import BaseTool, tool

from veriloop.engines.plan.confinement.sandbox import Confinement
from veriloop.engines.plan.executors import (
    MESSAGE_RESULT_CHARS,
    RECORD_RESULT_CHARS,
    run_llm_step,
    run_shell_step,
)
from veriloop.engines.plan.tools import as_langchain_tool, load_tools, openai_tool_schema
from veriloop.engines.plan.workspace import Workspace, workspace_tools
from veriloop.llm import LLMUnavailable, get_llm
from veriloop.llm.scripted import Fail, RawBody, ScriptedModelServer, ScriptedRequest, ToolCalls
from veriloop.prompts.plan_executor import MARK_STEP_REMINDER, STEP_COMPLETION_CONTRACT
from veriloop.schemas.manifest import AgentSpec

UNSANDBOXED = Confinement(sandbox="off")
"""Sandboxed runs of the same commands: tests/plan/test_sandbox.py."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    return Workspace(root)


def file_tools(ws: Workspace) -> dict[str, BaseTool]:
    return {t.name: t for t in workspace_tools(ws)}


def tool_results(req: ScriptedRequest) -> list[str]:
    return [m["content"] for m in req.messages if m["role"] == "tool"]


def model_turns(req: ScriptedRequest) -> int:
    return sum(1 for m in req.messages if m["role"] == "assistant")


async def step(**overrides: Any):
    arguments: dict[str, Any] = {
        "step_id": "s1",
        "agent": AgentSpec(prompt="You are a careful writer.", tools=["write_file"]),
        "task": "Write hello.txt containing 'hello'.",
        "tools": {},
        "max_turns": 6,
        "timeout_s": 5.0,
    }
    arguments.update(overrides)
    return await run_llm_step(get_llm(), **arguments)


# -- the llm executor ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_llm_step_writes_a_file_then_marks_the_step(
    scripted_model: ScriptedModelServer, workspace: Workspace
) -> None:
    def writer(req: ScriptedRequest):
        assert req.messages[1]["content"].startswith("Step: s1\n")
        if not tool_results(req):
            return ToolCalls([("write_file", {"path": "out/hello.txt", "content": "hello"})])
        return ToolCalls([("mark_step", {"notes": "[SUCCESS]: wrote it", "output": {"n": 1}})])

    scripted_model.on("execution", writer)
    result = await step(tools=file_tools(workspace))

    assert (workspace.root / "out" / "hello.txt").read_text() == "hello"
    assert result.ok and result.error is None
    assert result.notes == "[SUCCESS]: wrote it"
    assert result.output == {"n": 1}
    assert [(r.name, r.status) for r in result.tool_calls] == [
        ("write_file", "ok"),
        ("mark_step", "ok"),
    ]
    assert result.tool_calls[0].result == "wrote 5 bytes to out/hello.txt"
    assert result.tool_calls[0].arguments == {"path": "out/hello.txt", "content": "hello"}
    assert result.usage["execution"]["calls"] == 2

    first, second = scripted_model.requests
    assert first.purpose == "execution"
    assert first.tools == ["write_file", "mark_step"]
    system, user = first.messages
    assert system["content"].startswith("You are a careful writer.")
    assert STEP_COMPLETION_CONTRACT in system["content"]
    assert user["content"] == "Step: s1\n\nWrite hello.txt containing 'hello'."
    assistant, tool_message = second.messages[2:]
    assert assistant["role"] == "assistant" and assistant["content"] is None
    assert assistant["tool_calls"][0]["function"]["name"] == "write_file"
    assert tool_message == {
        "role": "tool",
        "tool_call_id": assistant["tool_calls"][0]["id"],
        "content": "wrote 5 bytes to out/hello.txt",
    }


@pytest.mark.anyio
async def test_calls_beside_mark_step_run_first(
    scripted_model: ScriptedModelServer, workspace: Workspace
) -> None:
    scripted_model.script(
        "execution",
        ToolCalls(
            [
                ("write_file", {"path": "a.txt", "content": "A"}),
                ("mark_step", {"notes": "[FAIL]: only wrote a.txt"}),
            ]
        ),
    )
    result = await step(tools=file_tools(workspace), max_turns=1)
    assert (workspace.root / "a.txt").read_text() == "A"
    assert result.ok and result.notes == "[FAIL]: only wrote a.txt" and result.output is None
    assert [r.status for r in result.tool_calls] == ["ok", "ok"]


@pytest.mark.anyio
async def test_tool_exception_is_an_error_record_and_the_loop_goes_on(
    scripted_model: ScriptedModelServer,
) -> None:
    def divide(a: int, b: int) -> float:
        """Divide a by b."""
        return a / b

    def agent(req: ScriptedRequest):
        results = tool_results(req)
        if not results:
            return ToolCalls([("divide", {"a": 1, "b": 0}), ("divide", {"a": 6, "b": 3})])
        if len(results) == 2:
            return ToolCalls([("divide", '{"a": 1,')])  # malformed arguments
        return ToolCalls([("mark_step", {"notes": f"[FAIL]: saw {results[0]}"})])

    scripted_model.on("execution", agent)
    result = await step(agent=AgentSpec(tools=["divide"]), tools={"divide": divide})

    assert result.ok
    assert [(r.status, r.result) for r in result.tool_calls[:2]] == [
        ("error", "ZeroDivisionError: division by zero"),
        ("ok", "2.0"),
    ]
    assert result.tool_calls[2].status == "error"
    assert result.tool_calls[2].arguments == '{"a": 1,'
    assert result.notes == "[FAIL]: saw Error: ZeroDivisionError: division by zero"
    assert "arguments must be a JSON object" in tool_results(scripted_model.requests[-1])[-1]


@pytest.mark.anyio
async def test_unknown_tool_from_the_model_is_an_error_and_the_loop_goes_on(
    scripted_model: ScriptedModelServer, workspace: Workspace
) -> None:
    scripted_model.script(
        "execution",
        ToolCalls([("delete_everything", {})]),
        ToolCalls([("mark_step", {"notes": "[SUCCESS]: done"})]),
    )
    result = await step(tools=file_tools(workspace))
    assert result.ok and result.notes == "[SUCCESS]: done"
    record = result.tool_calls[0]
    assert record.status == "error" and "unknown tool 'delete_everything'" in record.result
    assert "write_file, mark_step" in tool_results(scripted_model.requests[1])[0]


@pytest.mark.anyio
async def test_unknown_tool_in_the_agent_spec_fails_without_a_model_call(
    scripted_model: ScriptedModelServer, workspace: Workspace
) -> None:
    result = await step(
        agent=AgentSpec(tools=["write_file", "teleport"]), tools=file_tools(workspace)
    )
    assert not result.ok and "teleport" in result.error
    assert scripted_model.calls() == 0


@pytest.mark.anyio
async def test_max_turns_leaves_the_last_turns_calls_pending(
    scripted_model: ScriptedModelServer, workspace: Workspace
) -> None:
    scripted_model.on(
        "execution", lambda req: ToolCalls([("list_files", {}), ("read_file", {"path": "x"})])
    )
    agent = AgentSpec(tools=["list_files", "read_file"])
    result = await step(agent=agent, tools=file_tools(workspace), max_turns=2)

    assert result.ok and result.notes == ""
    assert [r.status for r in result.tool_calls] == ["ok", "ok", "pending", "pending", "pending"]
    assert result.tool_calls[-1].name == "mark_step"  # the step was never marked
    assert "model turns were used up" in result.tool_calls[2].result
    assert scripted_model.calls("execution") == 2


@pytest.mark.anyio
async def test_slow_tools_time_out_as_pending(scripted_model: ScriptedModelServer) -> None:
    release = threading.Event()

    async def slow_async(seconds: float) -> str:
        """Sleep."""
        await asyncio.sleep(seconds)
        return "late"

    def slow_sync(seconds: float) -> str:
        """Block."""
        release.wait(seconds)
        return "late"

    scripted_model.script(
        "execution",
        ToolCalls([("slow_async", {"seconds": 10}), ("slow_sync", {"seconds": 10})]),
        ToolCalls([("mark_step", {"notes": "[FAIL]: tools too slow"})]),
    )
    agent = AgentSpec(tools=["slow_async", "slow_sync"])
    try:
        result = await step(
            agent=agent,
            tools={"slow_async": slow_async, "slow_sync": slow_sync},
            timeout_s=1.0,  # room for the first model call on a busy machine; the tools take 10 s
        )
    finally:
        release.set()  # let the worker thread go

    # timeout_s bounds the whole loop: both calls were cut off, and no time was left to mark.
    assert [(r.name, r.status) for r in result.tool_calls] == [
        ("slow_async", "pending"),
        ("slow_sync", "pending"),
        ("mark_step", "pending"),
    ]
    assert "still running at the step's deadline" in result.tool_calls[0].result


@pytest.mark.anyio
async def test_calls_of_one_turn_run_in_parallel(scripted_model: ScriptedModelServer) -> None:
    both_started = asyncio.Event()
    started = 0

    async def meet(name: str) -> str:
        """Wait until the other call has started too."""
        nonlocal started
        started += 1
        if started == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), 2)
        return f"met {name}"

    def sync_meet(name: str) -> str:
        """A sync tool runs in a thread, off the event loop."""
        time.sleep(0.05)
        return f"sync {name}"

    scripted_model.script(
        "execution",
        ToolCalls([("meet", {"name": "a"}), ("sync_meet", {"name": "c"}), ("meet", {"name": "b"})]),
        ToolCalls([("mark_step", {"notes": "[SUCCESS]: met"})]),
    )
    result = await step(
        agent=AgentSpec(tools=["meet", "sync_meet"]),
        tools={"meet": meet, "sync_meet": sync_meet},
    )
    assert [r.result for r in result.tool_calls] == ["met a", "sync c", "met b", "step marked"]


@pytest.mark.anyio
async def test_text_answers_get_one_reminder_then_leave_mark_step_pending(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.script("execution", "I think it is done.", "Really, it is done.")
    result = await step(agent=AgentSpec(), tools={})

    assert result.ok
    assert result.notes == "" and result.output == "Really, it is done."
    # Prose is not a verdict: the missing mark_step is a pending call, which fails the step.
    assert [(r.name, r.status) for r in result.tool_calls] == [("mark_step", "pending")]
    first, second = scripted_model.requests
    assert first.tools == ["mark_step"]
    assert second.messages[-2] == {"role": "assistant", "content": "I think it is done."}
    assert second.messages[-1] == {"role": "user", "content": MARK_STEP_REMINDER}
    assert result.usage["execution"]["calls"] == 2


@pytest.mark.anyio
async def test_reminder_then_mark_step(scripted_model: ScriptedModelServer) -> None:
    scripted_model.script(
        "execution", "Done!", ToolCalls([("mark_step", {"notes": "[SUCCESS]: ok", "output": 3})])
    )
    result = await step(agent=AgentSpec(), tools={})
    assert (result.notes, result.output) == ("[SUCCESS]: ok", 3)


@pytest.mark.anyio
async def test_invalid_mark_step_is_answered_and_the_loop_goes_on(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.script(
        "execution",
        ToolCalls([("mark_step", {"output": 1})]),
        ToolCalls([("mark_step", {"notes": "[SUCCESS]: fixed"})]),
    )
    result = await step(agent=AgentSpec(), tools={})
    assert result.notes == "[SUCCESS]: fixed"
    assert [r.status for r in result.tool_calls] == ["error", "ok"]
    assert "needs" in tool_results(scripted_model.requests[1])[0]


@pytest.mark.anyio
async def test_long_tool_results_are_truncated(scripted_model: ScriptedModelServer) -> None:
    def dump() -> str:
        """A lot of text."""
        return "x" * 5000 + "THE END"

    scripted_model.script(
        "execution",
        ToolCalls([("dump", {})]),
        ToolCalls([("mark_step", {"notes": "[SUCCESS]: read"})]),
    )
    result = await step(agent=AgentSpec(tools=["dump"]), tools={"dump": dump})
    [message] = tool_results(scripted_model.requests[1])
    assert len(message) <= MESSAGE_RESULT_CHARS + 60 and message.endswith("THE END")
    assert len(result.tool_calls[0].result) <= RECORD_RESULT_CHARS + 60
    assert "characters cut" in result.tool_calls[0].result


@pytest.mark.anyio
async def test_a_body_that_is_not_a_chat_completion_is_an_outage_not_a_failed_step(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.script("execution", RawBody("<html>oops</html>"))
    with pytest.raises(LLMUnavailable, match="not a chat completion"):
        await step(agent=AgentSpec(), tools={})


@pytest.mark.anyio
async def test_provider_outage_propagates(
    scripted_model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted_model.on("execution", lambda req: Fail(503, "down", retry_after_s=0.01))
    monkeypatch.setenv("VERILOOP_LLM_MAX_RETRIES", "0")
    with pytest.raises(LLMUnavailable, match="HTTP 503"):
        await step(agent=AgentSpec(), tools={})


# -- the shell executor --------------------------------------------------------------------


@pytest.mark.anyio
async def test_shell_success_runs_in_the_workspace(tmp_path: Path) -> None:
    result = await run_shell_step("pwd; echo oops >&2", workspace=tmp_path, timeout_s=10)
    assert result.ok and result.error is None
    assert result.output == {"exit_code": 0, "stdout": f"{tmp_path}\n", "stderr": "oops\n"}


@pytest.mark.anyio
async def test_shell_non_zero_exit(tmp_path: Path) -> None:
    result = await run_shell_step("echo partial; exit 3", workspace=tmp_path, timeout_s=10)
    assert not result.ok and "exit code 3" in result.error
    assert result.output["exit_code"] == 3 and result.output["stdout"] == "partial\n"


@pytest.mark.anyio
async def test_shell_output_keeps_the_tail(tmp_path: Path) -> None:
    result = await run_shell_step(
        "python3 -c \"print('a' * 20000); print('LAST')\"", workspace=tmp_path, timeout_s=10
    )
    stdout = result.output["stdout"]
    assert result.ok and stdout.endswith("LAST\n") and "earlier output omitted" in stdout
    assert len(stdout) < 4100


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie waiting for a reaper is gone too
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.anyio
async def test_shell_timeout_kills_the_process_group(tmp_path: Path) -> None:
    started = time.monotonic()
    result = await run_shell_step(
        "sleep 30 & echo $! > child.pid; echo started; wait",
        workspace=tmp_path,
        timeout_s=0.5,
        confinement=UNSANDBOXED,  # $! is a host pid only outside bubblewrap's pid namespace
    )
    assert time.monotonic() - started < 10
    assert not result.ok and "timed out after 0.5s" in result.error
    assert result.output["stdout"] == "started\n"
    child = int((tmp_path / "child.pid").read_text())
    for _ in range(50):
        if _gone(child):
            break
        await asyncio.sleep(0.05)
    assert _gone(child), f"sleep child {child} survived the timeout"


@pytest.mark.anyio
async def test_shell_leaves_no_background_children_behind(tmp_path: Path) -> None:
    started = time.monotonic()
    result = await run_shell_step(
        "sleep 30 & echo $! > child.pid; echo done",
        workspace=tmp_path,
        timeout_s=20,
        confinement=UNSANDBOXED,
    )
    child = int((tmp_path / "child.pid").read_text())
    # Killed with the step, which fails for leaving it running.
    assert not result.ok and result.output["stdout"] == "done\n"
    assert f"process {child} (" in result.error  # its command line: sh, or sleep once exec'd
    assert time.monotonic() - started < 10  # not the child's 30 s
    for _ in range(50):
        if _gone(child):
            break
        await asyncio.sleep(0.05)
    assert _gone(child), f"background child {child} outlived its step"


@pytest.mark.anyio
async def test_shell_missing_workspace_is_a_failed_execution(tmp_path: Path) -> None:
    result = await run_shell_step("true", workspace=tmp_path / "missing", timeout_s=5)
    assert not result.ok and "could not start" in result.error


# -- loading tools -------------------------------------------------------------------------


def add(a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


async def fetch(url: str) -> str:
    """Fetch a URL."""
    return url


@tool
def shout(text: str) -> str:
    """Shout text."""
    return text.upper()


def test_load_tools_from_lists_dicts_and_none() -> None:
    assert load_tools(None) == {}
    loaded = load_tools([add, fetch, shout])
    assert loaded == {"add": add, "fetch": fetch, "shout": shout}
    assert load_tools({"plus": add}) == {"plus": add}
    with pytest.raises(ValueError, match="two tools are named 'add'"):
        load_tools([add, add])
    with pytest.raises(ValueError, match="is not a tool"):
        load_tools([add, 42])
    with pytest.raises(ValueError, match="is not a tool"):
        load_tools({"x": "not a tool"})


def test_load_tools_from_an_import_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_step_tools.py").write_text(
        textwrap.dedent(
            '''
            def ping(host: str) -> str:
                """Ping a host."""
                return "pong " + host

            TOOLS = [ping]
            BY_NAME = {"p": ping}
            NOT_TOOLS = [1, 2]
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_step_tools", raising=False)
    assert list(load_tools("my_step_tools:TOOLS")) == ["ping"]
    assert list(load_tools("my_step_tools:BY_NAME")) == ["p"]
    for path, fragment in [
        ("my_step_tools", "must look like"),
        ("no_such_module_xyz:TOOLS", "cannot import"),
        ("my_step_tools:MISSING", "no attribute 'MISSING'"),
        ("my_step_tools:NOT_TOOLS", "is not a tool"),
    ]:
        with pytest.raises(ValueError, match=fragment):
            load_tools(path)


@pytest.mark.anyio
async def test_functions_become_langchain_tools_with_schemas() -> None:
    schema = openai_tool_schema(add)
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "add"
    assert schema["function"]["description"] == "Add two numbers."
    assert schema["function"]["parameters"]["required"] == ["a"]
    assert as_langchain_tool(add).invoke({"a": 2}) == 3
    assert await as_langchain_tool(fetch).ainvoke({"url": "u"}) == "u"
    renamed = as_langchain_tool(shout, name="yell")
    assert renamed.name == "yell" and shout.name == "shout"
    assert openai_tool_schema(shout)["function"]["name"] == "shout"
    with pytest.raises(ValueError, match="not a tool"):
        as_langchain_tool(3)
    assert json.dumps(openai_tool_schema(fetch))  # plain JSON for the request


def test_load_tools_reads_a_file_path_and_says_what_is_wrong(tmp_path: Path) -> None:
    from veriloop.engines.plan.tools import load_tools

    (tmp_path / "mytools.py").write_text(
        "def shout(text: str) -> str:\n    return text.upper()\n\nTOOLS = [shout]\n"
    )
    assert list(load_tools(f"{tmp_path / 'mytools.py'}:TOOLS")) == ["shout"]
    for spec, message in [
        (f"{tmp_path / 'missing.py'}:TOOLS", "no tools file"),
        (f"{tmp_path / 'mytools.py'}:NOPE", "no attribute 'NOPE'"),
        ("no_such_module_xyz:TOOLS", "No module named"),
    ]:
        with pytest.raises(ValueError, match=message):
            load_tools(spec)
