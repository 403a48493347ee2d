"""Python steps run out of process: a JSON request and result, the step's confinement, and nothing
they start outlives them (threads, processes, detached daemons), sandboxed or not."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
import step_functions as fns
import step_tools
from langgraph.checkpoint.memory import InMemorySaver
from plan_testkit import manifest, py_step

from veriloop.context import PlanContext
from veriloop.engines.plan import executors
from veriloop.engines.plan.confinement.limits import MIB, Limits
from veriloop.engines.plan.confinement.sandbox import Confinement
from veriloop.engines.plan.executors import function_reference, run_python_step, run_shell_step
from veriloop.engines.plan.tools import load_tools
from veriloop.plans import PlanRunner

MODES = {"sandboxed": Confinement(sandbox="required"), "unsandboxed": Confinement(sandbox="off")}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=list(MODES))
def confinement(request) -> Confinement:
    return MODES[request.param]


async def run(fn: Any, workspace: Path, confinement: Confinement, **fields: Any):
    options = {"input": None, "depends": {}, "timeout_s": 30, **fields}
    return await run_python_step(fn, workspace=workspace, confinement=confinement, **options)


# -- the request and the result ---------------------------------------------------------------


@pytest.mark.anyio
async def test_a_function_gets_input_and_depends_in_a_process_of_its_own(tmp_path, confinement):
    result = await run(fns.add_dependency, tmp_path, confinement, input=1, depends={"a": 2})
    assert result.ok and result.notes == "" and result.output["sum"] == 3
    assert result.output["pid"] != os.getpid()
    sandboxed = confinement.sandbox == "required"
    assert ("namespaces" in result.layers) is sandboxed and "limits" in result.layers


@pytest.mark.anyio
async def test_calling_conventions_and_the_notes_output_dict(tmp_path, confinement):
    result = await run(fns.notes_and_output, tmp_path, confinement, input="x", depends={"b": 1})
    assert result.ok and result.notes == "[SUCCESS]: computed" and result.output == ["x", ["b"]]
    assert (await run(str.upper, tmp_path, confinement, input="abc")).output == "ABC"
    assert (await run(fns.double, tmp_path, confinement, input=2)).output == 4
    assert (await run(fns.fixed, tmp_path, confinement, input=2)).output == "fixed"
    assert (await run(step_tools.shout, tmp_path, confinement, input="a")).output == "A"


@pytest.mark.anyio
async def test_a_function_from_a_tools_file_is_imported_from_that_file(tmp_path, confinement):
    tools_file = tmp_path / "elsewhere" / "mytools.py"
    tools_file.parent.mkdir()
    tools_file.write_text("def greet(input):\n    return f'hello {input}'\n\nTOOLS = [greet]\n")
    greet = load_tools(f"{tools_file}:TOOLS")["greet"]
    assert function_reference(greet).reference == f"{tools_file}:greet"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    assert (await run(greet, workspace, confinement, input="you")).output == "hello you"


def test_what_a_child_cannot_import_is_refused_with_what_to_do_instead() -> None:
    def inner(input: Any = None) -> Any:
        return input

    for fn in (inner, lambda input=None: input):
        with pytest.raises(ValueError, match="define it at the top level of a module or file"):
            function_reference(fn)
    assert function_reference(fns.ok).reference == "step_functions:ok"


@pytest.mark.anyio
async def test_a_closure_fails_its_step_with_the_reason(tmp_path) -> None:
    result = await run(lambda: "x", tmp_path, MODES["unsandboxed"])
    assert not result.ok and "cannot be imported by the child process" in result.error


# -- failures: an error never completes a step -----------------------------------------------


@pytest.mark.anyio
async def test_an_exception_is_a_failed_execution(tmp_path, confinement) -> None:
    result = await run(fns.boom, tmp_path, confinement)
    assert not result.ok and result.error == "boom raised RuntimeError: the executor crashed"


@pytest.mark.anyio
@pytest.mark.parametrize("fn", [fns.sleeps, fns.blocks])
async def test_a_timeout_kills_the_process(tmp_path, fn) -> None:
    result = await run(fn, tmp_path, MODES["unsandboxed"], timeout_s=1)
    assert not result.ok and "timed out after 1s; its processes were killed" in result.error


@pytest.mark.anyio
async def test_bad_outputs_fail_the_step_with_a_clear_error(
    tmp_path, confinement, monkeypatch
) -> None:
    result = await run(fns.a_set, tmp_path, confinement)
    assert not result.ok and "not JSON" in result.error and "set" in result.error
    monkeypatch.setattr(executors, "PYTHON_RESULT_BYTES", 10_000)
    result = await run(fns.huge, tmp_path, confinement, input=20_000)
    assert not result.ok and "over the limit of" in result.error
    result = await run(fns.exits, tmp_path, confinement)
    assert not result.ok and "ended without a result (exit status 3)" in result.error
    # Exiting 0 after printing a summary is no answer either.
    result = await run(fns.prints_then_exits_zero, tmp_path, confinement)
    assert not result.ok and "ended without a result" in result.error
    assert "3 passed" in result.error  # its output, for the diagnosis


@pytest.mark.anyio
async def test_the_memory_limit_applies(tmp_path, confinement) -> None:
    limited = Confinement(sandbox=confinement.sandbox, limits=Limits(memory_bytes=256 * MIB))
    result = await run(fns.allocates, tmp_path, limited, input=1 << 30)
    assert not result.ok and "MemoryError" in result.error
    assert (await run(fns.allocates, tmp_path, limited, input=1 << 20)).output == 1 << 20


@pytest.mark.anyio
async def test_mutating_its_input_changes_nothing_outside_the_step(tmp_path, confinement):
    depends = {"collect": {"rows": [1, 2, 3], "total": 7}}
    step_input = {"asked": 1}
    result = await run(
        fns.mutate_dependency, tmp_path, confinement, input=step_input, depends=depends
    )
    assert result.ok and result.output == {"seen": {"rows": [1, 2, 3], "total": 6}}
    assert depends == {"collect": {"rows": [1, 2, 3], "total": 7}}
    assert step_input == {"asked": 1}


# -- nothing outlives a step ------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_thread_left_running_fails_the_step_and_dies_with_it(tmp_path, confinement):
    target = tmp_path / "tests" / "test_calc.py"
    target.parent.mkdir()
    target.write_text("def test_add():\n    assert False\n")
    swap = {"test": str(target), "tautologies": "def test_add():\n    assert True\n"}
    result = await run(fns.swap_test_file, tmp_path, confinement, input=swap)
    assert not result.ok and "left 1 thread(s) or process(es) running" in result.error
    assert "thread 'swapper'" in result.error
    await asyncio.sleep(1.5)  # the thread would have swapped the file after 0.5 s
    assert "assert False" in target.read_text()


@pytest.mark.anyio
async def test_a_detached_daemon_fails_the_step_and_is_killed(tmp_path, confinement) -> None:
    marker = tmp_path / "daemon.txt"
    result = await run(fns.daemon, tmp_path, confinement, input=str(marker))
    assert not result.ok and "running after it returned (killed): process" in result.error
    time.sleep(2.5)  # the daemon would have written after 1.5 s
    assert not marker.exists()


def test_through_the_plan_graph_no_step_changes_what_another_recorded(tmp_path) -> None:
    """The judged step fixes its dependency's total in place; the record and the gate on it see
    the upstream's own output. A step that leaves a daemon behind fails with that reason."""
    runner = PlanRunner(
        checkpointer=InMemorySaver(),
        context=PlanContext(workspace=str(tmp_path / "ws"), review_critical_steps=False),
        tools={"collect": fns.collect, "summarize": fns.mutate_dependency, "daemon": fns.daemon},
    )
    (tmp_path / "ws").mkdir()
    gate = 'depends["collect"]["total"] == sum(depends["collect"]["rows"])'
    report = runner.run(
        manifest(
            py_step("collect", "collect", requires_testing=False),
            py_step(
                "summarize",
                "summarize",
                input={},
                depends_on=["collect"],
                checks=[{"kind": "predicate", "expr": gate}],
                requires_testing=False,
            ),
            py_step("leaves", "daemon", input=str(tmp_path / "late.txt"), requires_testing=False),
        )
    )
    assert report.steps["collect"].output == {"rows": [1, 2, 3], "total": 7}
    summarize = report.steps["summarize"]
    assert summarize.status != "completed"
    assert [c.passed for c in summarize.attempts[-1].checks if c.type == "predicate"] == [False]
    leaves = report.steps["leaves"]
    assert leaves.verification_status == "execution_failed"
    assert "running after it returned" in leaves.diagnosis


@pytest.mark.anyio
async def test_a_shell_step_that_leaves_a_process_in_its_session_fails(tmp_path) -> None:
    marker = tmp_path / "late.txt"
    result = await run_shell_step(
        f"(setpgid_escape() {{ sleep 1.5; touch {marker}; }}; set -m; setpgid_escape &) ; true",
        workspace=tmp_path,
        timeout_s=30,
        confinement=MODES["unsandboxed"],
    )
    assert not result.ok and "running after it returned (killed): process" in result.error
    time.sleep(2)
    assert not marker.exists()
