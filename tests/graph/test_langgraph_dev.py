"""`langgraph dev` serves langgraph.json's graph; one task step runs through langgraph-sdk."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client

REPO = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).parent / "langgraph"
STARTUP_S = 120


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def dev_server(jas, tmp_path):
    """`langgraph dev` on a free port, talking to the scripted model server; stopped afterwards."""
    port = _free_port()
    env = {
        **os.environ,  # OPENAI_BASE_URL / OPENAI_API_KEY point at the scripted server (fixture)
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    }
    log = (tmp_path / "langgraph-dev.log").open("w")
    process = subprocess.Popen(
        [str(LANGGRAPH), "dev", "--config", str(REPO / "langgraph.json"), "--host", "127.0.0.1",
         "--port", str(port), "--no-browser", "--no-reload"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"langgraph dev exited with {process.returncode}:\n{_tail(tmp_path)}")
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"langgraph dev not ready after {STARTUP_S}s:\n{_tail(tmp_path)}")
            time.sleep(0.5)
        yield url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        log.close()


def _tail(tmp_path: Path) -> str:
    return (tmp_path / "langgraph-dev.log").read_text(errors="replace")[-3000:]


def test_langgraph_dev_runs_one_task_step(dev_server, jas, page):
    client = get_sync_client(url=dev_server)
    assistants = client.assistants.search(graph_id="veriloop")
    assert assistants, "langgraph.json's graph 'veriloop' is not served"
    schemas = client.assistants.get_schemas(assistants[0]["assistant_id"])
    assert {"goal", "url", "dom"} <= set(schemas["input_schema"]["properties"])
    assert "max_steps_per_task" in schemas["context_schema"]["properties"]

    thread = client.threads.create()
    state = client.runs.wait(
        thread["thread_id"],
        "veriloop",
        input={
            "task_id": thread["thread_id"],
            "goal": "Add a patient named Jas",
            "url": "http://clinic.test/patients",
            "dom": page("patients"),
        },
        context={"max_steps_per_task": 10},
    )
    assert state["status"] == "executing"
    assert [a["action"] for a in state["action_history"]] == ["click(4)"]
    assert state["action_history"][0]["before_state"]["url"] == "http://clinic.test/patients"
    assert (jas.calls("planning"), jas.calls("refinement"), jas.calls("action")) == (1, 1, 1)
