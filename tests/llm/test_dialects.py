"""Structured-output dialects against loopback servers that reject the richer forms as real servers do.

Each rejection body is the shape a real server sends: OpenAI-style 400 with ``param``, FastAPI's 422
validation detail, llama-cpp-python's 500 wrapping the pydantic error. A server that is down, or
overloaded, or answers a 422 that only echoes the request, stays an outage (LLMUnavailable).
"""

from __future__ import annotations

import json
import socket

import pytest

from veriloop.context import Context
from veriloop.llm import LLMOutputError, LLMUnavailable, OpenAIStructuredLLM, get_llm
from veriloop.llm.dialects import DIALECTS, learned_dialect, loads_lenient, parse_dialect
from veriloop.llm.reasoning import CallOptions
from veriloop.llm.scripted import Fail, RawBody, ScriptedModelServer
from veriloop.schemas import ActionChoice, SemanticVerdict

MESSAGES = [
    {"role": "system", "content": "You judge browser actions."},
    {"role": "user", "content": "Goal: press Submit. Action: click(3)."},
]
VERDICT = SemanticVerdict(
    action_succeeded=True, task_completed=False, confidence=0.9, reason="form opened"
)

OPENAI_400 = RawBody(
    json.dumps(
        {
            "error": {
                "message": "Invalid parameter: 'response_format' of type 'json_schema' is not "
                "supported with this model.",
                "type": "invalid_request_error",
                "param": "response_format",
                "code": None,
            }
        }
    ),
    status=400,
)
FASTAPI_422 = RawBody(
    json.dumps(
        {
            "detail": [
                {
                    "type": "literal_error",
                    "loc": ["body", "response_format", "type"],
                    "msg": "Input should be 'text' or 'json_object'",
                    "input": "json_schema",
                    "ctx": {"expected": "'text' or 'json_object'"},
                }
            ]
        }
    ),
    status=422,
)
# llama-cpp-python 0.3.36's server, as captured: HTTP 500 wrapping the validation error's repr.
LLAMA_CPP_PYTHON_500 = RawBody(
    json.dumps(
        {
            "error": {
                "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", "
                "'input': 'json_schema', 'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n"
                '  File "/venv/lib/python3.11/site-packages/llama_cpp/server/app.py", line 376, '
                "in create_chat_completion\n    POST /v1/chat/completions",
                "type": "internal_server_error",
                "param": None,
                "code": None,
            }
        }
    ),
    status=500,
)
EXTRA_SCHEMA_422 = RawBody(
    json.dumps(
        {
            "detail": [
                {
                    "type": "extra_forbidden",
                    "loc": ["body", "response_format", "schema"],
                    "msg": "Extra inputs are not permitted",
                    "input": {"type": "object"},
                }
            ]
        }
    ),
    status=422,
)
NO_JSON_MODE_400 = RawBody(
    json.dumps({"error": {"message": "response_format is not supported", "code": 400}}),
    status=400,
)


def client(server: ScriptedModelServer, model: str = "local", **kwargs) -> OpenAIStructuredLLM:
    return OpenAIStructuredLLM(
        model=model, api_key="k", base_url=server.base_url, max_retries=0, **kwargs
    )


@pytest.fixture
def server():
    with ScriptedModelServer() as running:
        yield running


@pytest.mark.parametrize(
    "rejection", [OPENAI_400, FASTAPI_422, LLAMA_CPP_PYTHON_500], ids=["400", "422", "500"]
)
def test_a_rejected_json_schema_steps_down_to_json_object_with_schema_and_is_remembered(
    server: ScriptedModelServer, rejection: RawBody
) -> None:
    server.rejections["json_schema"] = rejection
    server.on("verification", lambda req: VERDICT)
    first = client(server)

    assert first.structured("verification", MESSAGES, SemanticVerdict).value == VERDICT
    assert [r.dialect for r in server.requests] == ["json_schema", "json_object_schema"]
    fallback = server.requests[-1]
    schema = fallback.body["response_format"]["schema"]
    assert schema["properties"]["task_completed"]["type"] == "boolean"
    assert schema["additionalProperties"] is False
    assert '"task_completed"' in fallback.messages[0]["content"]  # spelled out for the model too

    # Remembered per endpoint and model: a new client for the same pair skips the rejected form ...
    assert client(server).structured("verification", MESSAGES, SemanticVerdict).value == VERDICT
    assert server.requests[-1].dialect == "json_object_schema"
    # ... and another model on the same endpoint still starts with the richest.
    other = client(server, model="other")
    assert other.dialect == "json_schema"
    assert learned_dialect(first._endpoint, "local") == "json_object_schema"


def test_the_token_cap_is_spelled_as_each_dialect_s_server_reads_it(
    server: ScriptedModelServer,
) -> None:
    # llama-cpp-python's server ignores max_completion_tokens: a model rambling inside a JSON
    # string would run to the end of its context instead of stopping at the cap.
    server.rejections["json_schema"] = LLAMA_CPP_PYTHON_500
    server.on("verification", lambda req: VERDICT)
    capped = client(server, options=CallOptions(max_tokens=64))

    assert capped.structured("verification", MESSAGES, SemanticVerdict).value == VERDICT
    rejected, fallback = server.requests
    assert rejected.body["max_completion_tokens"] == 64 and "max_tokens" not in rejected.body
    assert fallback.body["max_tokens"] == 64 and "max_completion_tokens" not in fallback.body


@pytest.mark.anyio
async def test_async_calls_step_down_the_same_way(server: ScriptedModelServer) -> None:
    server.rejections["json_schema"] = LLAMA_CPP_PYTHON_500
    server.on("verification", lambda req: VERDICT)
    llm = client(server)
    assert (await llm.astructured("verification", MESSAGES, SemanticVerdict)).value == VERDICT
    assert llm.dialect == "json_object_schema"


def test_a_server_rejecting_every_response_format_gets_a_forced_tool_call(
    server: ScriptedModelServer,
) -> None:
    server.rejections.update(
        json_schema=OPENAI_400, json_object_schema=EXTRA_SCHEMA_422, json_object=NO_JSON_MODE_400
    )
    server.on("action", lambda req: ActionChoice(thought="t", action="click(3)"))
    result = client(server).structured("action", MESSAGES, ActionChoice)

    assert result.value == ActionChoice(thought="t", action="click(3)")
    assert [r.dialect for r in server.requests] == list(DIALECTS)
    forced = server.requests[-1]
    assert forced.tools == ["ActionChoice"]
    assert forced.body["tool_choice"] == {"type": "function", "function": {"name": "ActionChoice"}}
    assert result.usage.calls == 1 and result.usage.output_tokens > 0


def test_a_rejected_tool_call_has_nowhere_left_to_go(server: ScriptedModelServer) -> None:
    server.rejections.update(
        json_schema=OPENAI_400,
        json_object_schema=EXTRA_SCHEMA_422,
        json_object=NO_JSON_MODE_400,
        tool_call=Fail(400, "tool_choice is not supported"),
    )
    with pytest.raises(LLMUnavailable, match="HTTP 400.*tool_choice"):
        client(server).structured("action", MESSAGES, ActionChoice)
    assert len(server.requests) == 4


def test_a_server_that_is_down_is_an_outage_not_a_rejection() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    llm = OpenAIStructuredLLM(
        model="local", api_key="k", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1
    )
    with pytest.raises(LLMUnavailable, match="unreachable"):
        llm.structured("verification", MESSAGES, SemanticVerdict)
    assert llm.dialect == "json_schema"
    assert learned_dialect(llm._endpoint, "local") is None


@pytest.mark.parametrize(
    "outage",
    [
        Fail(503, "Service Unavailable"),
        Fail(500, "CUDA error: out of memory"),
        Fail(429, "rate limit for response_format requests"),  # 429 is never a dialect answer
        # FastAPI echoes the whole request under "input" for a missing field: not about the format.
        RawBody(
            json.dumps(
                {
                    "detail": [
                        {
                            "type": "missing",
                            "loc": ["body", "model"],
                            "msg": "Field required",
                            "input": {"messages": [], "response_format": {"type": "json_schema"}},
                        }
                    ]
                }
            ),
            status=422,
        ),
    ],
    ids=["503", "500-oom", "429", "422-echo"],
)
def test_errors_that_do_not_name_the_response_format_stay_outages(
    server: ScriptedModelServer, outage: Fail | RawBody
) -> None:
    server.on("verification", lambda req: outage)
    llm = client(server)
    with pytest.raises(LLMUnavailable, match=f"HTTP {outage.status}"):
        llm.structured("verification", MESSAGES, SemanticVerdict)
    assert [r.dialect for r in server.requests] == ["json_schema"]
    assert llm.dialect == "json_schema"


def test_a_configured_dialect_is_used_from_the_first_call_and_never_changed(
    server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("VERILOOP_STRUCTURED_OUTPUT", "json_object")
    server.on("verification", lambda req: VERDICT)
    llm = get_llm(Context(llm_max_retries=0))
    assert llm.structured("verification", MESSAGES, SemanticVerdict).value == VERDICT
    assert server.requests[-1].dialect == "json_object"

    server.rejections["json_object"] = NO_JSON_MODE_400
    with pytest.raises(LLMUnavailable, match="HTTP 400"):
        llm.structured("verification", MESSAGES, SemanticVerdict)
    assert llm.dialect == "json_object"
    assert get_llm(Context(structured_output="tool_call")).dialect == "tool_call"


def test_an_unknown_dialect_is_a_clear_error() -> None:
    assert parse_dialect("auto") is None and parse_dialect(None) is None
    assert parse_dialect(" tool_call ") == "tool_call"
    with pytest.raises(ValueError, match="unknown structured-output dialect 'xml'.*json_schema"):
        parse_dialect("xml")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_raw_control_characters_inside_strings_are_accepted_in_every_dialect(
    server: ScriptedModelServer, dialect: str
) -> None:
    server.on("action", lambda req: '{"thought": "line one\nline\ttwo", "action": "click(3)"}')
    result = client(server, structured_output=dialect).structured("action", MESSAGES, ActionChoice)
    assert result.value == ActionChoice(thought="line one\nline\ttwo", action="click(3)")
    assert server.requests[-1].dialect == dialect


def test_lenient_parsing_is_only_about_control_characters_and_fences() -> None:
    assert loads_lenient('```json\n{"a": "x\ny"}\n```') == {"a": "x\ny"}
    for garbage in ('{"a": 1} trailing prose', "{'a': 1}", '{"a": 1,}', "Sure! here it is"):
        with pytest.raises(ValueError):
            loads_lenient(garbage)


def test_prose_is_still_an_output_error(server: ScriptedModelServer) -> None:
    server.on("action", lambda req: "I would click the Submit button.")
    with pytest.raises(LLMOutputError, match="not a valid ActionChoice.*Expecting value"):
        client(server).structured("action", MESSAGES, ActionChoice)


def test_the_cli_option_sets_the_dialect_for_every_command(monkeypatch) -> None:
    from typer.testing import CliRunner

    from veriloop.cli import app

    monkeypatch.setenv("VERILOOP_STRUCTURED_OUTPUT", "auto")  # restored after the test
    runner = CliRunner()
    listed = runner.invoke(app, ["--structured-output", "tool_call", "eval", "miniwob", "--list"])
    assert listed.exit_code == 0, listed.output
    assert Context().structured_output == "tool_call"
    bad = runner.invoke(app, ["--structured-output", "xml", "eval", "miniwob", "--list"])
    assert bad.exit_code == 2 and "unknown structured-output dialect" in bad.output
