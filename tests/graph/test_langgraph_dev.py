"""`langgraph dev` serves langgraph.json's graph; one task step runs through langgraph-sdk."""

from __future__ import annotations

import pytest
from devserver import langgraph_dev
from langgraph_sdk import get_sync_client


@pytest.fixture
def dev_server(jas, tmp_path):
    """`langgraph dev` talking to the scripted model server; stopped afterwards."""
    with langgraph_dev(tmp_path / "langgraph-dev.log") as url:
        yield url


def _first_step(client, page, *, context: dict) -> dict:
    """The first step of "Add a patient named Jas" on a new thread, run with ``context``."""
    thread = client.threads.create()
    return client.runs.wait(
        thread["thread_id"],
        "veriloop",
        input={
            "task_id": thread["thread_id"],
            "goal": "Add a patient named Jas",
            "url": "http://clinic.test/patients",
            "dom": page("patients"),
        },
        context=context,
    )


def test_langgraph_dev_runs_one_task_step(dev_server, jas, page):
    client = get_sync_client(url=dev_server)
    assistants = client.assistants.search(graph_id="veriloop")
    assert assistants, "langgraph.json's graph 'veriloop' is not served"
    schemas = client.assistants.get_schemas(assistants[0]["assistant_id"])
    assert {"goal", "url", "dom"} <= set(schemas["input_schema"]["properties"])
    assert "max_steps_per_task" in schemas["context_schema"]["properties"]

    state = _first_step(client, page, context={"max_steps_per_task": 10})
    assert state["status"] == "executing"
    assert [a["action"] for a in state["action_history"]] == ["click(4)"]
    assert state["action_history"][0]["before_state"]["url"] == "http://clinic.test/patients"
    assert (jas.calls("planning"), jas.calls("refinement"), jas.calls("action")) == (1, 1, 1)


def test_studio_configures_models_per_purpose(dev_server, jas, page):
    client = get_sync_client(url=dev_server)
    (assistant,) = client.assistants.search(graph_id="veriloop")
    schema = client.assistants.get_schemas(assistant["assistant_id"])["context_schema"]
    purposes = schema["properties"]["purposes"]
    assert "verification" in purposes["propertyNames"]["enum"]
    settings = schema["$defs"][purposes["additionalProperties"]["$ref"].rsplit("/", 1)[-1]]
    assert set(settings["properties"]) == {"model", "reasoning_effort", "max_tokens", "grounding"}
    assert "high" in settings["properties"]["reasoning_effort"]["enum"]

    purposes = {
        "planning": {"model": "o3", "reasoning_effort": "low"},
        "action": {"model": "local-actor", "max_tokens": 200},
    }
    _first_step(client, page, context={"purposes": purposes})
    carried = [(r.purpose, r.body["model"], r.body.get("reasoning_effort")) for r in jas.requests]
    assert carried == [
        ("planning", "o3", "low"),
        ("refinement", "gpt-4.1-mini", None),
        ("action", "local-actor", None),
    ]
    assert jas.requests[2].body["max_completion_tokens"] == 200
