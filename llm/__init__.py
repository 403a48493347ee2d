"""The model boundary: structured calls (messages + pydantic schema -> validated instance + usage).

``get_llm(context, purpose)`` builds, once per configuration, the default client on the
``openai`` SDK for one purpose. Configuration comes from ``Context`` (model,
reasoning effort and token cap, per purpose over one default; base_url, timeout,
retries, structured-output dialect; each also settable as ``VERILOOP_<FIELD>``) and the environment:
``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` (OpenAI-compatible servers such as
vLLM, Ollama, llama.cpp), ``VERILOOP_PRICES``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from veriloop.llm.base import (
    AsyncStructuredLLM,
    LLMError,
    LLMOutputError,
    LLMUnavailable,
    Message,
    Structured,
    StructuredLLM,
    ToolCall,
    ToolTurn,
)

if TYPE_CHECKING:
    from veriloop.llm.clients import PLACEHOLDER_API_KEY, clear_llm_cache, get_llm
    from veriloop.llm.langchain_adapter import LangChainStructuredLLM
    from veriloop.llm.openai_client import OpenAIStructuredLLM

_LAZY = {
    "LangChainStructuredLLM": "veriloop.llm.langchain_adapter",
    "OpenAIStructuredLLM": "veriloop.llm.openai_client",
    "PLACEHOLDER_API_KEY": "veriloop.llm.clients",
    "clear_llm_cache": "veriloop.llm.clients",
    "get_llm": "veriloop.llm.clients",
}
"""Names whose modules import the ``openai`` SDK or LangChain, imported on first use: code that needs
only the contract above (the engines, so every page process) does not load the SDK."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "AsyncStructuredLLM",
    "LLMError",
    "LLMOutputError",
    "LLMUnavailable",
    "LangChainStructuredLLM",
    "Message",
    "OpenAIStructuredLLM",
    "PLACEHOLDER_API_KEY",
    "Structured",
    "StructuredLLM",
    "ToolCall",
    "ToolTurn",
    "clear_llm_cache",
    "get_llm",
]
