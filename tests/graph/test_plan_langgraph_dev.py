"""`langgraph dev` serves both graphs of langgraph.json; a plan run with a human review pauses
as an interrupt and resumes with a Command through langgraph-sdk (what Studio does)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from devserver import langgraph_dev
from langgraph_sdk import get_sync_client

# Studio passes no Python tools; shell steps come from the user's manifest, so they run.
MANIFEST = {
    "goal": "build, review, ship",
    "steps": [
        {"id": "build", "command": "echo built >> build.txt"},
        {
            "id": "review",
            "type": "human_review",
            "input": "Ship the build?",
            "depends_on": ["build"],
        },
        {"id": "ship", "command": "cp build.txt shipped.txt", "depends_on": ["review"]},
    ],
}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def dev_server(scripted_model, workspace, tmp_path) -> Iterator[str]:
    """`langgraph dev` with steps working in ``workspace`` and the scripted model; stopped afterwards."""
    with langgraph_dev(tmp_path / "langgraph-dev.log", VERILOOP_WORKSPACE=str(workspace)) as url:
        yield url


def _interrupts(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Every interrupt a thread state shows: its own and its tasks' (subgraph interrupts bubble up)."""
    found = list(state.get("interrupts") or [])
    for task in state.get("tasks") or []:
        found.extend(task.get("interrupts") or [])
    return list({i["id"]: i for i in found}.values())


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
    client.runs.wait(thread_id, "plan", input={"run_id": thread_id, "manifest": MANIFEST})
    assert client.threads.get(thread_id)["status"] == "interrupted"
    paused = client.threads.get_state(thread_id)
    [interrupt] = _interrupts(paused)
    assert interrupt["value"]["step_id"] == "review"
    assert "Ship the build?" in interrupt["value"]["question"]
    build = paused["values"]["step_results"]["build"]
    assert build["status"] == "completed", build["attempts"]
    assert "ship" not in paused["values"]["step_results"]
    assert not (workspace / "shipped.txt").exists()

    client.runs.wait(thread_id, "plan", command={"resume": {"approved": True, "comment": "ok"}})
    assert client.threads.get(thread_id)["status"] == "idle"
    final = client.threads.get_state(thread_id)
    assert final["values"]["status"] == "completed" and not _interrupts(final)
    results = final["values"]["step_results"]
    assert {step_id: r["status"] for step_id, r in results.items()} == {
        "build": "completed",
        "review": "completed",
        "ship": "completed",
    }
    assert results["review"]["review"] == {"approved": True, "comment": "ok"}
    # build ran once (not again on resume), ship after the answer.
    assert (workspace / "shipped.txt").read_text() == "built\n"
    assert scripted_model.calls() == 0  # a user's manifest without llm steps needs no model


def test_a_task_step_completes_under_langgraph_devs_blocking_detector(dev_server, workspace):
    """Checks do their file work off the event loop: no BlockingError under langgraph dev."""
    client = get_sync_client(url=dev_server)
    thread_id = client.threads.create()["thread_id"]
    manifest = {"steps": [{"id": "build", "command": "echo built", "requires_testing": False}]}
    state = client.runs.wait(thread_id, "plan", input={"run_id": thread_id, "manifest": manifest})
    assert state["status"] == "completed", state["step_results"]["build"]["attempts"]
