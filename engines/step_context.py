"""What every step engine shares: the step context (goal, page, last verdict, actions) and a guarded model call."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Generic

from veriloop.engines.dom_context import CompactPage, compact_page
from veriloop.llm.base import AsyncStructuredLLM, LLMOutputError, Message, T
from veriloop.prompts.progress import Situation
from veriloop.schemas.usage import Purpose


@dataclass(frozen=True)
class StepContext:
    """The task as a step engine sees it during one invocation."""

    goal: str
    url: str
    dom: str
    verification: Mapping[str, Any] | None = None
    """This invocation's verdict on the previous action (None when it was not verified)."""
    history: Sequence[str] = ()
    """Recent actions with their verdicts, one line each."""
    max_chars: int = 8000
    """Budget of the page excerpt shown to the model."""

    @cached_property
    def page(self) -> CompactPage:
        """The page parsed once for every prompt and action check of this invocation."""
        return compact_page(self.dom)

    def situation(
        self, *, focus_ids: Iterable[int | None] = (), hints: Iterable[str] = ()
    ) -> Situation:
        """The prompt's shared part, with a page excerpt centred on ``focus_ids`` and ``hints``."""
        excerpt = self.page.excerpt(focus_ids=focus_ids, hints=hints, max_chars=self.max_chars)
        return Situation(self.goal, self.url, excerpt, self.verification, tuple(self.history))


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A structured answer, or None with the reason it was unusable; usage is add_usage-shaped."""

    value: T | None
    usage: dict[str, dict]
    error: str | None = None


async def ask(
    llm: AsyncStructuredLLM, purpose: Purpose, messages: list[Message], schema: type[T]
) -> Answer[T]:
    """One structured call; unusable output (LLMOutputError) becomes an empty answer, LLMUnavailable propagates."""
    try:
        answer = await llm.astructured(purpose, messages, schema)
    except LLMOutputError as exc:
        return Answer(None, exc.usage_update(purpose), str(exc))
    return Answer(answer.value, answer.usage_update(purpose))
