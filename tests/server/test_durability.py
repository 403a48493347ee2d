"""kill -9 of the service in the middle of a request, restart, and the same task continues (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from service_testkit import goal, observation

from veriloop.llm.scripted import Delay
from veriloop.schemas.outputs import SemanticVerdict


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_kill_9_mid_request_then_restart_continues_the_same_task(backend, tmp_path, request):
    # The schema fixture comes before the servers, so it is dropped after they stop.
    database_url = (
        f"sqlite:///{tmp_path / 'tasks.sqlite'}"
        if backend == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    process_servers = request.getfixturevalue("process_servers")
    scripted_model = request.getfixturevalue("scripted_model")
    request.getfixturevalue("playbook")
    server = process_servers(database_url)
    client = server.client()
    task_id = client.interact(observation(6, 0, query=goal(6, 3), sessionId="tab-1")).json()[
        "taskId"
    ]
    assert (
        client.interact(observation(6, 1, taskId=task_id, stepIndex=0, requestId="r1")).json()[
            "stepIndex"
        ]
        == 1
    )

    # The third request is in the middle of its run (the model is answering) when the process dies.
    scripted_model.script(
        "verification",
        Delay(
            60,
            SemanticVerdict(
                action_succeeded=True, task_completed=True, confidence=1, reason="never sent"
            ),
        ),
    )
    in_flight = observation(6, 2, taskId=task_id, stepIndex=1, requestId="r2")
    lost: list[BaseException] = []
    sender = threading.Thread(target=lambda: _expect_lost(server.client(), in_flight, lost))
    sender.start()
    deadline = time.monotonic() + 30
    while scripted_model.calls("verification") < 2:
        assert time.monotonic() < deadline, "the in-flight request never reached the model"
        time.sleep(0.02)
    server.kill9()
    sender.join(timeout=30)
    assert lost and isinstance(lost[0], httpx.TransportError)

    restarted = process_servers(database_url)
    client = restarted.client()
    assert client.get("/api/session/tab-1/task/active").json()["taskId"] == task_id
    retried = client.interact(in_flight)
    assert retried.status_code == 200, retried.text
    assert retried.json()["stepIndex"] == 2 and retried.json()["action"] == "click(6)"
    final = client.interact(observation(6, 3, taskId=task_id, stepIndex=2, requestId="r3")).json()
    assert final["action"] == "finish()" and final["status"] == "completed"

    detail = client.detail(task_id)
    assert [(a["stepIndex"], a["action"], a["beforeState"]["url"]) for a in detail["actions"]] == [
        (i, "finish()" if i == 3 else "click(6)", observation(6, i)["url"]) for i in range(4)
    ]
    assert [v["stepIndex"] for v in detail["verifications"]] == [0, 1, 2]


def _expect_lost(client: httpx.Client, body: dict, lost: list[BaseException]) -> None:
    try:
        client.post("/api/agent/interact", json=body)
    except httpx.TransportError as exc:  # the server died under the request
        lost.append(exc)
