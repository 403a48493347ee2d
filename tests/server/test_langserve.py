"""LangServe at /agent: RemoteRunnable drives a task through the same service, keys and tenants included."""

from __future__ import annotations

import httpx
import pytest
from langserve import RemoteRunnable
from service_testkit import goal, observation

from veriloop.server.settings import Settings


@pytest.fixture
def api(thread_server, sqlite_settings, playbook):
    return thread_server(sqlite_settings)


def test_remote_runnable_drives_a_task_to_finish(api):
    agent = RemoteRunnable(f"{api.url}/agent", headers={"X-API-Key": "key-a"})
    answers = [agent.invoke(observation(8, 0, query=goal(8, 2)))]
    task_id = answers[0]["taskId"]
    while answers[-1]["status"] == "executing":
        presses = len(answers)
        # A thread id in the config is not how a task is named: the input's taskId is.
        config = {"configurable": {"thread_id": "somebody-else"}}
        answers.append(
            agent.invoke(
                observation(8, presses, taskId=task_id, stepIndex=answers[-1]["stepIndex"]), config
            )
        )

    assert [a["action"] for a in answers] == ["click(8)", "click(8)", "finish()"]
    assert [a["taskId"] for a in answers] == [task_id] * 3
    assert (
        answers[-1]["status"] == "completed" and answers[-1]["verification"]["goalAchieved"] is True
    )
    # The HTTP API sees the same task, step for step.
    detail = api.client("key-a").detail(task_id)
    assert [a["action"] for a in detail["actions"]] == ["click(8)", "click(8)", "finish()"]


def test_langserve_routes_apply_keys_tenants_and_errors(api):
    mine = RemoteRunnable(f"{api.url}/agent", headers={"X-API-Key": "key-a"})
    task_id = mine.invoke(observation(8, 0, query=goal(8, 3)))["taskId"]

    theirs = RemoteRunnable(f"{api.url}/agent", headers={"X-API-Key": "key-b"})
    with pytest.raises(httpx.HTTPStatusError) as other_tenant:
        theirs.invoke(observation(8, 1, taskId=task_id))
    assert other_tenant.value.response.status_code == 404

    with pytest.raises(httpx.HTTPStatusError) as anonymous:
        RemoteRunnable(f"{api.url}/agent").invoke(observation(8, 1, taskId=task_id))
    assert anonymous.value.response.status_code == 401
    assert api.client("key-a").detail(task_id)["stepIndex"] == 0


def test_playground_loads(thread_server, tmp_path, playbook):
    server = thread_server(Settings(database_url=f"sqlite:///{tmp_path / 'open.sqlite'}"))
    page = httpx.get(f"{server.url}/agent/playground/", follow_redirects=True)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    schema = httpx.get(f"{server.url}/agent/input_schema").json()
    assert {"url", "dom", "taskId", "requestId"} <= set(schema["properties"])


def test_langserve_takes_per_purpose_models_from_the_environment(
    thread_server, sqlite_settings, playbook, scripted_model, monkeypatch
):
    # LangServe passes no context: the service's Context() reads VERILOOP_* on every request.
    monkeypatch.setenv(
        "VERILOOP_PURPOSES",
        '{"action": {"model": "local-actor"}, "verification": {"model": "o4-mini"}}',
    )
    api = thread_server(sqlite_settings)
    agent = RemoteRunnable(f"{api.url}/agent", headers={"X-API-Key": "key-a"})
    first = agent.invoke(observation(8, 0, query=goal(8, 2)))
    agent.invoke(observation(8, 1, taskId=first["taskId"], stepIndex=first["stepIndex"]))
    carried = {
        (r.purpose, r.body["model"], r.body.get("reasoning_effort"))
        for r in scripted_model.requests
    }
    assert ("action", "local-actor", None) in carried
    assert ("verification", "o4-mini", "high") in carried
    assert {
        model for purpose, model, _ in carried if purpose not in ("action", "verification")
    } == {"gpt-4.1-mini"}
