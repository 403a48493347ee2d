"""The default structured-call client, on the ``openai`` SDK (OpenAI or any compatible server).

One structured call = one chat completion request in the endpoint's
structured-output dialect (:mod:`veriloop.llm.dialects`: strict json_schema
first; a server that rejects it steps down to json_object with a schema,
plain JSON mode, a forced tool call, and the choice is remembered per
endpoint and model). The reply is parsed leniently and validated by pydantic.

Retries: only the SDK's own (``max_retries``, exponential backoff, honouring
``Retry-After``) for timeouts, connection errors, 429 and 5xx. What is left
after them is :class:`LLMUnavailable`. A reply that is not valid output for the
schema (garbage, refusal, truncation, wrong types) is :class:`LLMOutputError`.

Sync and async share one I/O-free core: an *exchange* is a generator that
yields chat completion requests (the ``chat.completions.create`` arguments)
and receives the HTTP responses (or has the transport's exception thrown into
it), so the dialect fallback, parsing and error mapping
are written once; :meth:`OpenAIStructuredLLM._run` (``OpenAI``) and
:meth:`OpenAIStructuredLLM._arun` (``AsyncOpenAI``) are the two thin transports.
They send each request with the client's own ``request`` (its auth, retries, timeouts
and errors; what ``post`` calls), not ``chat.completions.create``: ``create`` first walks the arguments
against the SDK's typed-params declarations, which have nothing to rename in our
plain message dicts and cost about 1.3 ms of CPU a call (4 ms a step of the service's
~60 ms, docs/service.md).

Tool turns (:meth:`OpenAIStructuredLLM.atool_turn`) are async only: one
chat completion with ``tools=...``; a body that is not a chat
completion (not JSON, no choices) is :class:`LLMUnavailable`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import weakref
from collections.abc import AsyncGenerator, Generator, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import httpx2
import openai
import orjson
from openai import AsyncOpenAI, OpenAI
from openai._models import FinalRequestOptions
from openai.types.chat import ChatCompletion
from pydantic import ValidationError

from veriloop.llm.base import (
    LLMOutputError,
    LLMUnavailable,
    Message,
    Structured,
    T,
    ToolCall,
    ToolTurn,
)
from veriloop.llm.dialects import (
    DEFAULT_DIALECT,
    Dialect,
    answer_text,
    fallback_after,
    learned_dialect,
    loads_lenient,
    remember_dialect,
    request_kwargs,
)
from veriloop.llm.pricing import PriceOverrides, load_prices, usage_for
from veriloop.llm.reasoning import CallOptions, with_call_options
from veriloop.schemas.usage import Purpose, Usage

log = logging.getLogger(__name__)

PURPOSE_HEADER = "X-Veriloop-Purpose"
"""Sent with every request: which graph purpose (planning, verification, ...) the call serves."""

_EXCERPT_CHARS = 200

CHAT_COMPLETIONS = "/chat/completions"

Request = dict[str, Any]
"""One request of an exchange: the ``chat.completions.create`` arguments, ``extra_headers`` included."""
Exchange = Generator[Request, httpx2.Response, Any]
"""An I/O-free call: yields requests, is sent each HTTP response (or thrown the transport's error)."""


class OpenAIStructuredLLM:
    """:class:`~veriloop.llm.base.StructuredLLM` and :class:`~veriloop.llm.base.AsyncStructuredLLM`
    over the ``openai`` SDK (``OpenAI`` for sync calls, one ``AsyncOpenAI`` per event loop)."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        prices: PriceOverrides | None = None,
        options: CallOptions | None = None,
        structured_output: Dialect | None = None,
    ) -> None:
        self.model = model
        self.options = options or CallOptions()
        """Reasoning effort and output-token cap sent with every request (see veriloop.llm.reasoning)."""
        self.structured_output = structured_output
        """The configured dialect (never changed by a rejection); None: learn it per endpoint and model."""
        self.prices = load_prices(prices)
        """USD per 1M tokens: defaults, then $VERILOOP_PRICES, then ``prices``."""
        # The SDK's retries (exponential backoff, Retry-After) are the only retry layer.
        self.client = OpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=max_retries
        )
        self._endpoint = str(self.client.base_url)
        """The endpoint half of the (endpoint, model) key dialects are learned under (with the
        SDK's trailing slash); the async clients are made for it too."""
        self._chat = FinalRequestOptions.construct(
            method="post", url=self._endpoint + CHAT_COMPLETIONS.lstrip("/")
        )
        """A chat completion request's options but its body and headers (see :func:`_chat_request`)."""
        self._async_settings = {
            "api_key": api_key,
            "base_url": self._endpoint,
            "timeout": timeout_s,
            "max_retries": max_retries,
        }
        # One AsyncOpenAI per running event loop. Its connection pool (sockets, anyio locks) belongs
        # to the loop it was first used on, and this object is cached by get_llm across loops (each
        # asyncio.run, each test), so a single shared AsyncOpenAI would reuse sockets of a dead loop
        # ("Event loop is closed"). One per call instead was measured at ~40 ms of set-up (the SSL
        # context), against a few ms for a loopback request, and loses keep-alive; per loop pays
        # that once per loop. Each loop's client is closed on that loop when it shuts down (an async
        # generator the loop finalises in shutdown_asyncgens, as asyncio.run and anyio do), so no
        # socket outlives its loop; it is our own HTTP client, not the SDK's wrapper whose __del__
        # would schedule the close of a dead loop's sockets on whatever loop is running at GC time.
        # The SDK's aiohttp backend, not httpx's pool: with a hundred calls in flight httpx checked
        # every pooled socket on each request, and a call cost twice the CPU (docs/service.md).
        # Weak keys plus dropping closed loops on lookup keep the map from growing.
        self._async_clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[AsyncOpenAI, AsyncGenerator[None, None]]
        ] = weakref.WeakKeyDictionary()
        self._async_lock = threading.Lock()

    # -- public calls ----------------------------------------------------------------------

    def structured(
        self, purpose: Purpose, messages: list[Message], schema: type[T]
    ) -> Structured[T]:
        """Ask for one ``schema`` instance; LLMOutputError for bad output, LLMUnavailable for provider trouble."""
        started = time.perf_counter()
        with provider_errors(purpose, self.model), self._charged(started):
            value, completion = self._run(self._structured_exchange(messages, schema, purpose))
        return Structured(value=value, usage=self._usage(completion, started))

    async def astructured(
        self, purpose: Purpose, messages: list[Message], schema: type[T]
    ) -> Structured[T]:
        """Async :meth:`structured`: the same requests, fallback, errors and usage, on ``AsyncOpenAI``."""
        started = time.perf_counter()
        with provider_errors(purpose, self.model), self._charged(started):
            value, completion = await self._arun(
                self._structured_exchange(messages, schema, purpose)
            )
        return Structured(value=value, usage=self._usage(completion, started))

    async def atool_turn(
        self, purpose: Purpose, messages: list[Message], tools: list[dict[str, Any]]
    ) -> ToolTurn:
        """One chat turn offering ``tools`` (OpenAI function-tool dicts).

        LLMUnavailable for provider trouble, including a body that is not a chat completion;
        LLMOutputError for a tool call that names no function.
        """
        started = time.perf_counter()
        with provider_errors(purpose, self.model):
            turn, completion = await self._arun(self._tool_exchange(messages, tools, purpose))
        return ToolTurn(
            content=turn.content,
            tool_calls=turn.tool_calls,
            usage=self._usage(completion, started),
            finish_reason=turn.finish_reason,
        )

    # -- the I/O-free core -----------------------------------------------------------------

    @property
    def dialect(self) -> Dialect:
        """The structured-output dialect of the next call: configured, else learned, else the richest."""
        return (
            self.structured_output or learned_dialect(self._endpoint, self.model) or DEFAULT_DIALECT
        )

    def _structured_exchange(
        self, messages: list[Message], schema: type[T], purpose: str
    ) -> Generator[Request, Any, tuple[T, Any]]:
        """One call in this endpoint's dialect; a rejected dialect (when not configured) steps down once per dialect."""
        dialect = self.dialect
        while True:
            try:
                response = yield {
                    "model": self.model,
                    **request_kwargs(dialect, messages, schema),
                    "extra_headers": {PURPOSE_HEADER: purpose},
                }
            except openai.APIStatusError as exc:
                fallback = None if self.structured_output else fallback_after(dialect, exc)
                if fallback is None:
                    raise
                log.warning(
                    "%s at %s rejected the %s dialect (HTTP %s: %s); using %s from now on",
                    self.model,
                    self._endpoint,
                    dialect,
                    exc.status_code,
                    _api_message(exc)[:_EXCERPT_CHARS],
                    fallback,
                )
                remember_dialect(self._endpoint, self.model, fallback)
                dialect = fallback
            else:
                with _billing(response) as completion:
                    return _validated(completion, schema, dialect)

    def _tool_exchange(
        self, messages: list[Message], tools: list[dict[str, Any]], purpose: str
    ) -> Generator[Request, Any, tuple[ToolTurn, Any]]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "extra_headers": {PURPOSE_HEADER: purpose},
        }
        if tools:  # some compatible servers reject an empty tools list
            kwargs["tools"] = tools
        response = yield kwargs
        with _billing(response) as completion:  # not a chat completion: provider trouble, as above
            return _tool_turn(completion), completion

    def _usage(self, completion: Any, started: float) -> Usage:
        usage = getattr(completion, "usage", None)
        priced = usage_for(
            self.model,
            (getattr(usage, "prompt_tokens", 0) or 0) if usage else 0,
            (getattr(usage, "completion_tokens", 0) or 0) if usage else 0,
            self.prices,
        )
        priced.latency_ms = round((time.perf_counter() - started) * 1000, 3)
        return priced

    @contextmanager
    def _charged(self, started: float) -> Iterator[None]:
        """An unusable answer was still a call: its LLMOutputError carries the call's usage."""
        try:
            yield
        except LLMOutputError as exc:
            exc.usage = self._usage(SimpleNamespace(usage=exc.reported_usage), started)
            raise

    # -- the two transports ----------------------------------------------------------------

    def _run(self, exchange: Exchange) -> Any:
        """Drive ``exchange`` over the sync client."""
        exchange = with_call_options(exchange, self.options, self._endpoint, self.model)
        try:
            request = next(exchange)
            while True:
                try:
                    response = self.client.request(
                        httpx2.Response, _chat_request(self._chat, request)
                    )
                except Exception as exc:
                    request = exchange.throw(exc)
                else:
                    request = exchange.send(response)
        except StopIteration as done:
            return done.value

    async def _arun(self, exchange: Exchange) -> Any:
        """Drive ``exchange`` over this event loop's async client."""
        client = await self._async_client()
        exchange = with_call_options(exchange, self.options, self._endpoint, self.model)
        try:
            request = next(exchange)
            while True:
                try:
                    response = await client.request(
                        httpx2.Response, _chat_request(self._chat, request)
                    )
                except Exception as exc:
                    request = exchange.throw(exc)
                else:
                    request = exchange.send(response)
        except StopIteration as done:
            return done.value

    async def _async_client(self) -> AsyncOpenAI:
        """The AsyncOpenAI of the running event loop (created on first use, closed when the loop shuts down)."""
        loop = asyncio.get_running_loop()
        with self._async_lock:
            entry = self._async_clients.get(loop)
            if entry is not None:
                return entry[0]
            for dead in [other for other in self._async_clients if other.is_closed()]:
                del self._async_clients[dead]
            settings = self._async_settings
            client = AsyncOpenAI(
                **settings, http_client=openai.DefaultAioHttpClient(timeout=settings["timeout"])
            )
            closer = _close_at_loop_shutdown(client)
            self._async_clients[loop] = (client, closer)
        await closer.asend(None)  # registers it with the loop's async generator shutdown
        return client


async def _close_at_loop_shutdown(client: AsyncOpenAI) -> AsyncGenerator[None, None]:
    """Suspends until its loop finalises async generators (``shutdown_asyncgens``), then closes ``client``."""
    try:
        yield
    finally:
        await client.close()


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


def _chat_request(chat: FinalRequestOptions, request: Request) -> FinalRequestOptions:
    """The SDK's options for one chat completion: ``chat`` (method and absolute URL) with the request
    as the JSON content and its headers as headers, for the client's ``request`` (what ``post``
    builds and calls, with the same auth, retries, timeouts and errors).

    The body is written by orjson and sent as ``content`` (the SDK's JSON content type still
    applies): the SDK's own writer, ``json.dumps`` with a custom encoder, took a tenth of a call's
    CPU on a page-sized prompt, orjson about a tenth of that. The options are a copy of ``chat``,
    not ``post``'s ``FinalRequestOptions.construct``, which resolves every default again on each
    call; the URL is absolute, so the SDK does not parse the path and join it to the base URL.
    """
    body = dict(request)
    headers = body.pop("extra_headers", {})
    return chat.model_copy(update={"content": orjson.dumps(body), "headers": headers})


@contextmanager
def _billing(response: httpx2.Response) -> Iterator[ChatCompletion]:
    """The chat completion in ``response``; an LLMOutputError raised on it gets the usage it reported.

    A body that is not a chat completion (an HTTP 200 with HTML, nothing, or JSON without
    choices: a proxy's error page, not a model's answer) is provider trouble, LLMUnavailable.
    The completion is validated by pydantic (its compiled validator: 0.01 ms, where the SDK's
    ``construct`` walked the type annotations in Python for 0.2 ms, three calls a step); a body
    that does not validate is built as the SDK builds it, without validation: a field of an
    unexpected type is the answer's problem, found where the answer is read.
    """
    try:
        body = response.json()
    except ValueError:
        body = None
    choices = body.get("choices") if isinstance(body, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    if not (isinstance(first, dict) and isinstance(first.get("message"), dict)):
        raise LLMUnavailable(
            f"model provider answered HTTP {response.status_code} with a body that is "
            f"not a chat completion: {_body_excerpt(response)!r}"
        )
    try:
        completion = ChatCompletion.model_validate(body)
    except ValidationError:
        completion = ChatCompletion.construct(**body)
    try:
        yield completion
    except LLMOutputError as exc:
        reported = body.get("usage")
        if isinstance(reported, dict):
            exc.reported_usage = SimpleNamespace(
                prompt_tokens=reported.get("prompt_tokens"),
                completion_tokens=reported.get("completion_tokens"),
            )
        raise


def _validated(completion: Any, schema: type[T], dialect: Dialect) -> tuple[T, Any]:
    """The answer of a ``dialect`` reply, parsed leniently and validated against ``schema``, and its completion."""
    choice = completion.choices[0]
    if choice.message.refusal:
        raise _refused(schema, choice.message.refusal)
    if choice.finish_reason in ("length", "content_filter"):
        raise LLMOutputError(
            f"{schema.__name__}: no complete answer (finish_reason={choice.finish_reason})"
        )
    content = answer_text(dialect, choice.message) or ""
    try:
        return schema.model_validate(loads_lenient(content)), completion
    except (ValueError, ValidationError) as exc:  # JSONDecodeError is a ValueError
        raise invalid_output(schema, content, exc) from exc


def _tool_turn(completion: ChatCompletion) -> ToolTurn:
    """The content, tool calls and finish reason of a tool turn (usage filled in later)."""
    choice = completion.choices[0]  # _billing checked that it is a chat completion
    message = choice.message
    calls = []
    for index, call in enumerate(getattr(message, "tool_calls", None) or []):
        function = getattr(call, "function", None)
        name = getattr(function, "name", None)
        if not name:
            raise LLMOutputError(f"tool turn: tool call {index} names no function")
        arguments = getattr(function, "arguments", None)
        calls.append(
            ToolCall(
                id=getattr(call, "id", None) or f"call_{index}",
                name=str(name),
                arguments=arguments if isinstance(arguments, str) else json.dumps(arguments or {}),
            )
        )
    return ToolTurn(
        content=getattr(message, "content", None),
        tool_calls=calls,
        finish_reason=getattr(choice, "finish_reason", None),
    )


def _body_excerpt(response: httpx2.Response) -> str:
    try:
        return response.text[:_EXCERPT_CHARS]
    except Exception:  # only for an error message
        return ""


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


def _api_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return exc.message
