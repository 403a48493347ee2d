"""`langgraph dev` serves both graphs of langgraph.json; a plan run with a human review pauses
as an interrupt and resumes with a Command through langgraph-sdk (what Studio does)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

REPO = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).parent / "langgraph"
STARTUP_S = 120

TOOLS_DIR = REPO / "tests" / "server"  # plan_tools.py: the test callables


def manifest(markers: Path) -> dict[str, Any]:
    """build -> review (a person) -> ship, as python steps of plan_tools.py's ``mark_sync``."""

    def step(name: str, **fields: Any) -> dict[str, Any]:
        spec = {"name": name, "markers": str(markers)}
        # requires_testing false: test discovery walks the workspace on the event loop, which
        # langgraph dev refuses (BlockingError; see the report on engines/plan/checks.py).
        return {
            "id": name,
            "function": "mark_sync",
            "input": spec,
            "requires_testing": False,
            **fields,
        }

    return {
        "goal": "build, review, ship",
        "steps": [
            step("build"),
            {
                "id": "review",
                "type": "human_review",
                "input": "Ship the build?",
                "depends_on": ["build"],
            },
            step("ship", depends_on=["review"]),
        ],
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def dev_server(scripted_model, workspace, tmp_path) -> Iterator[str]:
    """`langgraph dev` on a free port; the model endpoint is the scripted server (no network)."""
    port = _free_port()
    env = {
        **os.environ,  # OPENAI_BASE_URL / OPENAI_API_KEY point at the scripted server (fixture)
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "VERILOOP_WORKSPACE": str(workspace),
        # Studio passes no Python objects: the dev server imports the tools by path.
        "VERILOOP_TOOLS": "plan_tools:TOOLS",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TOOLS_DIR), os.environ.get("PYTHONPATH")])),
    }
    log_path = tmp_path / "langgraph-dev.log"
    log = log_path.open("w")
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
                pytest.fail(f"langgraph dev exited with {process.returncode}:\n{_tail(log_path)}")
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"langgraph dev not ready after {STARTUP_S}s:\n{_tail(log_path)}")
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


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:]


def _interrupts(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Every interrupt a thread state shows: its own and its tasks' (subgraph interrupts bubble up)."""
    found = list(state.get("interrupts") or [])
    for task in state.get("tasks") or []:
        found.extend(task.get("interrupts") or [])
    return found


def test_the_plan_graph_pauses_for_review_and_resumes_through_the_sdk(
    dev_server, scripted_model, workspace
):
    client = get_sync_client(url=dev_server)
    assert client.assistants.search(graph_id="veriloop"), "graph 'veriloop' is not served"
    plans = client.assistants.search(graph_id="plan")
    assert plans, "langgraph.json's graph 'plan' is not served"
    schemas = client.assistants.get_schemas(plans[0]["assistant_id"])
    assert {"manifest", "goal", "run_id"} <= set(schemas["input_schema"]["properties"])
    assert {"workspace", "tools", "max_replans_per_run"} <= set(
        schemas["context_schema"]["properties"]
    )

    thread_id = client.threads.create()["thread_id"]
    markers = workspace / "markers.txt"
    client.runs.wait(thread_id, "plan", input={"run_id": thread_id, "manifest": manifest(markers)})
    assert client.threads.get(thread_id)["status"] == "interrupted"
    paused = client.threads.get_state(thread_id)
    [interrupt] = {i["id"]: i for i in _interrupts(paused)}.values()
    assert interrupt["value"]["step_id"] == "review"
    assert "Ship the build?" in interrupt["value"]["question"]
    assert paused["values"]["step_results"]["build"]["status"] == "completed", paused["values"]["step_results"]["build"]
    assert "ship" not in paused["values"]["step_results"]
    assert markers.read_text().splitlines() == ["build"]

    client.runs.wait(thread_id, "plan", command={"resume": {"approved": True, "comment": "ok"}})
    final = client.threads.get_state(thread_id)
    assert client.threads.get(thread_id)["status"] == "idle"
    assert final["values"]["status"] == "completed" and not _interrupts(final)
    results = final["values"]["step_results"]
    assert {step_id: r["status"] for step_id, r in results.items()} == {
        "build": "completed",
        "review": "completed",
        "ship": "completed",
    }
    assert results["review"]["review"] == {"approved": True, "comment": "ok"}
    assert results["ship"]["output"] == {"value": "ship", "depends": ["review"]}
    assert markers.read_text().splitlines() == ["build", "ship"]  # build did not run again
    assert scripted_model.calls() == 0  # a user's manifest with no llm steps needs no model
