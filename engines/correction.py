"""Correction: retry the step another way, hand over to replanning, or fail the task when its budget is spent.

Strategies, each turned into a protocol action: ``retry_with_delay`` ->
``wait(0.5)`` (doubling on each later retry of the step, so it is never offered
unchanged), ``alternative_element`` -> the failed action on another element,
``scroll_into_view`` -> ``scroll(ID)``, ``refresh_page`` -> ``refresh()``. A strategy tried on a step is identified with its argument
(``alternative_element(170)``) and is not offered again on that step; a choice
that repeats one, or cannot be applied, falls back to the next delayed retry.

The failed action's expected outcome, checked against the page now and the client's own check
(``engines/prediction.py``), reaches the prompt as "Expected: X; observed: Y". When that check
says the expected outcome is there after all (prediction confidence at or above the threshold),
the action did its work and the page was slow to show it: ``alternative_element`` is not offered,
because doing the action again elsewhere would do it twice.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from veriloop.engines.prediction import PredictionCheck
from veriloop.engines.step_context import StepContext, ask
from veriloop.llm.base import AsyncStructuredLLM
from veriloop.prompts.correction import correction_messages
from veriloop.schemas.actions import ELEMENT_KINDS, MAX_WAIT_SECONDS, Action
from veriloop.schemas.outputs import CorrectionChoice

CorrectionMove = Literal["retry", "replan", "fail"]

FIRST_DELAY_S = 0.5


@dataclass(frozen=True)
class CorrectionDecision:
    """What correction does this run, and why (the reason becomes the fail() text)."""

    move: CorrectionMove
    reason: str = ""


@dataclass(frozen=True)
class CorrectionOutcome:
    """The retry action, the strategy it applies (as recorded in tried strategies), and its cost."""

    action: Action
    strategy: str
    thought: str
    usage: dict[str, dict]


class InvalidStrategy(ValueError):
    """A strategy choice that cannot be applied, or repeats one already tried on this step."""


def decide_correction(
    *,
    impossible: bool,
    repeated_action: bool,
    correction_attempts: int,
    replan_count: int,
    steps_taken: int,
    max_corrections: int,
    max_replans: int,
    max_steps: int,
) -> CorrectionDecision:
    """Pure budget logic shared by the correction node and its router (typed flags and counters only)."""
    if impossible:
        return CorrectionDecision("fail", "the page shows the goal cannot be achieved")
    if steps_taken >= max_steps:
        return CorrectionDecision("fail", f"step budget spent ({max_steps} actions)")
    if repeated_action or correction_attempts >= max_corrections:
        if replan_count >= max_replans:
            return CorrectionDecision("fail", f"replan budget spent ({max_replans} replans)")
        return CorrectionDecision(
            "replan", "loop detected" if repeated_action else "correction budget spent"
        )
    return CorrectionDecision("retry")


def retry_delay(tried: Collection[str]) -> float:
    """The next retry_with_delay wait: 0.5 s, then 1 s, 2 s... on the same step."""
    retries = sum(1 for key in tried if key.startswith("retry_with_delay"))
    return min(FIRST_DELAY_S * 2**retries, MAX_WAIT_SECONDS)


def offered_strategies(
    tried: Collection[str], failed_action: Action | None, *, expected_seen: bool = False
) -> list[str]:
    """Lines describing the strategies still available on this step; ``expected_seen``: the
    prediction check found the action's expected outcome on the page."""
    offered = [f"retry_with_delay: wait({retry_delay(tried):g}) and look at the page again"]
    if _accepts_other_element(failed_action) and not expected_seen:
        offered.append(
            f"alternative_element: do {failed_action} on another element (give element_id)"
        )
    offered.append("scroll_into_view: scroll an element into view (give element_id)")
    if "refresh_page" not in tried:
        offered.append("refresh_page: reload the current page")
    return offered


def strategy_action(
    choice: CorrectionChoice,
    *,
    failed_action: Action | None,
    page_ids: Collection[int],
    tried: Collection[str],
    expected_seen: bool = False,
) -> tuple[Action, str]:
    """The action for ``choice`` and its strategy key; InvalidStrategy when it repeats or cannot apply."""
    element = choice.element_id
    if choice.strategy == "alternative_element" and expected_seen:
        raise InvalidStrategy(
            "the expected outcome is on the page: doing the action elsewhere would do it twice"
        )
    if choice.strategy == "retry_with_delay":
        delay = retry_delay(tried)
        action, key = Action(kind="wait", seconds=delay), f"retry_with_delay({delay:g})"
    elif choice.strategy == "alternative_element":
        if not _accepts_other_element(failed_action) or element in (None, failed_action.element_id):
            raise InvalidStrategy(
                "alternative_element needs a failed element action and another element"
            )
        action, key = (
            failed_action.model_copy(update={"element_id": element}),
            f"alternative_element({element})",
        )
    elif choice.strategy == "scroll_into_view":
        if element is None and failed_action is not None:
            element = failed_action.element_id
        if element is None:
            raise InvalidStrategy("scroll_into_view needs an element")
        action, key = Action(kind="scroll", element_id=element), f"scroll_into_view({element})"
    elif choice.strategy == "refresh_page":
        action, key = Action(kind="refresh"), "refresh_page"
    else:
        raise InvalidStrategy(
            f"{choice.strategy} is not offered: failing is decided by the budgets"
        )
    if key in tried:
        raise InvalidStrategy(f"{key} was already tried on this step")
    if action.element_id is not None and action.element_id not in page_ids:
        raise InvalidStrategy(f"element {action.element_id} is not on the page")
    return action, key


async def choose_correction(
    llm: AsyncStructuredLLM,
    now: StepContext,
    *,
    failed_action: Action | None,
    problem: str,
    tried: list[str],
    prediction: PredictionCheck | None = None,
    observed: list[str] | None = None,
) -> CorrectionOutcome:
    """Ask for a strategy among those not yet tried; fall back to the next delayed retry.
    ``prediction``: the verified action's expected outcome checked against the page now;
    ``observed``: what verification saw."""
    focus = [failed_action.element_id] if failed_action is not None else []
    expected_seen = prediction is not None and prediction.verdict.success
    messages = correction_messages(
        now.situation(focus_ids=focus),
        failed_action=str(failed_action) if failed_action is not None else None,
        problem=problem,
        expectation=prediction.lines(observed or []) if prediction is not None else [],
        offered=offered_strategies(tried, failed_action, expected_seen=expected_seen),
        tried=tried,
    )
    answer = await ask(llm, "correction", messages, CorrectionChoice)
    if answer.value is None:
        return _fallback(tried, f"unusable correction answer ({answer.error})", answer.usage)
    try:
        action, key = strategy_action(
            answer.value,
            failed_action=failed_action,
            page_ids=now.page.element_ids,
            tried=tried,
            expected_seen=expected_seen,
        )
    except InvalidStrategy as exc:
        return _fallback(tried, str(exc), answer.usage)
    return CorrectionOutcome(action, key, answer.value.thought, answer.usage)


def _fallback(tried: Collection[str], why: str, usage: dict[str, dict]) -> CorrectionOutcome:
    delay = retry_delay(tried)
    return CorrectionOutcome(
        Action(kind="wait", seconds=delay),
        f"retry_with_delay({delay:g})",
        f"Retrying after a delay: {why}",
        usage,
    )


def _accepts_other_element(action: Action | None) -> bool:
    return action is not None and action.kind in ELEMENT_KINDS
