"""A scripted model for offline MiniWoB++ runs: a playbook for ``ScriptedModelServer``.

It answers every purpose of the graph from the request it is sent, like a
model would: the goal from the ``User goal:`` line, the page from the
page-data excerpt. It only knows the utterance shapes of
``runners.miniwob_targets`` (click-button, click-link, enter-text and a few
more); on anything else it waits, and the task runs out of budget.

Rewards, claims and the confusion matrix still come from the real pages: the
playbook decides what to do and what to claim, the page decides whether that
was right. ``claim_falsely(goal)`` makes it act on a wrong element (or stop
short) and claim the goal achieved, so a false completion is seen end to end.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from pydantic import BaseModel

from veriloop.engines.completion import change_line_numbers
from veriloop.llm.scripted import ANY_PURPOSE, ScriptedModelServer, ScriptedRequest
from veriloop.prompts.page_data import PAGE_DATA_BEGIN, PAGE_DATA_END
from veriloop.runners.miniwob_targets import Element, Step, next_step, parse_page, solve
from veriloop.schemas.actions import Action
from veriloop.schemas.outputs import (
    ActionChoice,
    CompletionAudit,
    CorrectionChoice,
    CriticReview,
    PlannedStep,
    PlanOutput,
    PlanValidation,
    RefinedStep,
    SemanticVerdict,
)
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR

_GOAL = re.compile(r"^User goal: (.+)$", re.MULTILINE)
_PAGE = re.compile(re.escape(PAGE_DATA_BEGIN) + r"\n(.*?)\n" + re.escape(PAGE_DATA_END), re.DOTALL)


@dataclass(frozen=True)
class _Issued:
    action: str
    final: bool


def _goal(request: ScriptedRequest) -> str:
    match = _GOAL.search(request.text)
    return match.group(1).strip() if match else ""


def _page(request: ScriptedRequest) -> Element | None:
    """The page excerpt: the page-data section that starts with the URL line and holds HTML."""
    for section in reversed(_PAGE.findall(request.text)):
        url, _, html = section.partition("\n")
        if url.startswith(("http://", "https://", "file:")) and "<" in html:
            return parse_page(html)
    return None


def _decoy(page: Element, step: Step) -> Step:
    """Another numbered element of the same kind as the target (a wrong button, a wrong link), else the target."""
    target = step.element_id
    same_tag = [
        el
        for el in page.xpath(f"//*[@id='area']//{step.element.tag}[@{ELEMENT_ID_ATTR}]")
        if el.get(ELEMENT_ID_ATTR) != str(target)
    ]
    return Step(same_tag[0], step.value) if same_tag else step


class MiniWobPlaybook:
    """``ScriptedModelServer`` handler for every purpose (``server.on(ANY_PURPOSE, playbook)``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._false_claims: set[str] = set()
        self._issued: dict[str, _Issued] = {}

    def install(self, server: ScriptedModelServer) -> ScriptedModelServer:
        return server.on(ANY_PURPOSE, self)

    def claim_falsely(self, goal: str) -> None:
        """For this goal: act on a wrong element (or stop short) and claim the goal achieved."""
        with self._lock:
            self._false_claims.add(" ".join(goal.split()))

    def _lying(self, goal: str) -> bool:
        with self._lock:
            return goal in self._false_claims

    def __call__(self, request: ScriptedRequest) -> BaseModel:
        goal = _goal(request)
        purpose = request.purpose
        if purpose == "planning":
            return PlanOutput(
                steps=[
                    PlannedStep(description=goal, expected_outcome="The page accepts the answer.")
                ]
            )
        if purpose == "refinement":
            step = self._choose(goal, request)
            return RefinedStep(
                instruction=goal, target_element_id=step.element_id if step else None
            )
        if purpose == "action":
            return self._action(goal, request)
        if purpose == "verification":
            return self._verdict(goal, request)
        if purpose == "audit":
            return self._audit(goal)
        if purpose == "correction":
            return CorrectionChoice(
                strategy="retry_with_delay", thought="Give the page a moment and look again."
            )
        if purpose == "replanning":
            return PlanValidation(valid=True, minor_modifications_only=True)
        if purpose == "critic":
            return CriticReview(review="The plan follows the instruction. <Approved>YES</Approved>")
        raise ValueError(f"the MiniWoB playbook has no answer for purpose {purpose!r}")

    def _choose(self, goal: str, request: ScriptedRequest) -> Step | None:
        page = _page(request)
        if page is None:
            return None
        step = next_step(goal, page)
        if step is not None and self._lying(goal):
            return _decoy(page, solve(goal, page)[0])
        return step

    def _action(self, goal: str, request: ScriptedRequest) -> ActionChoice:
        step = self._choose(goal, request)
        if step is None or step.element_id is None:
            return ActionChoice(
                thought="I do not know how to do this on this page; waiting.", action="wait(0.5)"
            )
        kind = "click" if step.value is None else "set_value"
        action = str(Action(kind=kind, element_id=step.element_id, text=step.value))
        page = _page(request)
        steps = solve(goal, page) if page is not None else None
        final = bool(steps) and steps[-1].element_id == step.element_id and step.value is None
        with self._lock:
            self._issued[goal] = _Issued(action, final)
        return ActionChoice(
            thought=f"The instruction names element {step.element_id}.", action=action
        )

    def _verdict(self, goal: str, request: ScriptedRequest) -> SemanticVerdict:
        with self._lock:
            issued = self._issued.get(goal)
        ours = issued is not None and issued.action in request.text
        if ours and self._lying(goal):
            # A consistent liar: it cites real changes, and the audit (this playbook too) agrees.
            return SemanticVerdict(
                action_succeeded=True,
                task_completed=True,
                confidence=0.95,
                reason="Scripted false claim: the goal is declared achieved.",
                evidence=change_line_numbers(request.text),
            )
        done = ours and issued.final
        return SemanticVerdict(
            action_succeeded=True,
            task_completed=done,
            confidence=0.9,
            reason="The final step was carried out and the page changed."
            if done
            else "The page changed as expected.",
            evidence=change_line_numbers(request.text) if done else [],
        )

    def _audit(self, goal: str) -> CompletionAudit:
        with self._lock:
            issued = self._issued.get(goal)
        met = self._lying(goal) or (issued is not None and issued.final)
        return CompletionAudit(
            goal_met=met,
            confidence=0.9,
            reason="The last action was the final step." if met else "Steps remain.",
        )
