"""A recording proxy on loopback: forwards chat completions to a real OpenAI-compatible server and
records every exchange (purpose, dialect, status, whether the answer is valid for the schema asked).

It is an independent witness of the model boundary for the ``live_local`` test tier and the local
model benchmark: veriloop talks to the proxy exactly as to the server, and the proxy judges each
answer against the JSON schema the request carried, without veriloop's own parsing::

    with RecordingProxy("http://127.0.0.1:8080/v1") as proxy:
        ...  # point Context(base_url=proxy.base_url) at it
        assert all(e.valid for e in proxy.exchanges if e.status == 200)
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jsonschema

from veriloop.llm.dialects import Dialect, dialect_of, loads_lenient
from veriloop.llm.openai_client import PURPOSE_HEADER

_FORWARDED_HEADERS = ("content-type", "authorization", PURPOSE_HEADER.lower())


@dataclass(frozen=True)
class Exchange:
    """One chat completion as the proxy saw it."""

    purpose: str | None
    dialect: Dialect | None
    status: int
    valid: bool | None
    """The answer parsed (leniently) and matched the requested schema; None when not a 200 answer."""
    strict_json: bool | None
    """The answer parsed as JSON without leniency (no raw control characters); None when not a 200."""
    problem: str | None = None
    """Why the answer is not valid, or the error body of a non-200 answer (first 300 characters)."""
    truncated: bool = False
    """The model stopped at its token limit (``finish_reason`` ``length``): an answer cut short."""


class RecordingProxy:
    """Forward ``/v1/...`` to ``upstream`` (an OpenAI-compatible base URL ending in ``/v1``) and record."""

    def __init__(self, upstream: str, *, timeout_s: float = 600.0) -> None:
        self.upstream = upstream.rstrip("/")
        self._client = httpx.Client(timeout=timeout_s)
        self._lock = threading.Lock()
        self._exchanges: list[Exchange] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> RecordingProxy:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        self._client.close()

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "RecordingProxy is not running; call start()"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def exchanges(self) -> list[Exchange]:
        """Every chat completion forwarded so far, in order (a copy)."""
        with self._lock:
            return list(self._exchanges)

    def _record(self, exchange: Exchange) -> None:
        with self._lock:
            self._exchanges.append(exchange)


def judge(
    request: dict[str, Any], status: int, body: bytes, purpose: str | None = None
) -> Exchange:
    """The record of one exchange: is the answer the JSON the request's dialect and schema ask for?"""
    dialect = dialect_of(request)
    if status != 200:
        return Exchange(purpose, dialect, status, None, None, body[:300].decode(errors="replace"))
    try:
        choice = json.loads(body)["choices"][0]
        message = choice["message"]
        truncated = choice.get("finish_reason") == "length"
        if dialect == "tool_call":
            text = message["tool_calls"][0]["function"]["arguments"]
        else:
            text = message.get("content") or ""
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        return Exchange(purpose, dialect, status, False, False, f"not a chat completion: {exc!r}")
    try:
        json.loads(text)
        strict = True
    except ValueError:
        strict = False
    try:
        value = loads_lenient(text)
        schema = _requested_schema(request, dialect)
        if schema is not None:
            jsonschema.validate(value, schema)
    except (ValueError, jsonschema.ValidationError) as exc:
        problem = str(exc).splitlines()[0][:200]
        return Exchange(
            purpose, dialect, status, False, strict, f"{problem}: {text[:100]!r}", truncated
        )
    return Exchange(purpose, dialect, status, True, strict, None, truncated)


def _requested_schema(request: dict[str, Any], dialect: Dialect | None) -> dict[str, Any] | None:
    response_format = request.get("response_format") or {}
    if dialect == "json_schema":
        return response_format["json_schema"]["schema"]
    if dialect == "json_object_schema":
        return response_format["schema"]
    if dialect == "tool_call":
        return request["tools"][0]["function"]["parameters"]
    return None


def _handler(proxy: RecordingProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the exchanges are the log."""

        def do_GET(self) -> None:
            self._forward(None)

        def do_POST(self) -> None:
            self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        def _forward(self, raw: bytes | None) -> None:
            path = self.path.removeprefix("/v1")
            headers = {
                name: value
                for name, value in self.headers.items()
                if name.lower() in _FORWARDED_HEADERS
            }
            try:
                answer = proxy._client.request(
                    self.command, proxy.upstream + path, content=raw, headers=headers
                )
                status, body = answer.status_code, answer.content
                content_type = answer.headers.get("content-type", "application/json")
            except httpx.HTTPError as exc:  # the upstream is down: say so as a 502, like a gateway
                status, content_type = 502, "application/json"
                body = json.dumps({"error": {"message": f"upstream unreachable: {exc!r}"}}).encode()
            if raw is not None and path.rstrip("/") == "/chat/completions":
                proxy._record(
                    judge(json.loads(raw), status, body, self.headers.get(PURPOSE_HEADER))
                )
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
