"""The scripted OpenAI-compatible server itself, spoken to over raw HTTP (httpx) like any client would."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from veriloop.llm.scripted import ANY_PURPOSE, Delay, Fail, ScriptedModelServer
from veriloop.schemas import ActionChoice


def chat(
    server: ScriptedModelServer, purpose: str | None = None, schema_name: str | None = None, **extra
):
    headers = {"X-Veriloop-Purpose": purpose} if purpose else {}
    body = {"model": "m", "messages": [{"role": "user", "content": "12345678"}], **extra}
    if schema_name:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": {}},
        }
    return httpx.post(f"{server.base_url}/chat/completions", json=body, headers=headers, timeout=5)


def content(response: httpx.Response) -> str:
    return response.json()["choices"][0]["message"]["content"]


@pytest.fixture
def server():
    with ScriptedModelServer() as running:
        yield running


def test_base_url_and_models_listing(server: ScriptedModelServer) -> None:
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert httpx.get(f"{server.base_url}/models").json()["data"][0]["id"] == "scripted"
    assert httpx.post(f"{server.base_url}/embeddings", json={}).status_code == 404


def test_queue_is_fifo_then_the_handler_answers(server: ScriptedModelServer) -> None:
    server.script("action", {"n": 1}, ActionChoice(thought="t", action="click(1)"), "raw garbage")
    server.on("action", lambda req: {"from": "handler", "said": req.messages[0]["content"]})
    answers = [content(chat(server, "action")) for _ in range(4)]
    assert answers == [
        '{"n": 1}',
        '{"thought":"t","action":"click(1)"}',
        "raw garbage",
        '{"from": "handler", "said": "12345678"}',
    ]
    assert server.pending() == 0


def test_purpose_falls_back_to_the_schema_name(server: ScriptedModelServer) -> None:
    server.script("SemanticVerdict", {"ok": True})
    assert content(chat(server, schema_name="SemanticVerdict")) == '{"ok": true}'
    assert server.requests[0].purpose == "SemanticVerdict"
    assert server.requests[0].schema_name == "SemanticVerdict"


def test_catch_all_handler_serves_purposes_without_a_script(server: ScriptedModelServer) -> None:
    server.script("planning", {"p": 1})
    server.on(ANY_PURPOSE, lambda req: {"purpose": req.purpose})
    assert content(chat(server, "planning")) == '{"p": 1}'
    assert content(chat(server, "critic")) == '{"purpose": "critic"}'


def test_usage_is_deterministic(server: ScriptedModelServer) -> None:
    server.script("action", "abcdefghi")  # 9 characters -> 3 tokens; prompt "12345678" -> 2 tokens
    usage = chat(server, "action").json()["usage"]
    assert usage == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}


def test_nothing_scripted_is_a_400_and_recorded(server: ScriptedModelServer) -> None:
    server.script("planning", {"p": 1})
    response = chat(server, "verification")
    assert response.status_code == 400
    assert "no scripted answer for purpose 'verification'" in response.json()["error"]["message"]
    assert [r.purpose for r in server.unscripted] == ["verification"]
    assert server.pending("planning") == 1


def test_fail_sends_status_message_and_retry_hint(server: ScriptedModelServer) -> None:
    server.script("action", Fail(503, "overloaded", retry_after_s=0.25), Fail(429))
    first, second = chat(server, "action"), chat(server, "action")
    assert first.status_code == 503
    assert first.json()["error"]["message"] == "overloaded"
    assert first.headers["retry-after-ms"] == "250"
    assert second.status_code == 429
    assert "retry-after-ms" not in second.headers


def test_delay_wraps_any_answer(server: ScriptedModelServer) -> None:
    server.script("action", Delay(0.01, Delay(0.01, Fail(500))), Delay(0.01, {"late": True}))
    assert chat(server, "action").status_code == 500
    assert content(chat(server, "action")) == '{"late": true}'


def test_broken_handler_or_answer_is_a_clear_400(server: ScriptedModelServer) -> None:
    server.on("action", lambda req: 1 / 0)
    server.script("planning", object())
    action, planning = chat(server, "action"), chat(server, "planning")
    assert action.status_code == planning.status_code == 400
    assert "ZeroDivisionError" in action.json()["error"]["message"]
    assert "cannot send a scripted answer of type object" in planning.json()["error"]["message"]
    assert [type(e) for e in server.errors] == [ZeroDivisionError, TypeError]


def test_reject_json_schema_only_rejects_json_schema(server: ScriptedModelServer) -> None:
    server.reject_json_schema = True
    server.on("action", lambda req: {"ok": 1})
    rejected = chat(server, "action", schema_name="ActionChoice")
    assert rejected.status_code == 400
    assert rejected.json()["error"]["param"] == "response_format"
    assert chat(server, "action", response_format={"type": "json_object"}).status_code == 200
    assert [r.response_format_type for r in server.requests] == ["json_schema", "json_object"]


def test_malformed_body_is_a_400(server: ScriptedModelServer) -> None:
    response = httpx.post(f"{server.base_url}/chat/completions", content=b"{not json", timeout=5)
    assert response.status_code == 400
    assert "malformed" in response.json()["error"]["message"]
    assert server.calls() == 0


def test_calls_requests_and_reset(server: ScriptedModelServer) -> None:
    server.on(ANY_PURPOSE, lambda req: {})
    for purpose in ("planning", "action", "action"):
        chat(server, purpose)
    assert (
        server.calls(),
        server.calls("action"),
        server.calls("planning"),
        server.calls("critic"),
    ) == (3, 2, 1, 0)
    assert server.requests[1].text == "12345678"
    server.reset()
    assert server.calls() == 0 and server.requests == []
    assert chat(server, "action").status_code == 400  # the handler is gone too


def test_stop_releases_the_port_and_start_again_works() -> None:
    server = ScriptedModelServer()
    with pytest.raises(RuntimeError, match="not running"):
        server.base_url  # noqa: B018
    server.start()
    url = server.base_url
    server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models", timeout=2)
    server.stop()  # idempotent
    with server:
        assert httpx.get(f"{server.base_url}/models").status_code == 200


def test_delay_longer_than_the_client_timeout_times_out(server: ScriptedModelServer) -> None:
    server.script("action", Delay(60, {}))
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{server.base_url}/chat/completions",
            json={"messages": []},
            headers={"X-Veriloop-Purpose": "action"},
            timeout=0.2,
        )
    assert server.pending() == 0  # the delayed answer was taken; stop() abandons it


def test_stop_closes_keep_alive_connections() -> None:
    server = ScriptedModelServer().start()
    server.on(ANY_PURPOSE, lambda req: {})
    with httpx.Client(timeout=2) as client:
        url = f"{server.base_url}/chat/completions"
        assert client.post(url, json={"messages": []}).status_code == 200  # connection now pooled
        server.stop()
        with pytest.raises(httpx.TransportError):
            client.post(url, json={"messages": []})
    assert server.calls() == 1


def test_in_flight_counts_the_calls_being_answered_now(server: ScriptedModelServer) -> None:
    server.on(ANY_PURPOSE, lambda req: Delay(0.5, {}))
    with ThreadPoolExecutor(3) as pool:
        answers = [pool.submit(chat, server, "action") for _ in range(3)]
        deadline = time.monotonic() + 5
        while server.in_flight < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.in_flight == 3
        assert [a.result().status_code for a in answers] == [200] * 3
    assert server.in_flight == 0
    assert server.peak_in_flight == 3
