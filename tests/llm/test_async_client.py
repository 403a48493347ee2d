"""The async model boundary (``astructured``, ``atool_turn``) against the scripted server."""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time

import openai
import pytest

from veriloop.context import Context
from veriloop.llm import (
    LLMOutputError,
    LLMUnavailable,
    OpenAIStructuredLLM,
    ToolTurn,
    get_llm,
)
from veriloop.llm.pricing import DEFAULT_PRICES
from veriloop.llm.scripted import (
    Delay,
    Fail,
    RawBody,
    ScriptedModelServer,
    ScriptedRequest,
    ToolCalls,
)
from veriloop.schemas import ActionChoice, SemanticVerdict

MESSAGES = [
    {"role": "system", "content": "You judge browser actions."},
    {"role": "user", "content": "Goal: add a patient named Jas. Action: click(3)."},
]
VERDICT = SemanticVerdict(
    action_succeeded=True, task_completed=False, confidence=0.9, reason="form opened"
)
WRITE_TOOL = {
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "Write a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def llm(**context) -> OpenAIStructuredLLM:
    return get_llm(Context(**context))


def cost(usage, model: str = "gpt-4.1-mini") -> float:
    price = DEFAULT_PRICES[model]
    return (usage.input_tokens * price.input_per_m + usage.output_tokens * price.output_per_m) / 1e6


# -- astructured ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_astructured_returns_value_and_usage(scripted_model: ScriptedModelServer) -> None:
    scripted_model.script("verification", VERDICT)
    result = await llm().astructured("verification", MESSAGES, SemanticVerdict)

    assert result.value == VERDICT
    [request] = scripted_model.requests
    assert request.headers["x-veriloop-purpose"] == "verification"
    assert request.response_format_type == "json_schema"
    assert request.schema_name == "SemanticVerdict"
    assert request.messages == MESSAGES
    assert result.usage.input_tokens == math.ceil(len(request.text) / 4)
    assert result.usage.calls == 1
    assert result.usage.cost_usd == pytest.approx(cost(result.usage))
    assert result.usage.latency_ms > 0


@pytest.mark.anyio
async def test_calls_side_by_side_each_send_their_own_body_and_purpose(
    scripted_model: ScriptedModelServer,
) -> None:
    # Every request's options are a copy of one per-client template: no call's body or headers
    # may show up in another's, sync or async, however they interleave.
    scripted_model.on("verification", lambda request: Delay(0.05, VERDICT))
    scripted_model.on(
        "action", lambda request: Delay(0.05, ActionChoice(thought="t", action="click(3)"))
    )
    client = llm()
    asks = [("verification", SemanticVerdict), ("action", ActionChoice)] * 3
    results = await asyncio.gather(
        *(client.astructured(purpose, [*MESSAGES, {"role": "user", "content": f"call {n}"}], schema)
          for n, (purpose, schema) in enumerate(asks))
    )  # fmt: skip
    assert [type(r.value) for r in results] == [schema for _, schema in asks]
    client.structured("verification", MESSAGES, SemanticVerdict)
    sent = {r.messages[-1]["content"]: r for r in scripted_model.requests}
    for n, (purpose, schema) in enumerate(asks):
        request = sent[f"call {n}"]
        assert request.headers["x-veriloop-purpose"] == request.purpose == purpose
        assert request.schema_name == schema.__name__
    assert scripted_model.requests[-1].messages == MESSAGES  # the sync client, same endpoint


@pytest.mark.anyio
async def test_astructured_falls_back_to_json_mode_and_remembers() -> None:
    with ScriptedModelServer(reject_json_schema=True) as server:
        server.script("verification", VERDICT, "```json\n" + VERDICT.model_dump_json() + "\n```")
        client = OpenAIStructuredLLM(model="m", api_key="k", base_url=server.base_url)
        assert (
            await client.astructured("verification", MESSAGES, SemanticVerdict)
        ).value == VERDICT
        assert client.dialect == "json_object_schema"
        assert (
            await client.astructured("verification", MESSAGES, SemanticVerdict)
        ).value == VERDICT
        assert [r.response_format_type for r in server.requests] == [
            "json_schema",
            "json_object",
            "json_object",
        ]
        fallback = server.requests[1]
        assert fallback.messages[0]["content"].startswith("You judge browser actions.")
        assert '"task_completed"' in fallback.messages[0]["content"]


@pytest.mark.anyio
async def test_astructured_garbage_is_output_error(scripted_model: ScriptedModelServer) -> None:
    scripted_model.script("verification", "The action worked, trust me.")
    with pytest.raises(LLMOutputError, match="not a valid SemanticVerdict.*trust me"):
        await llm().astructured("verification", MESSAGES, SemanticVerdict)
    assert scripted_model.calls("verification") == 1


@pytest.mark.anyio
@pytest.mark.parametrize("max_retries", [0, 2])
async def test_astructured_503_is_unavailable_after_exactly_max_retries(
    scripted_model: ScriptedModelServer, max_retries: int
) -> None:
    scripted_model.on("verification", lambda req: Fail(503, "overloaded", retry_after_s=0.01))
    with pytest.raises(LLMUnavailable, match="HTTP 503.*overloaded"):
        await llm(llm_max_retries=max_retries).astructured(
            "verification", MESSAGES, SemanticVerdict
        )
    assert scripted_model.calls("verification") == max_retries + 1


# The async client runs over aiohttp: its timeouts and refused connections are outages too.
@pytest.mark.anyio
@pytest.mark.parametrize("max_retries", [0, 1])
async def test_an_async_answer_slower_than_the_timeout_is_unavailable(
    scripted_model: ScriptedModelServer, max_retries: int
) -> None:
    scripted_model.on("verification", lambda req: Delay(2.0, VERDICT))
    with pytest.raises(LLMUnavailable, match="unreachable.*Timeout"):
        await llm(llm_timeout_s=0.2, llm_max_retries=max_retries).astructured(
            "verification", MESSAGES, SemanticVerdict
        )
    assert scripted_model.calls("verification") == max_retries + 1


@pytest.mark.anyio
async def test_an_unreachable_server_is_unavailable_to_async_calls(
    scripted_model: ScriptedModelServer,
) -> None:
    client = llm(llm_max_retries=0)
    scripted_model.stop()
    with pytest.raises(LLMUnavailable, match="unreachable"):
        await client.astructured("verification", MESSAGES, SemanticVerdict)


@pytest.mark.anyio
async def test_concurrent_calls_overlap(scripted_model: ScriptedModelServer) -> None:
    lock = threading.Lock()
    in_flight = peak = 0

    def slow(req: ScriptedRequest) -> SemanticVerdict:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        time.sleep(0.3)  # a Delay(0.3) whose duration the handler can observe
        with lock:
            in_flight -= 1
        return VERDICT

    scripted_model.on("verification", slow)
    client = llm()
    started = time.perf_counter()
    results = await asyncio.gather(
        *(client.astructured("verification", MESSAGES, SemanticVerdict) for _ in range(30))
    )
    elapsed = time.perf_counter() - started

    assert [r.value for r in results] == [VERDICT] * 30
    assert peak >= 10, f"the server saw at most {peak} requests at once"
    assert elapsed < 30 * 0.3 / 2  # serial would take 9 s


def test_one_cached_client_serves_several_event_loops(scripted_model: ScriptedModelServer) -> None:
    scripted_model.on("verification", lambda req: VERDICT)
    client = llm()

    async def twice() -> object:
        first = await client.astructured("verification", MESSAGES, SemanticVerdict)
        same = await client._async_client()
        await client.astructured("verification", MESSAGES, SemanticVerdict)
        assert await client._async_client() is same  # one AsyncOpenAI per loop, reused within it
        # aiohttp, not httpx's pool (which checks every pooled socket per request under load)
        assert isinstance(same._client, openai.DefaultAioHttpClient)
        return first.value, same

    first_value, first_client = asyncio.run(twice())
    assert llm() is client  # get_llm cached it
    second_value, second_client = asyncio.run(twice())

    assert first_value == second_value == VERDICT
    assert second_client is not first_client
    assert first_client.is_closed()  # closed on its own loop when asyncio.run shut it down
    assert first_client not in [c for c, _ in client._async_clients.values()]
    assert scripted_model.calls("verification") == 4
    assert client.structured("verification", MESSAGES, SemanticVerdict).value == VERDICT


# -- atool_turn ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_tool_turn_returns_calls_and_priced_usage(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.script(
        "execution",
        ToolCalls(
            [("write_file", {"path": "a.txt", "content": "hi"}), ("list_files", {})],
            content="Writing it.",
        ),
    )
    turn = await llm().atool_turn("execution", MESSAGES, [WRITE_TOOL])

    assert isinstance(turn, ToolTurn)
    assert turn.content == "Writing it."
    assert turn.finish_reason == "tool_calls"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("call_1", "write_file", {"path": "a.txt", "content": "hi"}),
        ("call_2", "list_files", {}),
    ]
    [request] = scripted_model.requests
    assert request.purpose == "execution"
    assert request.tools == ["write_file"]
    assert request.body["tools"] == [WRITE_TOOL]
    assert turn.usage.input_tokens == math.ceil(len(request.text) / 4)
    assert turn.usage.calls == 1
    assert turn.usage.cost_usd == pytest.approx(cost(turn.usage)) and turn.usage.cost_usd > 0


@pytest.mark.anyio
async def test_tool_turn_text_answer_and_tool_results_reach_the_server(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.script("execution", "All done.")
    conversation = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "write_file", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "wrote 2 characters"},
    ]
    turn = await llm().atool_turn("execution", conversation, [WRITE_TOOL])

    assert turn.content == "All done." and turn.tool_calls == [] and turn.finish_reason == "stop"
    [request] = scripted_model.requests
    assert request.messages[-1] == conversation[-1]
    assert "wrote 2 characters" in request.text


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("<html>502 bad gateway</html>", "502 bad gateway"),
        ('{"id": "x", "object": "chat.completion"}', "chat.completion"),
        ('{"id": "x", "choices": []}', "choices"),
    ],
    ids=["not-json", "missing-choices", "empty-choices"],
)
async def test_tool_turn_garbage_body_is_provider_trouble(
    scripted_model: ScriptedModelServer, body: str, fragment: str
) -> None:
    # A proxy's error page is not the model's answer: an outage (503), never a failed step.
    scripted_model.script("execution", RawBody(body))
    with pytest.raises(LLMUnavailable, match=f"not a chat completion: .*{fragment}"):
        await llm().atool_turn("execution", MESSAGES, [WRITE_TOOL])
    assert scripted_model.calls("execution") == 1


@pytest.mark.anyio
async def test_tool_turn_provider_error_is_unavailable(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.on("execution", lambda req: Fail(503, "overloaded", retry_after_s=0.01))
    with pytest.raises(LLMUnavailable, match="HTTP 503"):
        await llm(llm_max_retries=1).atool_turn("execution", MESSAGES, [WRITE_TOOL])
    assert scripted_model.calls("execution") == 2
