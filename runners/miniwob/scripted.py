"""A scripted model for offline MiniWoB++ runs: a playbook for ``ScriptedModelServer``.

It answers every purpose of the graph from the request it is sent, like a
model would: the goal from the ``User goal:`` line, the page from the
page-data excerpt. It only knows the utterance shapes of
``runners.miniwob.targets`` (click-button, click-link, enter-text and a few
more); on anything else it waits, and the task runs out of budget.

Rewards, claims and the confusion matrix still come from the real pages: the
playbook decides what to do and what to claim, the page decides whether that
was right. ``claim_falsely(goal)`` makes it act on a wrong element (or stop
short) and claim the goal achieved, so a false completion is seen end to end.
"""

from __future__ import annotations

import re
import threading

from pydantic import BaseModel

from veriloop.engines.completion import change_line_numbers
from veriloop.llm.scripted import ANY_PURPOSE, ScriptedModelServer, ScriptedRequest
from veriloop.prompts.page_data import PAGE_DATA_BEGIN, PAGE_DATA_END
from veriloop.runners.miniwob.targets import Element, Step, next_step, parse_page, solve
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
_EXECUTED = re.compile(r"^Action executed: (.+)$", re.MULTILINE)
_AUDITED = re.compile(r"^Action \d+: (.+)$", re.MULTILINE)
"""An action line of the finish audit's trajectory (engines/completion.py: build_trajectory)."""
_PAGE = re.compile(re.escape(PAGE_DATA_BEGIN) + r"\n(.*?)\n" + re.escape(PAGE_DATA_END), re.DOTALL)


def playbook_goal(request: ScriptedRequest) -> str:
    """The user goal a request is about (its ``User goal:`` line, whitespace normalised)."""
    match = _GOAL.search(request.text)
    return " ".join(match.group(1).split()) if match else ""


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
        # goal -> action -> whether it completes the task. Every action issued is kept: with a
        # lookahead, the next action may be chosen before the last one is verified.
        self._issued: dict[str, dict[str, bool]] = {}

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
        goal = playbook_goal(request)
        purpose = request.purpose
        if purpose == "planning":
            return self._plan(goal, request)
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
            return self._audit(goal, request)
        if purpose == "correction":
            return CorrectionChoice(
                strategy="retry_with_delay", thought="Give the page a moment and look again."
            )
        if purpose == "replanning":
            return PlanValidation(valid=True, minor_modifications_only=True)
        if purpose == "critic":
            return CriticReview(review="The plan follows the instruction. <Approved>YES</Approved>")
        raise ValueError(f"the MiniWoB playbook has no answer for purpose {purpose!r}")

    def _plan(self, goal: str, request: ScriptedRequest) -> PlanOutput:
        """One plan step per action the page needs, as a model would plan it; the goal itself when unknown."""
        page = _page(request)
        steps = solve(goal, page) if page is not None else None
        if not steps:
            return PlanOutput(
                steps=[
                    PlannedStep(description=goal, expected_outcome="The page accepts the answer.")
                ]
            )
        return PlanOutput(
            steps=[
                PlannedStep(
                    description=f"Click element {step.element_id}"
                    if step.value is None
                    else f"Type {step.value!r} into element {step.element_id}",
                    expected_outcome="The page accepts the answer."
                    if n == len(steps)
                    else "The page shows the change.",
                )
                for n, step in enumerate(steps, start=1)
            ]
        )

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
            self._issued.setdefault(goal, {})[action] = final
        return ActionChoice(
            thought=f"The instruction names element {step.element_id}.", action=action
        )

    def _verdict(self, goal: str, request: ScriptedRequest) -> SemanticVerdict:
        executed = _EXECUTED.search(request.text)
        with self._lock:
            final = self._issued.get(goal, {}).get(executed.group(1).strip() if executed else "")
        ours = final is not None
        if ours and self._lying(goal):
            # A consistent liar: it cites real changes, and the audit (this playbook too) agrees.
            return SemanticVerdict(
                action_succeeded=True,
                task_completed=True,
                confidence=0.95,
                reason="Scripted false claim: the goal is declared achieved.",
                evidence=change_line_numbers(request.text),
            )
        done = bool(final)
        return SemanticVerdict(
            action_succeeded=True,
            task_completed=done,
            confidence=0.9,
            reason="The final step was carried out and the page changed."
            if done
            else "The page changed as expected.",
            evidence=change_line_numbers(request.text) if done else [],
        )

    def _audit(self, goal: str, request: ScriptedRequest) -> CompletionAudit:
        """Met when the trajectory's last action is one this playbook issued as the final step (the
        liar always agrees with itself)."""
        actions = _AUDITED.findall(request.text)
        with self._lock:
            final = self._issued.get(goal, {}).get(actions[-1].strip() if actions else "")
        met = self._lying(goal) or bool(final)
        return CompletionAudit(
            goal_met=met,
            confidence=0.9,
            reason="The last action was the final step." if met else "Steps remain.",
        )
