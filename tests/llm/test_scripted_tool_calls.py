"""The scripted server's tool-calling answers, spoken to over raw HTTP."""

from __future__ import annotations

import json

import httpx
import pytest

from veriloop.llm.scripted import RawBody, ScriptedModelServer, ToolCalls

TOOLS = [
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "mark_step", "parameters": {"type": "object"}}},
]


@pytest.fixture
def server():
    with ScriptedModelServer() as running:
        yield running


def chat(server: ScriptedModelServer, messages: list[dict], **extra) -> httpx.Response:
    body = {"model": "m", "messages": messages, **extra}
    return httpx.post(
        f"{server.base_url}/chat/completions",
        json=body,
        headers={"X-Veriloop-Purpose": "execution"},
        timeout=5,
    )


def test_tool_calls_render_as_an_assistant_message(server: ScriptedModelServer) -> None:
    server.script(
        "execution",
        ToolCalls([("read_file", {"path": "a.txt"}), ("mark_step", '{"notes": broken')]),
    )
    response = chat(server, [{"role": "user", "content": "Step: s1\ndo it"}], tools=TOOLS)

    assert response.status_code == 200
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["role"] == "assistant" and message["content"] is None
    assert message["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": "a.txt"})},
        },
        {
            "id": "call_2",
            "type": "function",
            "function": {"name": "mark_step", "arguments": '{"notes": broken'},
        },
    ]
    assert response.json()["usage"]["completion_tokens"] >= 1
    assert server.requests[0].tools == ["read_file", "mark_step"]


def test_ids_continue_the_conversation_and_handlers_see_tool_results(
    server: ScriptedModelServer,
) -> None:
    seen = []

    def agent(req):
        seen.append(req)
        return ToolCalls([("mark_step", {"notes": "[SUCCESS]: read it"})], content="Done.")

    server.on("execution", agent)
    conversation = [
        {"role": "user", "content": "Step: s1"},
        {
            "role": "assistant",
            "content": None,  # a tool-calling assistant message may carry no text
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "hello from a.txt"},
    ]
    message = chat(server, conversation, tools=TOOLS).json()["choices"][0]["message"]

    assert message["content"] == "Done."
    assert [c["id"] for c in message["tool_calls"]] == ["call_2"]
    [request] = seen
    assert request.messages == conversation
    assert request.messages[-1]["role"] == "tool"
    assert request.text == "Step: s1\n\nhello from a.txt"


def test_request_without_tools_offers_none(server: ScriptedModelServer) -> None:
    server.script("execution", "plain")
    chat(server, [{"role": "user", "content": "hi"}])
    assert server.requests[0].tools == []


def test_raw_body_is_sent_as_is(server: ScriptedModelServer) -> None:
    server.script("execution", RawBody("not json at all", content_type="text/plain"))
    response = chat(server, [{"role": "user", "content": "hi"}])
    assert response.status_code == 200
    assert response.text == "not json at all"
    assert response.headers["content-type"] == "text/plain"
