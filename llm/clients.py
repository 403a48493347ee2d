"""The structured-call clients ``get_llm`` builds and caches (on the ``openai`` SDK): the part of
:mod:`veriloop.llm` that imports the SDK, loaded on first use."""

from __future__ import annotations

import os
from functools import lru_cache

from veriloop.context import Context
from veriloop.llm.base import LLMUnavailable
from veriloop.llm.dialects import Dialect, forget_dialects, parse_dialect
from veriloop.llm.openai_client import OpenAIStructuredLLM
from veriloop.llm.pricing import PRICES_ENV
from veriloop.llm.reasoning import CallOptions, effort_for, forget_rejections
from veriloop.schemas.usage import Purpose

PLACEHOLDER_API_KEY = "not-needed"
"""Sent to a local server (OPENAI_BASE_URL set, no OPENAI_API_KEY): most ignore it, the SDK requires one."""


def get_llm(context: Context | None = None, purpose: Purpose | None = None) -> OpenAIStructuredLLM:
    """The structured-call client for ``purpose``'s calls under ``context`` (None: the default settings).

    Cached per model, reasoning effort, token cap, endpoint, key, timeout, retries, prices and dialect.
    Raises LLMUnavailable when no provider is configured at all, ValueError for an unknown dialect.
    """
    ctx = context or Context()
    settings = ctx.for_purpose(purpose)
    options = CallOptions(
        reasoning_effort=effort_for(purpose, settings["model"], settings.get("reasoning_effort")),
        max_tokens=settings.get("max_tokens"),
    )
    base_url, api_key = _endpoint(ctx)
    return _cached_llm(
        settings["model"],
        base_url,
        api_key,
        float(ctx.llm_timeout_s),
        int(ctx.llm_max_retries),
        os.environ.get(PRICES_ENV),
        options,
        parse_dialect(ctx.structured_output),
    )


def _endpoint(context: Context) -> tuple[str | None, str]:
    """(base URL, API key) of the OpenAI-compatible provider; LLMUnavailable when none is configured."""
    base_url = context.base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = os.environ.get("OPENAI_API_KEY") or None
    if api_key is None:
        if base_url is None:
            raise LLMUnavailable(
                "no model provider configured: set OPENAI_API_KEY to use OpenAI, or OPENAI_BASE_URL "
                "(or Context(base_url=...)) to use an OpenAI-compatible server such as vLLM, Ollama "
                "or llama.cpp; choose the model with VERILOOP_MODEL"
            )
        api_key = PLACEHOLDER_API_KEY
    return base_url, api_key


@lru_cache(maxsize=32)
def _cached_llm(
    model: str,
    base_url: str | None,
    api_key: str,
    timeout_s: float,
    max_retries: int,
    prices_env: str | None,
    options: CallOptions,
    structured_output: Dialect | None = None,
) -> OpenAIStructuredLLM:
    # prices_env is only part of the key: the client reads $VERILOOP_PRICES itself.
    return OpenAIStructuredLLM(
        model=model,
        api_key=api_key,
        base_url=base_url,
        timeout_s=timeout_s,
        max_retries=max_retries,
        options=options,
        structured_output=structured_output,
    )


def clear_llm_cache() -> None:
    """Forget cached clients, learned dialects and the models that refused reasoning_effort (after
    changing the environment, or between tests)."""
    _cached_llm.cache_clear()
    forget_rejections()
    forget_dialects()
