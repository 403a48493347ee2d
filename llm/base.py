"""The model boundary's contract: messages plus a pydantic schema in, a validated instance plus usage
out; and a web search's (one query in, results and usage out)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from veriloop.schemas.usage import Purpose, Usage

T = TypeVar("T", bound=BaseModel)

Message = dict[str, Any]
"""An OpenAI-style chat message: {"role": "system" | "user" | "assistant" | "tool", "content": "...", ...}."""


@dataclass(frozen=True)
class Structured(Generic[T]):
    """One structured call's validated answer and what it cost."""

    value: T
    usage: Usage

    def usage_update(self, purpose: Purpose) -> dict[str, dict]:
        """The ``usage`` state update for this call."""
        return {purpose: self.usage.model_dump()}


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for; ``arguments`` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolTurn:
    """One tool-calling turn: the model's text and/or tool calls, and what it cost."""

    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None

    def usage_update(self, purpose: Purpose) -> dict[str, dict]:
        """The ``usage`` state update for this turn."""
        return {purpose: self.usage.model_dump()}


class LLMError(Exception):
    """A structured call produced no usable answer. Never completes a task."""


class LLMOutputError(LLMError):
    """The model answered, but not with valid output for the schema (garbage, refusal, wrong types)."""

    usage: Usage | None = None
    """What the unusable call cost (set by the client that made it): it counts like any other."""
    reported_usage: Any = None
    """The token counts the provider reported with the unusable answer (read by the client)."""

    def usage_update(self, purpose: Purpose) -> dict[str, dict]:
        """The ``usage`` state update for this failed call (empty when nothing is known)."""
        return {purpose: self.usage.model_dump()} if self.usage is not None else {}


class LLMUnavailable(LLMError):
    """The provider could not be reached or kept failing (timeout, connection, 429, 5xx) after retries.

    Propagates out of the graph so a service can answer 503 and leave the task unchanged.
    """


class StructuredLLM(Protocol):
    """Anything that can make a structured call."""

    def structured(
        self, purpose: Purpose, messages: list[Message], schema: type[T]
    ) -> Structured[T]:
        """Ask for one instance of ``schema``; raise LLMOutputError or LLMUnavailable on failure."""
        ...


class AsyncStructuredLLM(Protocol):
    """Anything that can make a structured call or a tool-calling turn without blocking the event loop."""

    async def astructured(
        self, purpose: Purpose, messages: list[Message], schema: type[T]
    ) -> Structured[T]:
        """Async :meth:`StructuredLLM.structured`."""
        ...

    async def atool_turn(
        self, purpose: Purpose, messages: list[Message], tools: list[dict[str, Any]]
    ) -> ToolTurn:
        """One chat turn offering ``tools`` (OpenAI function-tool dicts); LLMUnavailable on provider trouble."""
        ...


GROUNDING: Purpose = "grounding"
"""The purpose a lookup's usage is counted under (and, for the openai provider, whose model searches)."""


class SearchUnavailable(Exception):
    """The lookup gave no results: the provider is down, refused the key, or answered garbage."""


@dataclass(frozen=True)
class SearchHit:
    """One source: its title, address and the text the provider extracted (may be empty)."""

    title: str
    url: str
    content: str = ""


@dataclass(frozen=True)
class SearchResults:
    """What one lookup found, and what it cost (``usage.by_model`` names the provider's model)."""

    query: str
    hits: list[SearchHit]
    answer: str | None = None
    usage: Usage = field(default_factory=Usage)

    def usage_update(self) -> dict[str, dict]:
        """The ``usage`` state update for this lookup."""
        return {GROUNDING: self.usage.model_dump()}


class SearchProvider(Protocol):
    """Anything that can look one query up without blocking the event loop."""

    name: str

    async def asearch(self, query: str) -> SearchResults:
        """The results for ``query``; SearchUnavailable when there are none to be had."""
        ...
