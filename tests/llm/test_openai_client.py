"""The real openai client against the scripted server: values, usage, errors, retries, timeouts, JSON-mode fallback."""

from __future__ import annotations

import math

import pytest

from veriloop.context import Context
from veriloop.llm import LLMOutputError, LLMUnavailable, OpenAIStructuredLLM, get_llm
from veriloop.llm.pricing import DEFAULT_PRICES
from veriloop.llm.scripted import Delay, Fail, Refusal, ScriptedModelServer, Truncated
from veriloop.schemas import ActionChoice, PlanOutput, SemanticVerdict

MESSAGES = [
    {"role": "system", "content": "You judge browser actions."},
    {"role": "user", "content": "Goal: add a patient named Jas. Action: click(3)."},
]
VERDICT = SemanticVerdict(
    action_succeeded=True, task_completed=False, confidence=0.9, reason="form opened"
)


def llm(**context) -> OpenAIStructuredLLM:
    return get_llm(Context(**context))


def test_structured_call_returns_value_usage_cost_and_sends_purpose(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.script("verification", VERDICT)
    result = llm(model="gpt-4.1-mini").structured("verification", MESSAGES, SemanticVerdict)

    assert result.value == VERDICT
    [request] = scripted_model.requests
    assert request.headers["x-veriloop-purpose"] == "verification"
    assert request.purpose == "verification"
    assert request.schema_name == "SemanticVerdict"
    assert request.response_format_type == "json_schema"
    assert request.body["response_format"]["json_schema"]["strict"] is True
    assert request.messages == MESSAGES
    assert request.body["model"] == "gpt-4.1-mini"
    # The server counts about four characters a token; the client reports exactly what the server said.
    assert result.usage.input_tokens == math.ceil(len(request.text) / 4)
    assert result.usage.output_tokens == math.ceil(len(VERDICT.model_dump_json()) / 4)
    assert result.usage.calls == 1
    price = DEFAULT_PRICES["gpt-4.1-mini"]
    expected = (
        result.usage.input_tokens * price.input_per_m
        + result.usage.output_tokens * price.output_per_m
    ) / 1e6
    assert result.usage.cost_usd == pytest.approx(expected)
    assert result.usage_update("verification") == {"verification": result.usage.model_dump()}


def test_nested_schema_round_trips(scripted_model: ScriptedModelServer) -> None:
    plan = {
        "steps": [{"description": "open form", "expected_outcome": None, "sub_tasks": ["a", "b"]}]
    }
    scripted_model.script("planning", plan)
    assert llm().structured("planning", MESSAGES, PlanOutput).value == PlanOutput.model_validate(
        plan
    )


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        ("The action worked, task completed successfully!", "The action worked, task completed"),
        (
            {"action_succeeded": True, "task_completed": True, "confidence": 1.7, "reason": "x"},
            "confidence",
        ),
        ({"thought": "t"}, "thought"),
        ("", "not a valid SemanticVerdict"),
    ],
    ids=["prose", "out-of-range", "wrong-shape", "empty"],
)
def test_bad_output_is_llm_output_error(
    scripted_model: ScriptedModelServer, answer, fragment: str
) -> None:
    scripted_model.script("verification", answer)
    with pytest.raises(LLMOutputError) as info:
        llm().structured("verification", MESSAGES, SemanticVerdict)
    assert "SemanticVerdict" in str(info.value)
    assert fragment in str(info.value)
    assert scripted_model.calls("verification") == 1  # bad output is never retried


def test_error_message_quotes_only_the_first_200_characters(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.script("action", "x" * 150 + "y" * 400)
    with pytest.raises(LLMOutputError) as info:
        llm().structured("action", MESSAGES, ActionChoice)
    assert "x" * 150 + "y" * 50 in str(info.value)
    assert "y" * 51 not in str(info.value)


@pytest.mark.parametrize("json_mode", [False, True], ids=["json_schema", "json_mode"])
def test_refusal_and_truncation_are_llm_output_errors(
    scripted_model: ScriptedModelServer, json_mode: bool
) -> None:
    scripted_model.reject_json_schema = json_mode
    scripted_model.script(
        "action", Refusal("I won't click that."), Truncated('{"thought": "I will')
    )
    client = llm()
    with pytest.raises(LLMOutputError, match='refused: "I won\'t click that."'):
        client.structured("action", MESSAGES, ActionChoice)
    with pytest.raises(LLMOutputError, match="ActionChoice: no complete answer"):
        client.structured("action", MESSAGES, ActionChoice)
    assert (client.dialect == "json_object_schema") is json_mode


def test_server_error_then_success_is_retried_by_the_sdk(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.script(
        "verification", Fail(500, "boom"), VERDICT
    )  # SDK's own backoff (~0.4-0.5 s)
    result = llm(llm_max_retries=2).structured("verification", MESSAGES, SemanticVerdict)
    assert result.value == VERDICT
    assert scripted_model.calls("verification") == 2


@pytest.mark.parametrize("max_retries", [0, 2])
@pytest.mark.parametrize("status", [503, 429])
def test_persistent_failure_is_unavailable_after_exactly_max_retries(
    scripted_model: ScriptedModelServer, status: int, max_retries: int
) -> None:
    scripted_model.on("verification", lambda req: Fail(status, "overloaded", retry_after_s=0.01))
    with pytest.raises(LLMUnavailable, match=f"HTTP {status}.*overloaded"):
        llm(llm_max_retries=max_retries).structured("verification", MESSAGES, SemanticVerdict)
    assert scripted_model.calls("verification") == max_retries + 1


@pytest.mark.parametrize("max_retries", [0, 1])
def test_answer_slower_than_the_timeout_is_unavailable(
    scripted_model: ScriptedModelServer, max_retries: int
) -> None:
    scripted_model.on("verification", lambda req: Delay(2.0, VERDICT))
    with pytest.raises(LLMUnavailable, match="unreachable.*Timeout"):
        llm(llm_timeout_s=0.2, llm_max_retries=max_retries).structured(
            "verification", MESSAGES, SemanticVerdict
        )
    assert scripted_model.calls("verification") == max_retries + 1


def test_delay_within_the_timeout_still_answers(scripted_model: ScriptedModelServer) -> None:
    scripted_model.script("verification", Delay(0.05, VERDICT))
    assert (
        llm(llm_timeout_s=5).structured("verification", MESSAGES, SemanticVerdict).value == VERDICT
    )


def test_unreachable_server_is_unavailable(scripted_model: ScriptedModelServer) -> None:
    client = llm(llm_max_retries=0)
    scripted_model.stop()
    with pytest.raises(LLMUnavailable, match="unreachable"):
        client.structured("verification", MESSAGES, SemanticVerdict)


def test_client_error_is_unavailable_and_not_a_fallback(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.script("verification", Fail(400, "maximum context length exceeded"))
    client = llm()
    with pytest.raises(LLMUnavailable, match="HTTP 400.*maximum context length"):
        client.structured("verification", MESSAGES, SemanticVerdict)
    assert client.dialect == "json_schema"
    assert scripted_model.calls() == 1


def test_unscripted_purpose_fails_loudly_without_retries(
    scripted_model: ScriptedModelServer,
) -> None:
    with pytest.raises(LLMUnavailable, match="no scripted answer for purpose 'critic'"):
        llm(llm_max_retries=2).structured("critic", MESSAGES, SemanticVerdict)
    assert scripted_model.calls("critic") == 1
    assert [r.purpose for r in scripted_model.unscripted] == ["critic"]


def test_json_schema_rejected_falls_back_to_json_mode_and_remembers(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.reject_json_schema = True
    scripted_model.script(
        "verification", VERDICT, "```json\n" + VERDICT.model_dump_json() + "\n```"
    )
    client = llm()

    first = client.structured("verification", MESSAGES, SemanticVerdict)
    assert first.value == VERDICT
    assert client.dialect == "json_object_schema"
    rejected, fallback = scripted_model.requests
    assert rejected.response_format_type == "json_schema"
    assert fallback.response_format_type == "json_object"
    assert fallback.body["response_format"]["schema"]["required"]  # the schema for the grammar
    assert fallback.purpose == "verification"  # the header still names the purpose
    # The schema travels in the existing system message, the rest of the conversation is unchanged.
    assert fallback.messages[0]["content"].startswith("You judge browser actions.")
    assert '"task_completed"' in fallback.messages[0]["content"]
    assert "JSON" in fallback.messages[0]["content"]
    assert fallback.messages[1:] == MESSAGES[1:]
    assert first.usage.input_tokens == math.ceil(len(fallback.text) / 4)

    # Remembered: the next call goes straight to JSON mode (and accepts a fenced reply).
    assert client.structured("verification", MESSAGES, SemanticVerdict).value == VERDICT
    assert [r.response_format_type for r in scripted_model.requests] == [
        "json_schema",
        "json_object",
        "json_object",
    ]


def test_json_mode_without_system_message_and_invalid_output(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.reject_json_schema = True
    scripted_model.script("action", {"thought": "t"})
    with pytest.raises(LLMOutputError, match="not a valid ActionChoice"):
        llm().structured("action", [{"role": "user", "content": "next?"}], ActionChoice)
    fallback = scripted_model.requests[-1]
    assert fallback.messages[0]["role"] == "system"
    assert '"action"' in fallback.messages[0]["content"]
    assert fallback.messages[1] == {"role": "user", "content": "next?"}


def test_client_is_usable_directly_with_a_price_argument() -> None:
    with ScriptedModelServer() as server:
        server.script("action", ActionChoice(thought="t", action="click(3)"))
        client = OpenAIStructuredLLM(
            model="local-llama",
            api_key="k",
            base_url=server.base_url,
            max_retries=0,
            prices={"local-llama": (1.0, 2.0)},
        )
        result = client.structured("action", MESSAGES, ActionChoice)
    expected = (result.usage.input_tokens * 1.0 + result.usage.output_tokens * 2.0) / 1e6
    assert result.usage.cost_usd == pytest.approx(expected) and expected > 0
