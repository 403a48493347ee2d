"""Reasoning effort and the output-token cap: which models get them, and the fallback when one refuses.

``reasoning_effort`` goes out spelled as the ``openai`` SDK spells it, only to
models that accept it. Which ones do is known for OpenAI's families (the table
below); for any other name it is sent when configured, and a model that answers
HTTP 400 about it is remembered per endpoint and model, so only its first call
pays the rejected request. Verification, when nothing is configured, asks for
the highest effort its model supports (the seed's "thinking level high").

:func:`with_call_options` wraps an I/O-free exchange of
:mod:`veriloop.llm.openai_client`: it adds the options to every request and
retries a request once without ``reasoning_effort`` when the server rejects it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import openai

from veriloop.context import HIGHEST_EFFORT_PURPOSES
from veriloop.llm.dialects import dialect_of
from veriloop.schemas.usage import Purpose

log = logging.getLogger(__name__)

# Longest prefix wins. None: the model does not take reasoning_effort at all.
_HIGHEST_EFFORT: dict[str, str | None] = {
    "gpt-3.5": None,
    "gpt-4": None,  # gpt-4, gpt-4o, gpt-4.1 and their minis
    "chatgpt-4o": None,
    "o1-mini": None,
    "o1-preview": None,
    "o1": "high",
    "o3": "high",
    "o4-mini": "high",
    "gpt-oss": "high",
    "gpt-5": "high",
    "gpt-5-chat": None,
    "gpt-5-pro": "high",
    "gpt-5.1": "high",
    "gpt-5.1-chat": None,
    "gpt-5.1-codex-max": "xhigh",
    "gpt-5.2": "xhigh",
    "gpt-5.2-chat": None,
}

_rejected: set[tuple[str, str]] = set()
_rejected_lock = threading.Lock()


def _known(model: str) -> tuple[bool, str | None]:
    """(whether the model's family is in the table, its highest effort)."""
    name = model.rsplit("/", 1)[-1].lower()  # "openai/gpt-oss-20b" as vLLM names it
    matches = [prefix for prefix in _HIGHEST_EFFORT if name.startswith(prefix)]
    if not matches:
        return False, None
    return True, _HIGHEST_EFFORT[max(matches, key=len)]


def effort_for(purpose: Purpose | None, model: str, configured: str | None) -> str | None:
    """The ``reasoning_effort`` to send for ``purpose`` on ``model``; None leaves the parameter out.

    A configured effort goes to any model not known to refuse it; unconfigured, only the purposes in
    :data:`~veriloop.context.HIGHEST_EFFORT_PURPOSES` get one, the highest of a known model.
    """
    known, highest = _known(model)
    if configured is not None:
        return None if known and highest is None else configured
    if purpose in HIGHEST_EFFORT_PURPOSES:
        return highest
    return None


@dataclass(frozen=True)
class CallOptions:
    """What every request of one client carries besides model and messages."""

    reasoning_effort: str | None = None
    max_tokens: int | None = None


def rejected_effort(endpoint: str, model: str) -> bool:
    """Whether ``model`` at ``endpoint`` has answered 400 to ``reasoning_effort`` before."""
    with _rejected_lock:
        return (endpoint, model) in _rejected


def forget_rejections() -> None:
    """Forget which models refused reasoning_effort (with the client cache, between tests)."""
    with _rejected_lock:
        _rejected.clear()


def _rejects_effort(exc: openai.BadRequestError) -> bool:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body) if isinstance(body.get("error", body), dict) else {}
    text = f"{exc.param or ''} {error.get('param') or ''} {error.get('message') or exc.message}"
    # OpenAI names the parameter; other servers say the model does not reason or think.
    return any(word in text.lower() for word in ("reasoning", "thinking"))


def _token_cap(request: dict[str, Any], max_tokens: int | None) -> dict[str, Any]:
    """The cap as the request's server reads it: llama-cpp-python's server (the only one speaking
    ``json_object_schema``) knows only ``max_tokens`` and ignores ``max_completion_tokens``, which
    OpenAI's reasoning models require instead."""
    if max_tokens is None:
        return {}
    if dialect_of(request) == "json_object_schema":
        return {"max_tokens": max_tokens}
    return {"max_completion_tokens": max_tokens}


def with_call_options(exchange: Any, options: CallOptions, endpoint: str, model: str) -> Any:
    """``exchange`` with ``options`` added to each request; a rejected effort is dropped and remembered.

    The request the server refused for ``reasoning_effort`` is sent again without it, once; every
    other answer or error goes to ``exchange`` unchanged.
    """
    try:
        request = next(exchange)
        while True:
            effort = options.reasoning_effort
            if effort is not None and rejected_effort(endpoint, model):
                effort = None
            sent = {**request, **_token_cap(request, options.max_tokens)}
            if effort is not None:
                sent["reasoning_effort"] = effort
            try:
                response = yield sent
            except openai.BadRequestError as exc:
                if effort is not None and _rejects_effort(exc):
                    with _rejected_lock:
                        _rejected.add((endpoint, model))
                    log.warning(
                        "%s at %s rejected reasoning_effort=%s; leaving it out from now on",
                        model,
                        endpoint,
                        effort,
                    )
                    continue  # the same request again, without the effort
                request = exchange.throw(exc)
            except Exception as exc:
                request = exchange.throw(exc)
            else:
                request = exchange.send(response)
    except StopIteration as done:
        return done.value
