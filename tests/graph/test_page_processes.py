"""Page work in page processes (Context.page_processes): the same results as a thread, and a dead
page process costs at most the calls it was running. That the serving process then parses nothing
is in test_dom_context.py; that a killed page process costs no step of the service, in
tests/server/test_hardening.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from patient_pages import big_page

from veriloop.context import Context
from veriloop.engines import dom_context, observation
from veriloop.engines.verification import observe_page
from veriloop.page_processes import PageProcessLost, offload_for, run_in_page_process
from veriloop.server.settings import Settings, default_page_processes

pytestmark = pytest.mark.anyio

URL = "http://app.test/"


async def test_the_page_work_runs_in_another_process_and_gives_what_a_thread_gives():
    before = observation.capture_page_state(URL, big_page(rows=30))
    args = (before, big_page(rows=31), URL, None, None, "click(4)")

    in_thread = await offload_for(0)(observe_page, *args)
    in_process = await offload_for(1)(observe_page, *args)

    assert await offload_for(1)(os.getpid) != os.getpid()
    assert in_process == in_thread
    observed, fingerprint = in_process
    assert observed.meaningful_content_change and fingerprint
    assert observed.compact_page == dom_context.read_compact_page(args[1])


async def test_an_error_in_the_page_work_reaches_the_caller_as_itself():
    with pytest.raises(ValueError, match="invalid literal"):
        await run_in_page_process(1, int, "not a number")
    assert await run_in_page_process(1, int, "7") == 7  # the pool is still good


async def test_a_page_process_killed_between_calls_is_replaced():
    pid = await run_in_page_process(1, os.getpid)
    os.kill(pid, signal.SIGKILL)
    _wait_gone(pid)

    replacement = await run_in_page_process(1, os.getpid)

    assert replacement != pid and psutil.pid_exists(replacement)


async def test_work_that_kills_its_page_process_every_time_fails_clearly_then_the_pool_recovers():
    with pytest.raises(PageProcessLost, match="died twice"):
        await run_in_page_process(1, os._exit, 3)
    assert await run_in_page_process(1, os.getpid) != os.getpid()


def test_page_processes_exit_when_the_process_they_serve_is_killed(tmp_path):
    script = tmp_path / "killed_server.py"
    script.write_text(
        "import asyncio, os, signal\n"
        "from veriloop.page_processes import run_in_page_process\n"
        "if __name__ == '__main__':\n"
        "    print(asyncio.run(run_in_page_process(1, os.getpid)), flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    server = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60
    )
    assert server.returncode == -signal.SIGKILL, server.stderr
    page_process = int(server.stdout)

    _wait_gone(page_process)  # not left waiting for work that never comes


def test_page_processes_setting():
    assert Context().page_processes == 0  # embedding the graph starts no process unasked
    with pytest.raises(ValueError, match="page_processes"):
        Context(page_processes=-1)
    assert [default_page_processes(n) for n in (None, 1, 2, 16)] == [0, 0, 1, 1]
    assert Settings.from_env({"VERILOOP_PAGE_PROCESSES": "0"}).page_processes == 0
    assert Settings.from_env({"VERILOOP_PAGE_PROCESSES": "3"}).page_processes == 3
    assert Settings.from_env({}).page_processes == default_page_processes(os.cpu_count())


def _wait_gone(pid: int, timeout_s: float = 10.0) -> None:
    """Until ``pid`` has exited: a zombie, or reaped by its parent (the fork server does that at
    any moment, so every look at the process may find it gone)."""
    deadline = time.monotonic() + timeout_s
    try:
        process = psutil.Process(pid)
        while process.status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, f"process {pid} is still running"
            time.sleep(0.02)
    except psutil.NoSuchProcess:
        pass


def test_a_page_process_loads_no_model_client():
    """What every page process imports (the fork server's preload) holds the engines and the
    model boundary's contract, not the SDKs behind it: openai alone is half a page process's memory."""
    from veriloop.page_processes import _PRELOAD

    clients = ("openai", "tavily", "langchain_core", "langgraph")
    code = (
        "import importlib, sys\n"
        f"for name in {_PRELOAD!r}: importlib.import_module(name)\n"
        f"print(','.join(m for m in {clients!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip()
    assert loaded == "", f"a page process imports {loaded}"
