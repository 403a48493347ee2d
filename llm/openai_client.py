"""The default structured-call client, on the ``openai`` SDK (OpenAI or any compatible server).

One structured call = ``chat.completions.parse`` with a strict json_schema
response format built from the pydantic schema. A compatible server that
rejects json_schema with a 400 about ``response_format`` gets JSON mode
instead (the schema described in a system message, the reply validated by
pydantic); the client remembers that and skips json_schema afterwards.

Retries: only the SDK's own (``max_retries``, exponential backoff, honouring
``Retry-After``) for timeouts, connection errors, 429 and 5xx. What is left
after them is :class:`LLMUnavailable`. A reply that is not valid output for the
schema (garbage, refusal, truncation, wrong types) is :class:`LLMOutputError`.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
from openai import OpenAI
from pydantic import ValidationError

from veriloop.llm.base import LLMOutputError, LLMUnavailable, Message, Structured, T
from veriloop.llm.pricing import PriceOverrides, load_prices, usage_for
from veriloop.schemas.usage import Purpose

log = logging.getLogger(__name__)

PURPOSE_HEADER = "X-Veriloop-Purpose"
"""Sent with every request: which graph purpose (planning, verification, ...) the call serves."""

_EXCERPT_CHARS = 200
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


class OpenAIStructuredLLM:
    """:class:`~veriloop.llm.base.StructuredLLM` over the ``openai`` SDK."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        prices: PriceOverrides | None = None,
    ) -> None:
        self.model = model
        self.prices = load_prices(prices)
        """USD per 1M tokens: defaults, then $VERILOOP_PRICES, then ``prices``."""
        # The SDK's retries (exponential backoff, Retry-After) are the only retry layer.
        self.client = OpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=max_retries
        )
        self.json_mode = False
        """True once the server rejected json_schema: every later call uses JSON mode."""

    def structured(
        self, purpose: Purpose, messages: list[Message], schema: type[T]
    ) -> Structured[T]:
        """Ask for one ``schema`` instance; LLMOutputError for bad output, LLMUnavailable for provider trouble."""
        started = time.perf_counter()
        with provider_errors(purpose, self.model):
            value, completion = self._call(messages, schema, {PURPOSE_HEADER: purpose})
        usage = usage_for(
            self.model,
            completion.usage.prompt_tokens if completion.usage else 0,
            completion.usage.completion_tokens if completion.usage else 0,
            self.prices,
        )
        usage.latency_ms = round((time.perf_counter() - started) * 1000, 3)
        return Structured(value=value, usage=usage)

    def _call(
        self, messages: list[Message], schema: type[T], headers: dict[str, str]
    ) -> tuple[T, Any]:
        if not self.json_mode:
            try:
                raw = self.client.chat.completions.with_raw_response.parse(
                    model=self.model,
                    messages=messages,
                    response_format=schema,
                    extra_headers=headers,
                )
            except openai.BadRequestError as exc:
                if not _rejects_json_schema(exc):
                    raise
                log.warning(
                    "%s rejected json_schema (%s); using JSON mode from now on",
                    self.model,
                    _api_message(exc),
                )
                self.json_mode = True
            else:
                return _parsed(raw, schema)
        completion = self.client.chat.completions.create(
            model=self.model,
            messages=_with_schema_instruction(messages, schema),
            response_format={"type": "json_object"},
            extra_headers=headers,
        )
        return _validated(completion, schema)


@contextmanager
def provider_errors(purpose: str, model: str) -> Iterator[None]:
    """Turn the openai SDK's transport and HTTP errors (left after its retries) into LLMUnavailable."""
    try:
        yield
    except openai.APIStatusError as exc:
        raise LLMUnavailable(
            f"{purpose}: model provider answered HTTP {exc.status_code} for {model!r}: {_api_message(exc)}"
        ) from exc
    except openai.APIConnectionError as exc:  # includes APITimeoutError
        raise LLMUnavailable(
            f"{purpose}: model provider unreachable for {model!r} ({type(exc).__name__}: {exc})"
        ) from exc


def _parsed(raw: Any, schema: type[T]) -> tuple[T, Any]:
    """The SDK-parsed value of a json_schema call and its completion; failures become LLMOutputError."""
    try:
        completion = raw.parse()
    except (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as exc:
        raise LLMOutputError(
            f"{schema.__name__}: no complete answer ({type(exc).__name__})"
        ) from exc
    except ValidationError as exc:
        raise invalid_output(schema, _raw_content(raw), exc) from exc
    message = completion.choices[0].message
    if message.refusal:
        raise _refused(schema, message.refusal)
    if message.parsed is None:
        raise invalid_output(schema, message.content)
    return message.parsed, completion


def _validated(completion: Any, schema: type[T]) -> tuple[T, Any]:
    """A JSON-mode reply validated against ``schema``, and its completion."""
    choice = completion.choices[0]
    if choice.message.refusal:
        raise _refused(schema, choice.message.refusal)
    if choice.finish_reason in ("length", "content_filter"):
        raise LLMOutputError(
            f"{schema.__name__}: no complete answer (finish_reason={choice.finish_reason})"
        )
    content = (choice.message.content or "").strip()
    fenced = _FENCE.match(content)  # local models often wrap JSON mode output in a code fence
    try:
        return schema.model_validate_json(fenced.group(1) if fenced else content), completion
    except ValidationError as exc:
        raise invalid_output(schema, content, exc) from exc


def _refused(schema: type, refusal: str) -> LLMOutputError:
    return LLMOutputError(f"{schema.__name__}: the model refused: {refusal[:_EXCERPT_CHARS]!r}")


def invalid_output(
    schema: type, content: str | None, exc: Exception | None = None
) -> LLMOutputError:
    """The error for output that is not a valid ``schema``: the first validation problem and 200 characters of output."""
    excerpt = (content or "")[:_EXCERPT_CHARS]
    detail = ""
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        detail = f" ({where + ': ' if where else ''}{first['msg']})"
    elif exc is not None:
        detail = f" ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    return LLMOutputError(
        f"{schema.__name__}: model output is not a valid {schema.__name__}{detail}: {excerpt!r}"
    )


def _raw_content(raw: Any) -> str | None:
    try:
        return raw.http_response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return raw.http_response.text


def _with_schema_instruction(messages: list[Message], schema: type) -> list[Message]:
    """The messages with the JSON schema spelled out in the (first) system message."""
    instruction = (
        "Answer with one JSON object only (no prose, no code fence) that validates against this JSON schema:\n"
        + json.dumps(schema.model_json_schema(), separators=(",", ":"))
    )
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": f"{first['content']}\n\n{instruction}"}, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def _rejects_json_schema(exc: openai.BadRequestError) -> bool:
    text = f"{exc.param or ''} {_api_message(exc)}".lower()
    return "response_format" in text or "json_schema" in text


def _api_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return exc.message
