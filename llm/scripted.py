"""A scripted OpenAI-compatible chat server on loopback: the model double for tests and the offline demo.

The real ``openai`` client talks to it through ``OPENAI_BASE_URL``, so the code
path under test is the production one (request building, retries, timeouts,
parsing). Answers are scripted per purpose, read from the ``X-Veriloop-Purpose``
header (or, without it, the json_schema name)::

    with ScriptedModelServer() as server:
        server.script("verification", SemanticVerdict(...), "not json")  # FIFO queue
        server.on("action", lambda req: ActionChoice(thought="t", action="click(3)"))
        server.on(ANY_PURPOSE, playbook)          # catch-all for every other purpose
        ...  # point OPENAI_BASE_URL at server.base_url
        assert server.calls("verification") == 2

An answer is a pydantic model (sent as its JSON), a dict (JSON), a str (sent
raw as the message content: garbage on purpose), :class:`Fail` (an HTTP
error), :class:`Delay` (answer late), :class:`Refusal` (a model refusal),
:class:`Truncated` (cut off by the token limit), :class:`ToolCalls` (an
assistant message with ``tool_calls``) or :class:`RawBody` (an HTTP body that
is not a chat completion at all).
A request with nothing scripted gets HTTP 400 "no scripted answer for purpose
X" (the SDK does not retry a 400) and is listed in ``.unscripted``.

Tool calling: a request's ``tools`` lists the function names offered, and its
``messages`` are the conversation as sent, assistant messages with
``tool_calls`` (``content`` may be null) and ``{"role": "tool",
"tool_call_id", "content"}`` results included, so a handler can read what the
tools answered::

    def agent(req):
        if not any(m["role"] == "tool" for m in req.messages):
            return ToolCalls([("write_file", {"path": "a.txt", "content": "hi"})])
        return ToolCalls([("mark_step", {"notes": "[SUCCESS]: wrote a.txt"})])

``ToolCalls`` ids are ``call_<n>``, n counting the conversation's tool calls
from 1 (so they are unique within a conversation and deterministic).

``POST /v1/responses`` (the Responses API, which web search uses) is served from
the same scripts: its ``input`` is the request's one user message, a str answer
becomes the output text, and a dict answer is sent as the whole response object
(to script ``web_search_call`` items and ``url_citation`` annotations).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import socket
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import BaseModel

from veriloop.llm.dialects import Dialect, dialect_of
from veriloop.llm.openai_client import PURPOSE_HEADER

ANY_PURPOSE = "*"
"""Key of the catch-all handler: ``server.on(ANY_PURPOSE, fn)`` answers every purpose without its own script."""


@dataclass(frozen=True)
class Fail:
    """Answer with an HTTP error (500, 503 and 429 are retried by the SDK; 400 is not).

    ``retry_after_s`` sends a ``retry-after-ms`` header, which the SDK honours
    instead of its own exponential backoff (keeps retry tests fast).
    """

    status: int = 500
    message: str = "scripted failure"
    retry_after_s: float | None = None


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` before giving ``answer`` (longer than the client timeout -> a timeout)."""

    seconds: float
    answer: Any


@dataclass(frozen=True)
class Refusal:
    """A model refusal: ``message.refusal`` set, no content."""

    message: str = "I can't help with that."


@dataclass(frozen=True)
class Truncated:
    """A reply cut off by the token limit: ``content`` with ``finish_reason="length"``."""

    content: str = '{"thought": "'


@dataclass(frozen=True)
class ToolCalls:
    """An assistant message calling tools: ``calls`` are (name, arguments) pairs, ``finish_reason="tool_calls"``.

    Arguments are sent as JSON text; a str is sent as is (malformed arguments on purpose).
    """

    calls: list[tuple[str, dict[str, Any] | str]]
    content: str | None = None


@dataclass(frozen=True)
class RawBody:
    """Answer with this exact HTTP body (not a chat completion): garbage or a malformed completion."""

    body: str
    status: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class ScriptedRequest:
    """One request the server received."""

    purpose: str | None
    schema_name: str | None
    response_format_type: str | None
    messages: list[dict[str, Any]]
    body: dict[str, Any]
    headers: dict[str, str]
    """HTTP headers with lower-case names, e.g. ``headers["x-veriloop-purpose"]``."""
    tools: list[str] = field(default_factory=list)
    """Names of the function tools offered (empty when the request offers none)."""
    endpoint: str = "chat.completions"
    """Which API the request called: ``chat.completions`` or ``responses``."""
    dialect: Dialect | None = None
    """The structured-output dialect asked for (None: no structured answer, e.g. a tool turn)."""

    @property
    def text(self) -> str:
        """All message contents joined, for assertions on prompt text."""
        return "\n".join(_content_text(m.get("content")) for m in self.messages)


Answer = Any
Handler = Callable[[ScriptedRequest], Answer]


@dataclass(frozen=True)
class Span:
    """One request from its arrival to its answer (monotonic seconds)."""

    request: ScriptedRequest
    start: float
    end: float


def critical_path_calls(spans: Sequence[Span]) -> int:
    """The most calls in ``spans`` that ran one after another: the model waits a client sat through.

    Calls that overlap ran side by side and count once; exact when each call takes long enough
    that concurrent calls overlap (answer with a small ``Delay``).
    """
    ordered = sorted(spans, key=lambda span: span.start)
    chain: list[int] = []
    for i, span in enumerate(ordered):
        chain.append(
            1 + max((chain[j] for j in range(i) if ordered[j].end <= span.start), default=0)
        )
    return max(chain, default=0)


class _Server(ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: a burst of concurrent async clients overflows it
    # and the dropped connects come back only after the kernel's 1 s SYN retransmit. 1024 holds a
    # burst of hundreds of tasks' first calls (the kernel caps it at net.core.somaxconn).
    request_queue_size = 1024


@dataclass
class _Script:
    queues: dict[str, deque] = field(default_factory=lambda: defaultdict(deque))
    handlers: dict[str, Handler] = field(default_factory=dict)


class ScriptedModelServer:
    """An OpenAI-compatible ``/v1/chat/completions`` server with scripted answers, on 127.0.0.1."""

    def __init__(
        self,
        *,
        reject_json_schema: bool = False,
        rejections: dict[str, Fail | RawBody] | None = None,
        port: int = 0,
        latency_s: float = 0.0,
    ) -> None:
        self.reject_json_schema = reject_json_schema
        self.rejections: dict[str, Fail | RawBody] = dict(rejections or {})
        """Per dialect name, the error sent instead of an answer (a server that does not speak it)."""
        self.latency_s = latency_s
        """Every answer waits this long first (a model's latency; lets side-by-side calls overlap)."""
        self._address = ("127.0.0.1", port)  # loopback only; port 0 = a free one
        self._lock = threading.Lock()
        self._script = _Script()
        self._requests: list[ScriptedRequest] = []
        self._spans: list[Span] = []
        self._unscripted: list[ScriptedRequest] = []
        self._errors: list[Exception] = []
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: _Server | None = None
        self._in_flight = 0
        self._peak_in_flight = 0
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> ScriptedModelServer:
        """Bind a free port and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _Server(self._address, _make_handler(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        # A short poll interval keeps stop() fast (serve_forever checks for shutdown between polls).
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(0.05,), name="scripted-model-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port (delayed answers are abandoned)."""
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        # Keep-alive connections would otherwise keep their handler threads (and answers) alive.
        with self._lock:
            connections, self._connections = list(self._connections), set()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("ScriptedModelServer is not running; call start()")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, e.g. ``http://127.0.0.1:41234/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting -------------------------------------------------------------------------

    def script(self, purpose: str, *answers: Answer) -> ScriptedModelServer:
        """Queue answers for ``purpose``; each request takes the next one."""
        with self._lock:
            self._script.queues[purpose].extend(answers)
        return self

    def on(self, purpose: str, handler: Handler) -> ScriptedModelServer:
        """Answer ``purpose`` with ``handler(request)`` whenever its queue is empty (``ANY_PURPOSE``: every purpose)."""
        with self._lock:
            self._script.handlers[purpose] = handler
        return self

    def reset(self) -> None:
        """Forget scripts, handlers and recorded requests."""
        with self._lock:
            self._script = _Script()
            self._requests.clear()
            self._spans.clear()
            self._unscripted.clear()
            self._errors.clear()
            self._peak_in_flight = self._in_flight

    @property
    def requests(self) -> list[ScriptedRequest]:
        """Every request received, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def unscripted(self) -> list[ScriptedRequest]:
        """Requests that found no scripted answer (answered with HTTP 400)."""
        with self._lock:
            return list(self._unscripted)

    @property
    def errors(self) -> list[Exception]:
        """Exceptions raised by handlers or by unsendable answers (each answered with HTTP 400)."""
        with self._lock:
            return list(self._errors)

    def calls(self, purpose: str | None = None) -> int:
        """How many requests arrived for ``purpose`` (all purposes when None)."""
        with self._lock:
            return sum(1 for r in self._requests if purpose is None or r.purpose == purpose)

    @property
    def spans(self) -> list[Span]:
        """When each answered request was in flight, in the order they finished (a copy)."""
        with self._lock:
            return list(self._spans)

    @property
    def in_flight(self) -> int:
        """The chat completion requests being answered now."""
        with self._lock:
            return self._in_flight

    @property
    def peak_in_flight(self) -> int:
        """The most chat completion requests being answered at once (since start or the last reset)."""
        with self._lock:
            return self._peak_in_flight

    def pending(self, purpose: str | None = None) -> int:
        """Queued answers not yet consumed (for ``purpose`` or in total)."""
        with self._lock:
            queues = self._script.queues
            return sum(len(q) for p, q in queues.items() if purpose is None or p == purpose)

    # -- serving ---------------------------------------------------------------------------

    def _record(self, request: ScriptedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    @contextlib.contextmanager
    def _answering(self, request: ScriptedRequest) -> Iterator[None]:
        started = time.monotonic()
        with self._lock:
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight, self._in_flight)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                self._spans.append(Span(request, started, time.monotonic()))

    def _next_answer(self, request: ScriptedRequest) -> tuple[bool, Answer]:
        """(found, answer) for a request: its queue first, then its handler, then the catch-all."""
        purpose = request.purpose or ""
        with self._lock:
            queue = self._script.queues.get(purpose)
            if queue:
                return True, queue.popleft()
            handler = self._script.handlers.get(purpose) or self._script.handlers.get(ANY_PURPOSE)
            if handler is None:
                self._unscripted.append(request)
                return False, None
        # Outside the lock: a handler may take its time or inspect the server.
        try:
            return True, handler(request)
        except Exception as exc:  # a broken playbook must show up as a clear, non-retried error
            return True, self._script_error(request, exc)

    def _script_error(self, request: ScriptedRequest, exc: Exception) -> Fail:
        with self._lock:
            self._errors.append(exc)
        return Fail(400, f"scripted answer for purpose {request.purpose!r} failed: {exc!r}")

    def _wait(self, seconds: float) -> bool:
        """Sleep unless the server stops first; True when the full delay elapsed."""
        return not self._stopping.wait(seconds)


def _make_handler(server: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes; without TCP_NODELAY, Nagle plus delayed ACK
        # add ~40 ms to every keep-alive answer.
        disable_nagle_algorithm = True

        def setup(self) -> None:
            super().setup()
            with server._lock:
                server._connections.add(self.connection)

        def finish(self) -> None:
            with server._lock:
                server._connections.discard(self.connection)
            with contextlib.suppress(OSError):
                super().finish()

        def log_message(self, format: str, *args: Any) -> None:
            """Stay quiet: tests assert on ``server.requests`` instead."""

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": [{"id": "scripted", "object": "model", "owned_by": "veriloop"}],
                    },
                )
            else:
                self._send_error(404, f"no route GET {self.path}")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            endpoint = _ENDPOINTS.get(self.path.rstrip("/"))
            if endpoint is None:
                self._send_error(404, f"no route POST {self.path}")
                return
            try:
                body = json.loads(raw or b"{}")
                if endpoint == "responses" and isinstance(body, dict):
                    body = {**body, "messages": _input_messages(body.get("input"))}
                if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                    raise ValueError("body must be a JSON object with a 'messages' list")
            except ValueError as exc:
                self._send_error(400, f"malformed chat completion request: {exc}")
                return
            request = _parse_request(body, {k.lower(): v for k, v in self.headers.items()})
            request = dataclasses.replace(request, endpoint=endpoint)
            server._record(request)
            with server._answering(request):
                self._respond(request, body)

        def _respond(self, request: ScriptedRequest, body: dict) -> None:
            rejection = server.rejections.get(request.dialect or "")
            if rejection is not None:
                self._answer(request, body, rejection)
                return
            if server.reject_json_schema and request.dialect == "json_schema":
                self._send_error(
                    400,
                    "response_format type 'json_schema' is not supported by this server",
                    param="response_format",
                )
                return
            found, answer = server._next_answer(request)
            if server.latency_s > 0:
                answer = Delay(server.latency_s, answer)
            if not found:
                self._send_error(
                    400,
                    f"no scripted answer for purpose {request.purpose!r} (schema {request.schema_name}); "
                    "script one with .script(purpose, ...) or .on(purpose, fn)",
                    code="no_scripted_answer",
                )
                return
            self._answer(request, body, answer)

        def _answer(self, request: ScriptedRequest, body: dict, answer: Answer) -> None:
            while isinstance(answer, Delay):
                if not server._wait(answer.seconds):
                    return
                answer = answer.answer
            if isinstance(answer, Fail):
                headers = {}
                if answer.retry_after_s is not None:
                    headers["retry-after-ms"] = str(int(answer.retry_after_s * 1000))
                self._send_error(answer.status, answer.message, headers=headers)
                return
            if isinstance(answer, RawBody):
                self._send_raw(answer.status, answer.body.encode(), answer.content_type)
                return
            try:
                if request.endpoint == "responses":
                    payload = _response(body, request, answer)
                else:
                    payload = _completion(body, request, answer)
            except TypeError as exc:
                self._answer(request, body, server._script_error(request, exc))
                return
            self._send(200, payload)

        def _send_error(
            self,
            status: int,
            message: str,
            *,
            param: str | None = None,
            code: str | None = None,
            headers: dict[str, str] | None = None,
        ) -> None:
            kind = "server_error" if status >= 500 else "invalid_request_error"
            error = {"message": message, "type": kind, "param": param, "code": code}
            self._send(status, {"error": error}, headers)

        def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
            self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

        def _send_raw(
            self,
            status: int,
            data: bytes,
            content_type: str,
            headers: dict[str, str] | None = None,
        ) -> None:
            try:
                self.send_response(
                    status,
                    HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "",
                )
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout); nothing to tell it

    return Handler


_ENDPOINTS = {"/v1/chat/completions": "chat.completions", "/v1/responses": "responses"}


def _input_messages(value: Any) -> list[dict[str, Any]]:
    """A Responses API ``input`` as chat messages (a str is one user message)."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, dict)]
    raise ValueError("a responses request needs an 'input' string or list")


def _response(body: dict, request: ScriptedRequest, answer: Answer) -> dict:
    """A Responses API object: a dict answer as is, else its text as one output message."""
    if isinstance(answer, dict):
        return answer
    text = _render(answer)
    input_tokens, output_tokens = _tokens(request.text), _tokens(text)
    return {
        "id": f"resp-scripted-{time.monotonic_ns()}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": body.get("model") or "scripted",
        "output": [
            {
                "type": "message",
                "id": "msg-scripted",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": body.get("tools") or [],
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _parse_request(body: dict, headers: dict[str, str]) -> ScriptedRequest:
    response_format = body.get("response_format") or {}
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    schema_name = None
    if kind == "json_schema":
        schema_name = (response_format.get("json_schema") or {}).get("name")
    purpose = headers.get(PURPOSE_HEADER.lower()) or schema_name
    tools = [
        str((tool.get("function") or {}).get("name"))
        for tool in body.get("tools") or []
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict)
    ]
    return ScriptedRequest(
        purpose=purpose,
        schema_name=schema_name,
        response_format_type=kind,
        messages=list(body.get("messages") or []),
        body=body,
        headers=headers,
        tools=tools,
        dialect=dialect_of(body),
    )


def _completion(body: dict, request: ScriptedRequest, answer: Answer) -> dict:
    """A chat.completion object carrying ``answer`` with deterministic usage (about 4 characters a token)."""
    refusal = answer.message if isinstance(answer, Refusal) else None
    finish_reason = "length" if isinstance(answer, Truncated) else "stop"
    tool_calls = None
    if request.dialect == "tool_call" and not isinstance(answer, Refusal | Truncated | ToolCalls):
        # A forced tool call carries the answer as the arguments of the one tool offered.
        answer = ToolCalls([(request.tools[0] if request.tools else "answer", _render(answer))])
    if isinstance(answer, ToolCalls):
        finish_reason = "tool_calls"
        tool_calls = _render_tool_calls(answer, _tool_calls_so_far(request.messages))
        content = answer.content
    else:
        if isinstance(answer, Truncated):
            answer = answer.content
        content = None if refusal is not None else _render(answer)
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    prompt_tokens = _tokens(request.text)
    completion_tokens = _tokens(
        (content or refusal or "")
        + "".join(call["function"]["arguments"] for call in tool_calls or [])
    )
    return {
        "id": f"chatcmpl-scripted-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or "scripted",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _tool_calls_so_far(messages: list[dict[str, Any]]) -> int:
    return sum(
        len(m.get("tool_calls") or [])
        for m in messages
        if isinstance(m, dict) and m.get("role") == "assistant"
    )


def _render_tool_calls(answer: ToolCalls, already: int) -> list[dict[str, Any]]:
    rendered = []
    for offset, call in enumerate(answer.calls, start=1):
        name, arguments = call
        rendered.append(
            {
                "id": f"call_{already + offset}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        )
    return rendered


def _render(answer: Answer) -> str:
    if isinstance(answer, BaseModel):
        return answer.model_dump_json()
    if isinstance(answer, str):
        return answer
    if isinstance(answer, dict | list):
        return json.dumps(answer)
    raise TypeError(f"cannot send a scripted answer of type {type(answer).__name__}")


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def _content_text(content: Any) -> str:
    """Message content as text (plain strings or the list-of-parts form; ``None`` -> "")."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""
