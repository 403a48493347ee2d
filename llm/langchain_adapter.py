"""StructuredLLM over any LangChain chat model, through its ``with_structured_output``.

For providers the default openai client does not speak (Anthropic, Bedrock,
Vertex, ...)::

    from langchain_anthropic import ChatAnthropic
    llm = LangChainStructuredLLM(ChatAnthropic(model="claude-sonnet-4-5"), prices={"claude-sonnet-4-5": (3, 15)})

Retries are the chat model's own (its ``max_retries``); this adapter adds none.
openai SDK errors (ChatOpenAI and friends) become LLMUnavailable; other
providers' exceptions propagate unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from veriloop.llm.base import Message, Structured, T
from veriloop.llm.openai_client import invalid_output, provider_errors
from veriloop.llm.pricing import PriceOverrides, load_prices, usage_for
from veriloop.schemas.usage import Purpose


class LangChainStructuredLLM:
    """:class:`~veriloop.llm.base.StructuredLLM` over a LangChain ``BaseChatModel``."""

    def __init__(
        self,
        chat_model: Any,
        *,
        model_name: str | None = None,
        prices: PriceOverrides | None = None,
    ) -> None:
        self.chat_model = chat_model
        self.model = (
            model_name
            or getattr(chat_model, "model_name", None)
            or getattr(chat_model, "model", None)
            or chat_model._llm_type
        )
        """The name looked up in the price table."""
        self.prices = load_prices(prices)

    def structured(
        self, purpose: Purpose, messages: list[Message], schema: type[T]
    ) -> Structured[T]:
        """Ask for one ``schema`` instance; LLMOutputError for bad output."""
        runnable = self.chat_model.with_structured_output(schema, include_raw=True)
        # The purpose names the run in traces (LangSmith), as the header does for the openai client.
        config = {"run_name": purpose, "metadata": {"veriloop_purpose": purpose}}
        with provider_errors(purpose, self.model):
            out = runnable.invoke(messages, config=config)
        raw, parsed, error = out["raw"], out.get("parsed"), out.get("parsing_error")
        if error is not None or not isinstance(parsed, schema):
            raise invalid_output(schema, _raw_text(raw), error)
        usage = getattr(raw, "usage_metadata", None) or {}
        return Structured(
            value=parsed,
            usage=usage_for(
                self.model, usage.get("input_tokens", 0), usage.get("output_tokens", 0), self.prices
            ),
        )


def _raw_text(raw: Any) -> str:
    """What the model said: its tool-call arguments, else its text."""
    tool_calls = getattr(raw, "tool_calls", None)
    if tool_calls:
        return json.dumps(tool_calls[0].get("args"))
    content = getattr(raw, "content", "")
    return content if isinstance(content, str) else json.dumps(content)
