"""Action generation: the model's ActionChoice becomes a valid action on this page, or nothing.

The action model may not end a task. ``finish()`` and ``fail()`` proposed here
are rejected like an action naming an element that is not on the page: only a
verified ``goal_achieved`` completes a task (goal_achieved node) and only a spent
budget or an impossible verdict fails it (correction node). After one rejected
answer the model is asked once more with the reason; a second rejection leaves
no action, and the graph hands over to correction.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from veriloop.engines.dom_context import hint_words
from veriloop.engines.step_context import StepContext, ask
from veriloop.llm.base import AsyncStructuredLLM
from veriloop.prompts.actions import action_messages, rejection_message
from veriloop.schemas.actions import Action, ActionParseError, parse_action
from veriloop.schemas.outputs import ActionChoice
from veriloop.schemas.usage import add_usage

ATTEMPTS = 2


class InvalidAction(ValueError):
    """A proposed action that must not be executed on this page."""


@dataclass(frozen=True)
class ActionOutcome:
    """The chosen action (None when every attempt was rejected), why, and what it cost."""

    action: Action | None
    thought: str
    usage: dict[str, dict]
    rejections: list[str] = field(default_factory=list)


def validate_action(text: str, page_ids: Collection[int]) -> Action:
    """Parse ``text`` strictly and check it may be executed on a page with ``page_ids``."""
    try:
        action = parse_action(text)
    except ActionParseError as exc:
        raise InvalidAction(str(exc)) from exc
    if action.is_terminal:
        raise InvalidAction(f"{action} ends the task; only verification decides that")
    if action.element_id is not None and action.element_id not in page_ids:
        raise InvalidAction(f"{action} names element {action.element_id}, which is not on the page")
    return action


async def choose_action(
    llm: AsyncStructuredLLM,
    now: StepContext,
    *,
    instruction: str,
    target_element_id: int | None,
) -> ActionOutcome:
    """Ask for the next action; reject and ask once more; give up (action None) after the second rejection."""
    situation = now.situation(
        focus_ids=[target_element_id], hints=hint_words(instruction, now.goal)
    )
    messages = action_messages(
        situation, instruction=instruction, target_element_id=target_element_id
    )
    usage: dict[str, dict] = {}
    rejections: list[str] = []
    for _ in range(ATTEMPTS):
        answer = await ask(llm, "action", messages, ActionChoice)
        usage = add_usage(usage, answer.usage)
        if answer.value is None:
            problem = f"not a valid ActionChoice ({answer.error})"
        else:
            try:
                return ActionOutcome(
                    validate_action(answer.value.action, now.page.element_ids),
                    answer.value.thought,
                    usage,
                    rejections,
                )
            except InvalidAction as exc:
                problem = str(exc)
        rejections.append(problem)
        messages = [*messages, rejection_message(problem)]
    return ActionOutcome(None, "No valid action: " + "; ".join(rejections), usage, rejections)
