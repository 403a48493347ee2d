"""Hostile input, provider faults, retry-key scope and error shapes, each through HTTP on a real server.

One test (or a few) per defect found by trying the service as an attacker would (issue 13):
lone surrogates, U+FFFE/U+FFFF, chunked bodies past the limit, elements with tens of thousands
of attributes, reused request ids, a provider answering 200 with a non-completion body, LangServe
errors and ``config: null``, unusable model answers in usage, a hung provider, error bodies,
a killed page process.
The PostgreSQL fault test is in test_db_faults.py, the prompt injection suite in test_injection.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
from typing import Any

import httpx
import pytest
from service_testkit import KEYS, goal, observation

from veriloop.llm.scripted import Delay, RawBody
from veriloop.page_processes import run_in_page_process
from veriloop.schemas.outputs import ActionChoice
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR
from veriloop.server.service import TaskService
from veriloop.server.settings import Settings


@pytest.fixture
def api(thread_server, sqlite_settings, playbook):
    """A keyed service on a fresh SQLite file, with the playbook answering for the model."""
    return thread_server(sqlite_settings)


def post_raw(client: httpx.Client, path: str, body: Any) -> httpx.Response:
    """POST ``body`` as ASCII JSON, so lone surrogates travel as ``\\ud800`` escapes (as a browser sends them)."""
    return client.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})


# -- 1. lone surrogates -----------------------------------------------------------------------


@pytest.mark.parametrize("field", ["dom", "query", "url", "sessionId", "requestId"])
def test_lone_surrogates_are_cleaned_at_the_boundary(api, field):
    client = api.client()
    body = observation(5, 0, query=goal(5, 2), sessionId="tab-1", requestId="req-1")
    body[field] = body[field] + "\ud800x\udfff"
    first = post_raw(client, "/api/agent/interact", body)
    assert first.status_code == 200, first.text
    task_id = first.json()["taskId"]
    # Cleaned the same way every time: the retry is recognised and answered from the store.
    assert post_raw(client, "/api/agent/interact", body).json() == first.json()
    detail = client.detail(task_id)
    if field == "query":
        assert "\ufffdx\ufffd" in detail["goal"]
    if field == "sessionId":
        assert detail["sessionId"] == "tab-1\ufffdx\ufffd"
    # The next step goes through too (the surrogate is in the stored state).
    step = post_raw(client, "/api/agent/interact", observation(5, 1, taskId=task_id, stepIndex=0))
    assert step.status_code == 200 and step.json()["stepIndex"] == 1


def test_lone_surrogates_in_ids_and_through_langserve(api):
    client = api.client()
    unknown = post_raw(client, "/api/agent/interact", observation(5, 1, taskId="\ud800"))
    assert unknown.status_code == 404 and "unknown task" in unknown.json()["detail"]
    invoked = post_raw(
        client,
        "/agent/invoke",
        {"input": observation(5, 0, query=goal(5, 1) + "\udbff", requestId="\udc00")},
    )
    assert invoked.status_code == 200, invoked.text
    assert invoked.json()["output"]["action"] == "click(5)"


# -- 2. U+FFFE / U+FFFF -----------------------------------------------------------------------


def noncharacter_page(presses: int) -> str:
    return (
        f"<html><body><p>odd \ufffe text \uffff and &#xFFFE; &#xffff; refs</p>"
        f'<input {ELEMENT_ID_ATTR}="2" value="v\uffff" title="&#xFFFF;">'
        f'<button {ELEMENT_ID_ATTR}="5">Press 5 (pressed {presses})</button></body></html>'
    )


def test_noncharacters_in_page_text_do_not_stop_a_task(api, scripted_model):
    client = api.client()
    first = client.interact(
        {"url": "http://app.test/x", "dom": noncharacter_page(0), "query": goal(5, 1)}
    )
    assert first.status_code == 200, first.text
    second = client.interact(
        {
            "url": "http://app.test/x",
            "dom": noncharacter_page(1),
            "taskId": first.json()["taskId"],
            "clientObservations": {"didDomMutate": True},
        }
    )
    assert second.status_code == 200, second.text
    assert second.json()["status"] == "completed"
    # The page excerpt reached the model, without the characters lxml cannot write.
    action_prompt = [r for r in scripted_model.requests if r.purpose == "action"][-1].text
    assert "odd" in action_prompt and "\uffff" not in action_prompt


# -- 3. chunked bodies ------------------------------------------------------------------------


def test_a_chunked_body_over_the_limit_is_refused_while_it_streams(
    thread_server, tmp_path, playbook
):
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'v.sqlite'}", api_keys=KEYS, max_dom_bytes=50_000
    )
    server = thread_server(settings)
    limit = 4 * settings.max_dom_bytes + 1_000_000

    def chunks():
        # No Content-Length: a 3 MB goal (the DOM's own limit does not cover it) in 64 kB chunks.
        yield json.dumps(observation(5, 0))[:-1].encode() + b', "query": "'
        for _ in range(48):
            yield b"press " * 10_923
        yield b'"}'

    response = server.client().post(
        "/api/agent/interact", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413, response.text
    assert response.json() == {"detail": f"request body is over the limit of {limit} bytes"}
    assert response.request.headers.get("transfer-encoding") == "chunked"


# -- 4. many attributes -----------------------------------------------------------------------


def test_an_element_with_40k_attributes_is_parsed_in_bounded_time(api, scripted_model):
    attributes = " ".join(f'a{i}="x"' for i in range(40_000))
    dom = f'<html><body><button {attributes} {ELEMENT_ID_ATTR}="5">Press 5</button></body></html>'
    # Unbounded, libxml2 needs ~25 s per parse of this page and a step parses it several times.
    response = api.client(timeout=20).interact(
        {"url": "http://app.test/attrs", "dom": dom, "query": goal(5, 1)}
    )
    assert response.status_code == 200, response.text
    assert response.json()["action"] == "click(5)"
    action_prompt = [r for r in scripted_model.requests if r.purpose == "action"][-1].text
    assert f'{ELEMENT_ID_ATTR}="5"' in action_prompt  # the page contract's id survives the cut


# -- 6. retry keys ----------------------------------------------------------------------------


def test_a_reused_request_id_never_answers_a_different_request(api):
    client = api.client()
    body = observation(3, 0, query=goal(3, 2), sessionId="tab-42", requestId="tab-42-1")
    first = client.interact(body).json()
    assert client.interact(body).json() == first  # a retry: the same answer, no second task

    # After a browser restart the tab id and the request counter repeat, for another goal.
    reused = client.interact(
        observation(4, 0, query=goal(4, 2), sessionId="tab-42", requestId="tab-42-1")
    ).json()
    assert reused["taskId"] != first["taskId"] and reused["action"] == "click(4)"
    # The same request id in another session is another request too.
    other_session = client.interact({**body, "sessionId": "tab-7"}).json()
    assert other_session["taskId"] not in {first["taskId"], reused["taskId"]}

    # Within a task: a request id reused for the next observation is not a replay of the last one.
    task_id = first["taskId"]
    step1 = client.interact(observation(3, 1, taskId=task_id, stepIndex=0, requestId="r")).json()
    step2 = client.interact(observation(3, 2, taskId=task_id, stepIndex=1, requestId="r")).json()
    assert (step1["stepIndex"], step2["stepIndex"]) == (1, 2)
    assert step2["status"] == "completed"
    # ...while the exact retry of that observation still gets its stored answer.
    retry = client.interact(observation(3, 2, taskId=task_id, stepIndex=1, requestId="r"))
    assert retry.json() == step2


# -- 7. provider answering 200 with something that is not a chat completion -------------------


@pytest.mark.parametrize(
    "body",
    [
        RawBody("<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
        RawBody("", content_type="application/json"),
        RawBody('{"id": "x", "object": "chat.completion"}'),
        RawBody('{"choices": [{"index": 0}]}'),
    ],
)
def test_a_provider_answering_200_with_a_non_completion_is_a_503(api, scripted_model, body):
    client = api.client()
    task_id = client.interact(observation(6, 0, query=goal(6, 2))).json()["taskId"]
    scripted_model.script("verification", body)
    response = client.interact(observation(6, 1, taskId=task_id, stepIndex=0))
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == "5"
    assert "not a chat completion" in response.json()["detail"]
    assert client.detail(task_id)["stepIndex"] == 0  # unchanged
    again = client.interact(observation(6, 1, taskId=task_id, stepIndex=0))
    assert again.status_code == 200 and again.json()["stepIndex"] == 1


# -- 9. LangServe -----------------------------------------------------------------------------


def test_langserve_streams_answer_errors_as_http_statuses(api):
    client = api.client()
    for endpoint in ("stream", "stream_log", "stream_events"):
        missing = client.post(
            f"/agent/{endpoint}", json={"input": observation(1, 1, taskId="nope")}
        )
        assert missing.status_code == 404, missing.text
        assert missing.json()["detail"] == "unknown task nope"
    invalid = client.post("/agent/stream", json={"input": {"url": "http://a"}})
    assert invalid.status_code == 422 and "input.dom" in invalid.json()["message"]

    # A good request streams its answer (the step ran once, before the stream opened).
    with client.stream(
        "POST", "/agent/stream", json={"input": observation(2, 0, query=goal(2, 2))}
    ) as stream:
        assert stream.status_code == 200
        data = [
            json.loads(line.removeprefix("data: "))
            for line in stream.iter_lines()
            if line.startswith("data: {")
        ]
    answers = [d for d in data if "taskId" in d]
    assert len(answers) == 1 and answers[0]["action"] == "click(2)"
    assert client.detail(answers[0]["taskId"])["stepIndex"] == 0


@pytest.mark.parametrize("endpoint", ["invoke", "stream", "batch"])
def test_langserve_config_null_is_a_422(api, endpoint):
    body: dict[str, Any] = {"config": None}
    if endpoint == "batch":
        body["inputs"] = [observation(1, 0, query=goal(1, 1))]
    else:
        body["input"] = observation(1, 0, query=goal(1, 1))
    response = api.client().post(f"/agent/{endpoint}", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["message"] == "body.config: config must be an object"


@pytest.mark.parametrize("endpoint", ["/api/agent/interact", "/agent/stream_events"])
def test_a_step_index_past_64_bits_is_a_422(api, endpoint):
    # Found by the fuzz run: LangServe's event stream echoes the input, and its JSON encoder
    # cannot write an integer past 64 bits (the stream broke off mid-answer).
    request = {**observation(1, 0, query=goal(1, 1)), "stepIndex": 2**64}
    body = request if endpoint.startswith("/api") else {"input": request}
    response = api.client().post(endpoint, json=body)
    assert response.status_code == 422, response.text
    assert "stepIndex" in response.text


@pytest.mark.parametrize("endpoint", ["/agent/invoke", "/agent/stream_log", "/agent/stream_events"])
def test_a_body_that_is_not_utf8_is_a_400_on_langserve(api, endpoint):
    # Found by the fuzz run: LangServe itself failed on such a body with a 500.
    response = api.client().post(
        endpoint, content=b'{"input": "\x8a"}', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert "detail" in response.json()


# -- 10. usage of unusable answers, and the step deadline --------------------------------------


def test_unusable_model_answers_count_in_usage_and_cost(api, scripted_model):
    client = api.client()
    task_id = client.interact(observation(7, 0, query=goal(7, 3))).json()["taskId"]
    scripted_model.script("verification", "not json at all")
    step = client.interact(observation(7, 1, taskId=task_id, stepIndex=0)).json()
    assert step["verification"]["success"] is False
    detail = client.detail(task_id)
    assert detail["totalUsage"]["calls"] == scripted_model.calls()
    assert detail["usage"]["verification"]["calls"] == 1
    assert detail["usage"]["verification"]["inputTokens"] > 0


def test_a_hung_provider_is_a_503_at_the_step_deadline(
    thread_server, sqlite_settings, playbook, scripted_model
):
    server = thread_server(
        Settings(database_url=sqlite_settings.database_url, api_keys=KEYS, step_deadline_s=1.0)
    )
    client = server.client(timeout=30)
    task_id = client.interact(observation(8, 0, query=goal(8, 2))).json()["taskId"]
    # The provider accepts the call and never answers in time (the client's own timeout is 60 s).
    scripted_model.script("verification", Delay(120, ActionChoice(thought="t", action="wait(1)")))
    response = client.interact(observation(8, 1, taskId=task_id, stepIndex=0))
    assert response.status_code == 503, response.text
    assert "longer than 1 s" in response.json()["detail"] and response.headers["Retry-After"]
    assert client.detail(task_id)["stepIndex"] == 0  # unchanged
    again = client.interact(observation(8, 1, taskId=task_id, stepIndex=0))
    assert again.status_code == 200 and again.json()["stepIndex"] == 1


# -- 11. error bodies -------------------------------------------------------------------------


def test_every_error_body_is_json_with_a_detail(api, monkeypatch):
    client = api.client()
    headers = {"Content-Type": "application/json"}
    deep = client.post("/api/agent/interact", content="[" * 50_000 + "]" * 50_000, headers=headers)
    not_utf8 = client.post("/api/agent/interact", content=b'{"url": "\xff\xfe"}', headers=headers)
    for response in (deep, not_utf8):
        assert response.status_code == 400 and isinstance(response.json()["detail"], str)
    assert client.get("/api/nowhere").json() == {"detail": "Not Found"}
    assert client.put("/api/agent/interact").status_code == 405

    async def broken(*args: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(TaskService, "active_task", broken)
    crash = client.get("/api/session/s/task/active")
    assert crash.status_code == 500
    assert crash.json() == {
        "detail": "internal error (RuntimeError); the server log has the details"
    }


# -- 11. a page process dies ------------------------------------------------------------------


def test_a_killed_page_process_costs_no_step(thread_server, sqlite_settings, playbook):
    client = thread_server(dataclasses.replace(sqlite_settings, page_processes=1)).client()
    first = client.interact(observation(4, 0, query=goal(4, 2)))
    assert first.status_code == 200, first.text
    # The service's pool is this process's pool of one page process: ask it who it is.
    page_process = asyncio.run(run_in_page_process(1, os.getpid))
    os.kill(page_process, signal.SIGKILL)

    second = client.interact(observation(4, 1, taskId=first.json()["taskId"]))

    assert second.status_code == 200, second.text
    assert second.json()["stepIndex"] == 1 and second.json()["verification"]["success"]
    assert asyncio.run(run_in_page_process(1, os.getpid)) != page_process
