"""Structured-output dialects: how one endpoint and model is asked for a schema-shaped answer.

Servers that call themselves OpenAI-compatible disagree on how to ask for JSON:

- ``json_schema``: ``response_format={"type": "json_schema", ...}`` (OpenAI, vLLM, Ollama,
  llama.cpp's own ``llama-server``);
- ``json_object_schema``: ``{"type": "json_object", "schema": {...}}`` (llama-cpp-python's
  ``python -m llama_cpp.server``, which turns the schema into a grammar);
- ``json_object``: plain JSON mode, the schema only spelled out in the system message;
- ``tool_call``: one function tool whose parameters are the schema, forced with ``tool_choice``.

A client uses the configured dialect, or else the one learned for its endpoint and model, or
else the richest. A server that rejects a dialect says so in an error body that names
``response_format`` (HTTP 400 from OpenAI-style servers, 422 from FastAPI validation, 500 from
llama-cpp-python); that rejection moves the pair to the next dialect, and the choice is
remembered for the process. Anything else (connection refused, timeouts, a 5xx or 429 that does
not name ``response_format``) is an outage, never a rejection.

Answers are parsed leniently where the content is otherwise valid JSON: a code fence around it,
and raw control characters (newlines, tabs) inside strings, which grammar-constrained local
models emit.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from typing import Any, Literal, get_args

import openai
from pydantic import BaseModel

from veriloop.llm.base import Message

Dialect = Literal["json_schema", "json_object_schema", "json_object", "tool_call"]
"""How a structured answer is requested (see the module docstring)."""
DIALECTS: tuple[Dialect, ...] = get_args(Dialect)
"""Richest first: the order a rejection walks down."""
DEFAULT_DIALECT: Dialect = "json_schema"

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
# A rejection's error body names the request field it refuses; these are the dialect fields.
_DIALECT_FIELDS = ("response_format", "json_schema")
# Error bodies of validation frameworks echo the request under "input": not the server's words.
_ECHO_KEYS = frozenset({"input"})

_learned: dict[tuple[str, str], Dialect] = {}
_learned_lock = threading.Lock()


def parse_dialect(value: str | None) -> Dialect | None:
    """A configured dialect name (None or "" or "auto": detect); ValueError naming the choices otherwise."""
    if value is None or value.strip() in ("", "auto"):
        return None
    name = value.strip()
    if name not in DIALECTS:
        raise ValueError(
            f"unknown structured-output dialect {value!r}; choose one of {', '.join(DIALECTS)} or auto"
        )
    return name  # type: ignore[return-value]


def learned_dialect(endpoint: str, model: str) -> Dialect | None:
    """The dialect this process learned for ``(endpoint, model)`` from a rejection, if any."""
    with _learned_lock:
        return _learned.get((endpoint, model))


def remember_dialect(endpoint: str, model: str, dialect: Dialect) -> None:
    """Use ``dialect`` for ``(endpoint, model)`` from now on in this process."""
    with _learned_lock:
        _learned[(endpoint, model)] = dialect


def forget_dialects() -> None:
    """Forget every learned dialect (tests, or after a server was upgraded in place)."""
    with _learned_lock:
        _learned.clear()


def fallback_after(dialect: Dialect, exc: openai.APIStatusError) -> Dialect | None:
    """The next dialect when ``exc`` is a rejection of ``dialect``; None when it is anything else."""
    position = DIALECTS.index(dialect)
    if position + 1 == len(DIALECTS) or not rejects_dialect(exc):
        return None
    return DIALECTS[position + 1]


def rejects_dialect(exc: openai.APIStatusError) -> bool:
    """Whether an HTTP error (any status) is the server refusing the response format we asked for."""
    if exc.status_code == 429:  # rate limited: an outage whatever the body says
        return False
    text = _error_text(exc).lower()
    return any(name in text for name in _DIALECT_FIELDS)


def _error_text(exc: openai.APIStatusError) -> str:
    """The server's own words in an error: its JSON body without echoed request fields, else its text."""
    try:
        body: Any = exc.response.json()
    except ValueError:
        return exc.response.text
    return json.dumps(_without_echoes(body))


def _without_echoes(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_echoes(v) for k, v in value.items() if k not in _ECHO_KEYS}
    if isinstance(value, list):
        return [_without_echoes(v) for v in value]
    return value


@functools.cache
def function_tool(schema: type[BaseModel]) -> dict[str, Any]:
    """``schema`` as an OpenAI function tool in strict mode, built once per schema: building it walks
    the whole pydantic schema, a cost every model call paid again. Shared: never mutate it."""
    return openai.pydantic_function_tool(schema)


def strict_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The schema as OpenAI's strict mode wants it (all properties required, no extra keys)."""
    return function_tool(schema)["function"]["parameters"]


def request_kwargs(
    dialect: Dialect, messages: list[Message], schema: type[BaseModel]
) -> dict[str, Any]:
    """The ``chat.completions.create`` arguments (besides model and headers) for ``dialect``."""
    name = schema.__name__
    if dialect == "json_schema":
        return {
            "messages": messages,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": strict_schema(schema), "strict": True},
            },
        }
    described = with_schema_instruction(messages, schema)
    if dialect == "json_object_schema":
        return {
            "messages": described,
            "response_format": {"type": "json_object", "schema": strict_schema(schema)},
        }
    if dialect == "json_object":
        return {"messages": described, "response_format": {"type": "json_object"}}
    return {
        "messages": described,
        "tools": [function_tool(schema)],
        "tool_choice": {"type": "function", "function": {"name": name}},
    }


def dialect_of(body: dict[str, Any]) -> Dialect | None:
    """The dialect a chat completion request body speaks (None: it asks for no structured answer)."""
    response_format = body.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "json_schema":
        return "json_schema"
    if kind == "json_object":
        return "json_object_schema" if response_format.get("schema") else "json_object"
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        return "tool_call"
    return None


def answer_text(dialect: Dialect, message: Any) -> str | None:
    """Where ``dialect`` puts the answer: the message content, or the forced tool call's arguments."""
    if dialect != "tool_call":
        return message.content
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        return calls[0].function.arguments
    return message.content  # some servers answer a forced tool call as plain content


def loads_lenient(text: str) -> Any:
    """JSON from model output: a surrounding code fence is dropped, raw control characters in strings allowed.

    Raises ``json.JSONDecodeError`` when the text is not JSON even so.
    """
    content = text.strip()
    fenced = _FENCE.match(content)
    return json.loads(fenced.group(1) if fenced else content, strict=False)


def with_schema_instruction(messages: list[Message], schema: type[BaseModel]) -> list[Message]:
    """The messages with the JSON schema spelled out in the (first) system message."""
    instruction = (
        "Answer with one JSON object only (no prose, no code fence) that validates against this JSON schema:\n"
        + json.dumps(schema.model_json_schema(), separators=(",", ":"))
    )
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": f"{first['content']}\n\n{instruction}"}, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]
