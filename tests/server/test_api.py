"""The interact API over real HTTP (uvicorn on loopback, SQLite file, scripted model): a whole task,
recovery, tenants, every bad-input class with the task's state checked before and after."""

from __future__ import annotations

import dataclasses

import pytest
from service_testkit import KEYS, drive, goal, observation, read_head

from veriloop.llm.scripted import Fail
from veriloop.schemas.outputs import SemanticVerdict
from veriloop.server.index import TaskIndex
from veriloop.server.settings import Settings
from veriloop.server.tenants import LOCAL_TENANT


@pytest.fixture
def api(thread_server, sqlite_settings, playbook):
    """A keyed service on a fresh SQLite file, with the playbook answering for the model."""
    return thread_server(sqlite_settings)


def test_a_task_runs_to_finish_with_one_verification_per_action(api, scripted_model):
    client = api.client()
    task_id, answers = drive(client, button=7, presses=3, sessionId="tab-1")

    assert [a["action"] for a in answers] == ["click(7)", "click(7)", "click(7)", "finish()"]
    assert [a["stepIndex"] for a in answers] == [0, 1, 2, 3]
    # Each action's element named from the page it was chosen on, by that step's own parse.
    assert [a.get("target") for a in answers] == [f"Press 7 (pressed {i})" for i in range(3)] + [
        None
    ]
    assert [a["status"] for a in answers] == ["executing"] * 3 + ["completed"]
    assert {a["taskId"] for a in answers} == {task_id}
    assert "verification" not in answers[0]  # nothing to verify on a new task
    verdicts = [a["verification"] for a in answers[1:]]
    assert [v["goalAchieved"] for v in verdicts] == [False, False, True]
    assert all(v["success"] and v["confidence"] == 0.95 for v in verdicts)

    detail = client.detail(task_id)
    assert (
        detail["status"] == "completed"
        and detail["stepIndex"] == 3
        and detail["sessionId"] == "tab-1"
    )
    # Each action carries the page it was chosen on: the observation sent with that request.
    assert [(a["stepIndex"], a["action"], a["beforeState"]["url"]) for a in detail["actions"]] == [
        (i, "finish()" if i == 3 else "click(7)", observation(7, i)["url"]) for i in range(4)
    ]
    # ...and what it was expected to do (the plan step's expected outcome; finish() expects nothing).
    assert [a.get("expectedOutcome") for a in detail["actions"]] == ["counter +1"] * 3 + [None]
    assert [v["stepIndex"] for v in detail["verifications"]] == [0, 1, 2]
    assert detail["plan"]["steps"], "the plan is part of the task detail"
    assert detail["totalUsage"]["calls"] == scripted_model.calls() > 0
    # Three verdicts and the finish audit, all verification cost.
    assert detail["usage"]["verification"]["calls"] == 3 + scripted_model.calls("audit") == 4


def test_recovery_endpoint_finds_the_sessions_active_task(api):
    client = api.client()
    first = client.interact(observation(3, 0, query=goal(3, 2), sessionId="tab-9")).json()
    older = client.interact(observation(4, 0, query=goal(4, 2), sessionId="tab-9")).json()
    # Advancing the first task makes it the most recently updated one.
    client.interact(observation(3, 1, taskId=first["taskId"]))

    found = client.get("/api/session/tab-9/task/active", params={"url": "http://app.test/anything"})
    assert found.status_code == 200
    assert found.json()["taskId"] == first["taskId"] and found.json()["stepIndex"] == 1
    assert client.get("/api/session/tab-9/task/active").json()["taskId"] == first["taskId"]
    # Another origin, another session, another tenant: nothing to resume.
    assert (
        client.get(
            "/api/session/tab-9/task/active", params={"url": "https://elsewhere.test/"}
        ).status_code
        == 404
    )
    assert client.get("/api/session/tab-0/task/active").status_code == 404
    assert api.client("key-b").get("/api/session/tab-9/task/active").status_code == 404

    client.interact(observation(3, 2, taskId=first["taskId"]))  # second verdict: done -> finish()
    assert client.get("/api/session/tab-9/task/active").json()["taskId"] == older["taskId"]


def test_tenants_cannot_read_or_advance_each_others_tasks(api, sqlite_settings):
    mine = api.client("key-a")
    answer = mine.interact(observation(5, 0, query=goal(5, 3))).json()
    task_id = answer["taskId"]
    before = read_head(sqlite_settings.database_url, task_id)

    theirs = api.client("key-b")
    assert theirs.get(f"/api/tasks/{task_id}").status_code == 404
    advanced = theirs.interact(observation(5, 1, taskId=task_id))
    assert advanced.status_code == 404 and task_id in advanced.json()["detail"]
    assert read_head(sqlite_settings.database_url, task_id) == before

    for client in (api.client(None), api.client("not-a-key")):
        response = client.interact(observation(5, 1, taskId=task_id))
        assert response.status_code == 401
        assert "API key" in response.json()["detail"]
        assert client.get(f"/api/tasks/{task_id}").status_code == 401
    bearer = api.client(None)
    bearer.headers["Authorization"] = f"Bearer {next(iter(KEYS))}"
    assert bearer.get(f"/api/tasks/{task_id}").status_code == 200
    assert read_head(sqlite_settings.database_url, task_id) == before


def test_tenants_may_reuse_each_others_session_and_request_ids(api):
    """Ids a client chooses are per tenant: the same body with the same sessionId and requestId
    from another tenant starts that tenant's own task, and neither sees the other's."""
    mine, theirs = api.client("key-a"), api.client("key-b")
    body = observation(3, 0, query=goal(3, 2), sessionId="tab-1", requestId="r-1")
    first = mine.interact(body).json()
    second = theirs.interact(body).json()
    assert second["taskId"] != first["taskId"] and second["stepIndex"] == 0
    assert theirs.interact(body).json() == second  # its own retry: its own stored answer
    found = {
        name: client.get("/api/session/tab-1/task/active").json()["taskId"]
        for name, client in (("mine", mine), ("theirs", theirs))
    }
    assert found == {"mine": first["taskId"], "theirs": second["taskId"]}
    advanced = theirs.interact(observation(3, 1, taskId=second["taskId"], requestId="r-1"))
    assert advanced.json()["stepIndex"] == 1
    assert mine.detail(first["taskId"])["stepIndex"] == 0
    assert theirs.get(f"/api/tasks/{first['taskId']}").status_code == 404


def test_no_keys_means_one_local_tenant_announced_loudly(thread_server, tmp_path, playbook, caplog):
    server = thread_server(Settings(database_url=f"sqlite:///{tmp_path / 'open.sqlite'}"))
    assert any(
        "NO API KEYS CONFIGURED" in r.getMessage() and LOCAL_TENANT in r.getMessage()
        for r in caplog.records
    )
    answer = server.client(None).interact(observation(2, 0, query=goal(2, 1)))
    assert answer.status_code == 200
    assert server.client("any-key").detail(answer.json()["taskId"])["status"] == "executing"


# -- bad input: status, message, and the task exactly as it was ----------------------------------------


@pytest.fixture
def small(thread_server, sqlite_settings, playbook):
    """A service with a 20 kB DOM limit, plus one running task (one step answered)."""
    server = thread_server(dataclasses.replace(sqlite_settings, max_dom_bytes=20_000))
    client = server.client()
    task_id = client.interact(observation(9, 0, query=goal(9, 5))).json()["taskId"]
    return server, client, task_id


BAD_BODIES = {
    "missing dom": ({"url": "http://app.test/"}, 422, "dom"),
    "url not a string": ({"url": 12, "dom": "<p/>"}, 422, "url"),
    "clientObservations wrong type": (
        {"url": "u", "dom": "<p/>", "clientObservations": {"didDomMutate": "often"}},
        422,
        "didDomMutate",
    ),
    "negative stepIndex": ({"url": "u", "dom": "<p/>", "stepIndex": -1}, 422, "stepIndex"),
    "dom over the limit": ({"url": "u", "dom": "x" * 20_001}, 413, "20000 bytes"),
    # 10,001 characters, 20,002 bytes of UTF-8: the limit counts bytes
    "multi-byte dom over the limit": ({"url": "u", "dom": "é" * 10_001}, 413, "20002 bytes"),
    "unknown task": ({"url": "u", "dom": "<p/>", "taskId": "no-such-task"}, 404, "no-such-task"),
    "stale stepIndex": ({"url": "u", "dom": "<p/>", "stepIndex": 7}, 409, "stale"),
}


@pytest.mark.parametrize("case", BAD_BODIES, ids=list(BAD_BODIES))
def test_bad_input_gets_a_clear_error_and_changes_nothing(small, sqlite_settings, case):
    server, client, task_id = small
    body, status, words = BAD_BODIES[case]
    if case != "unknown task":
        body = {**body, "taskId": task_id}
    before = read_head(sqlite_settings.database_url, task_id)
    response = client.interact(body)
    assert response.status_code == status, response.text
    payload = response.json()
    message = payload["message"] if status == 422 else payload["detail"]
    assert words in message
    assert read_head(sqlite_settings.database_url, task_id) == before
    # The task still advances normally afterwards.
    assert client.interact(observation(9, 1, taskId=task_id)).json()["stepIndex"] == 1


def test_a_new_task_needs_a_goal(small):
    _, client, _ = small
    for query in (None, "", "   "):
        response = client.interact(observation(9, 0, query=query))
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == ["body", "query"]
        assert "goal" in response.json()["message"]


def test_a_body_far_over_the_limit_is_refused_before_parsing(small):
    _, client, task_id = small
    response = client.post(
        "/api/agent/interact",
        content=b'{"url": "u", "dom": "' + b"x" * 200_000 + b'"}',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 413 and "limit" in response.json()["detail"]


@pytest.mark.parametrize("final", ["completed", "failed"])
def test_a_finished_task_answers_409_with_its_status(small, sqlite_settings, scripted_model, final):
    server, client, task_id = small
    if final == "failed":
        impossible = SemanticVerdict(
            action_succeeded=False,
            task_completed=False,
            confidence=0.9,
            reason="gone",
            impossible=True,
        )
        scripted_model.script("verification", impossible)
        last = client.interact(observation(9, 1, taskId=task_id)).json()
    else:
        last = drive(client, button=9, presses=1)[1][-1]
        task_id = last["taskId"]
    assert last["status"] == final
    before = read_head(sqlite_settings.database_url, task_id)

    response = client.interact(observation(9, 2, taskId=task_id))
    assert response.status_code == 409
    assert response.json()["status"] == final and final in response.json()["detail"]
    assert read_head(sqlite_settings.database_url, task_id) == before


def test_provider_down_answers_503_and_the_same_request_then_makes_exactly_one_step(
    small, sqlite_settings, scripted_model, monkeypatch
):
    server, client, task_id = small
    monkeypatch.setenv("VERILOOP_LLM_MAX_RETRIES", "0")
    before = read_head(sqlite_settings.database_url, task_id)
    # Verification succeeds, then the provider fails in the middle of the run (planning is cached, refinement fails).
    scripted_model.script("refinement", Fail(503, "overloaded"))
    request = observation(9, 1, taskId=task_id, stepIndex=0)

    down = client.interact(request)
    assert down.status_code == 503
    assert int(down.headers["Retry-After"]) > 0
    assert (
        "unchanged" in down.json()["detail"]
        and "send the same request again" in down.json()["detail"]
    )
    assert read_head(sqlite_settings.database_url, task_id) == before
    assert client.detail(task_id)["stepIndex"] == 0

    again = client.interact(request)
    assert again.status_code == 200, again.text
    assert again.json()["stepIndex"] == 1 and again.json()["verification"]["success"]
    after = read_head(sqlite_settings.database_url, task_id)
    assert len(after["action_history"]) == len(before["action_history"]) + 1
    assert [v["step_index"] for v in after["verification_history"]] == [0]
    assert not before.get("verification_history")


def test_a_step_saved_but_not_recorded_is_answered_once_by_the_resend(
    small, sqlite_settings, monkeypatch, scripted_model
):
    """The graph has saved the step's checkpoint (the commit) when the index write fails, as if
    the process were killed right then: the resend gets that step's answer, never a second step."""
    server, client, task_id = small
    real_record = TaskIndex.record

    async def failing_record(self, *args):
        monkeypatch.setattr(TaskIndex, "record", real_record)  # only the first write fails
        raise OSError("disk full")

    monkeypatch.setattr(TaskIndex, "record", failing_record)
    request = observation(9, 1, taskId=task_id, requestId="commit-1")

    failed = client.interact(request)
    assert failed.status_code == 500 and "send the same request again" in failed.json()["detail"]
    assert client.detail(task_id)["stepIndex"] == 0
    verdicts = scripted_model.calls("verification")

    again = client.interact(request)
    assert again.status_code == 200 and again.json()["stepIndex"] == 1
    assert scripted_model.calls("verification") == verdicts, "the saved step, not a second run"
    after = read_head(sqlite_settings.database_url, task_id)
    assert [a["step_index"] for a in after["action_history"]] == [0, 1]
    assert [v["step_index"] for v in after["verification_history"]] == [0]


def test_control_characters_in_page_and_goal_are_handled(api):
    """Found by the OpenAPI fuzzing: C0 control characters are valid JSON strings and must not break a step."""
    client = api.client()
    body = observation(7, 0, query="Press button 7 \x1c\x00 now")
    body["dom"] = body["dom"].replace("Counter", "Count\x00er\x18")
    response = client.interact(body)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "executing"
