"""LangChainStructuredLLM over a langchain-core fake chat model that answers with tool calls."""

from __future__ import annotations

import httpx
import openai
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from veriloop.llm import LangChainStructuredLLM, LLMOutputError, LLMUnavailable
from veriloop.schemas import SemanticVerdict

MESSAGES = [
    {"role": "system", "content": "judge"},
    {"role": "user", "content": "did click(3) work?"},
]
VERDICT = {"action_succeeded": True, "task_completed": False, "confidence": 0.8, "reason": "opened"}


class ToolCallingFake(GenericFakeChatModel):
    """GenericFakeChatModel whose bind_tools returns itself, so with_structured_output parses tool calls."""

    seen: list = []

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(messages)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def tool_call(args: dict, usage: dict | None = None) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": "SemanticVerdict", "args": args, "id": "call-1"}],
        usage_metadata=usage,
    )


def adapter(*replies: AIMessage, **kwargs) -> LangChainStructuredLLM:
    return LangChainStructuredLLM(ToolCallingFake(messages=iter(replies), seen=[]), **kwargs)


def test_value_usage_and_cost_from_the_chat_model() -> None:
    llm = adapter(
        tool_call(VERDICT, {"input_tokens": 1000, "output_tokens": 500, "total_tokens": 1500}),
        model_name="my-model",
        prices={"my-model": (2.0, 4.0)},
    )
    result = llm.structured("verification", MESSAGES, SemanticVerdict)
    assert result.value == SemanticVerdict(**VERDICT)
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.calls) == (
        1000,
        500,
        1,
    )
    assert result.usage.cost_usd == pytest.approx((1000 * 2.0 + 500 * 4.0) / 1e6)
    [sent] = llm.chat_model.seen
    assert [(m.type, m.content) for m in sent] == [
        ("system", "judge"),
        ("human", "did click(3) work?"),
    ]


def test_model_name_defaults_to_the_chat_model_type() -> None:
    llm = adapter(tool_call(VERDICT))
    assert llm.model == "generic-fake-chat-model"
    assert llm.structured("verification", MESSAGES, SemanticVerdict).usage.cost_usd == 0.0


@pytest.mark.parametrize(
    ("reply", "fragment"),
    [
        (AIMessage(content="The task completed successfully."), "The task completed successfully."),
        (tool_call({**VERDICT, "confidence": 3}), "confidence"),
    ],
    ids=["prose", "invalid-args"],
)
def test_bad_output_is_llm_output_error(reply: AIMessage, fragment: str) -> None:
    with pytest.raises(LLMOutputError, match="not a valid SemanticVerdict") as info:
        adapter(reply).structured("verification", MESSAGES, SemanticVerdict)
    assert fragment in str(info.value)


def test_openai_errors_from_the_chat_model_are_unavailable() -> None:
    class Down(ToolCallingFake):
        def _generate(self, *args, **kwargs):
            raise openai.APITimeoutError(
                request=httpx.Request("POST", "http://provider/v1/chat/completions")
            )

    llm = LangChainStructuredLLM(Down(messages=iter([]), seen=[]))
    with pytest.raises(LLMUnavailable, match="verification: model provider unreachable"):
        llm.structured("verification", MESSAGES, SemanticVerdict)
