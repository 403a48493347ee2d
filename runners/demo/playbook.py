"""The offline demo's model: a playbook that answers each purpose from what the request shows.

It runs behind :class:`~veriloop.llm.scripted.ScriptedModelServer`, so the agent
uses the real ``openai`` client and the real graph. Every answer is read off
the request: which demo goal it is about (the goal text), what the page
excerpt contains (element ids, field values), what the observation list says.
On the first task it makes one deliberate mistake (clicking the Patients tab
that is already open), so the run shows a no-change failure caught without a
verification model call, then corrected.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from lxml import html as lxml_html

from veriloop.engines.completion import change_line_numbers
from veriloop.llm.scripted import ScriptedModelServer, ScriptedRequest
from veriloop.prompts.page_data import PAGE_DATA_BEGIN, PAGE_DATA_END
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

ADD_PATIENT = "Add a patient named Jas"
SEARCH_PATIENT = "Search the patient records for Maria"
DARK_THEME = "Change the theme setting to Dark"

SCRIPTED_NOTES = {
    ADD_PATIENT: (
        "A deliberate mistake, to show the no-change check: the scripted playbook first clicks the "
        "Patients tab, which is already open. Nothing changes, so the next step fails that click "
        "without asking the model (confidence 0.20) and the agent corrects itself."
    )
}
"""What the scripted demo does on purpose, by goal: the console and the report say it."""

_PAGE_SECTION = re.compile(
    r"Current page \(URL and excerpt\):\s*"
    + re.escape(PAGE_DATA_BEGIN)
    + r"\n(.*?)\n"
    + re.escape(PAGE_DATA_END),
    re.DOTALL,
)
_GOAL = re.compile(r"^User goal: (.+)$", re.MULTILINE)
_STEP = re.compile(r"^Current step: (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class Element:
    """A numbered element of the page excerpt."""

    vid: int
    value: str


class PageExcerpt:
    """The numbered elements of the excerpt in a request, by their HTML id."""

    def __init__(self, request: ScriptedRequest) -> None:
        sections = _PAGE_SECTION.findall(request.text)
        self.elements: dict[str, Element] = {}
        if not sections:
            return
        root = lxml_html.fromstring(f"<div>{sections[-1]}</div>")
        for el in root.iter():
            if isinstance(el.tag, str) and el.get(ELEMENT_ID_ATTR) and el.get("id"):
                value = el.get("value") or ""
                if el.tag == "select":
                    chosen = el.xpath(".//option[@selected]")
                    value = chosen[0].get("value", "") if chosen else value
                self.elements[el.get("id")] = Element(int(el.get(ELEMENT_ID_ATTR)), value)

    def id(self, html_id: str) -> int:
        element = self.elements.get(html_id)
        if element is None:
            raise LookupError(f"the page excerpt has no visible #{html_id}")
        return element.vid

    def value(self, html_id: str) -> str | None:
        element = self.elements.get(html_id)
        return None if element is None else element.value


@dataclass(frozen=True)
class Task:
    """One demo goal: its plan, how to act on a page, and what in the observations means it is done."""

    goal: str
    steps: tuple[str, ...]
    done_marker: str
    next_action: Callable[[PageExcerpt], tuple[str, str]]


def _add_patient(page: PageExcerpt) -> tuple[str, str]:
    name = page.value("patient-name")
    if name is None:
        return "Open the New Patient form", f"click({page.id('new-patient')})"
    if name != "Jas":
        return 'Type "Jas" into Full name', f'setValue({page.id("patient-name")}, "Jas")'
    return "Save the new patient", f"click({page.id('save-patient')})"


def _search(page: PageExcerpt) -> tuple[str, str]:
    if page.value("search") != "Maria":
        return 'Type "Maria" into the search box', f'setValue({page.id("search")}, "Maria")'
    return "Run the search", f"click({page.id('search-button')})"


def _dark_theme(page: PageExcerpt) -> tuple[str, str]:
    if page.value("theme") is None:
        return "Open the Settings tab", f"click({page.id('tab-settings')})"
    return "Choose Dark in the Theme dropdown", f'selectOption({page.id("theme")}, "Dark")'


TASKS = (
    Task(ADD_PATIENT, ("Open the New Patient form", "Enter the name Jas", "Save the patient"),
         "Patient Jas saved", _add_patient),
    Task(SEARCH_PATIENT, ("Type Maria into the search box", "Run the search"), "patient matching", _search),
    Task(DARK_THEME, ("Open the Settings tab", "Choose Dark as the theme"), "Settings saved", _dark_theme),
)  # fmt: skip


class DemoPlaybook:
    """Answers planning, refinement, action, verification, correction and replanning for the demo goals."""

    def __init__(self) -> None:
        self.mistake_made = False

    def install(self, server: ScriptedModelServer) -> ScriptedModelServer:
        handlers = {
            "planning": self.plan,
            "refinement": self.refine,
            "action": self.act,
            "verification": self.verify,
            "audit": self.audit,
            "correction": self.correct,
            "replanning": self.replan,
            "critic": lambda _request: CriticReview(review="Looks right. <Approved>YES</Approved>"),
        }
        for purpose, handler in handlers.items():
            server.on(purpose, handler)
        return server

    def plan(self, request: ScriptedRequest) -> PlanOutput:
        task = _task(request)
        return PlanOutput(steps=[PlannedStep(description=step) for step in task.steps])

    def refine(self, request: ScriptedRequest) -> RefinedStep:
        found = _STEP.search(request.text)
        return RefinedStep(instruction=found.group(1) if found else _task(request).steps[0])

    def act(self, request: ScriptedRequest) -> ActionChoice:
        task = _task(request)
        page = PageExcerpt(request)
        if (
            task.goal == ADD_PATIENT
            and not self.mistake_made
            and page.value("patient-name") is None
        ):
            # The deliberate mistake: the Patients tab is already open, so this click changes nothing.
            self.mistake_made = True
            return ActionChoice(
                thought="Deliberate no-op (the Patients tab is already open) to show the no-change check",
                action=f"click({page.id('tab-patients')})",
            )
        thought, action = task.next_action(page)
        return ActionChoice(thought=thought, action=action)

    def verify(self, request: ScriptedRequest) -> SemanticVerdict:
        task = _task(request)
        done = task.done_marker in request.text
        reason = (
            f"The page confirms it: '{task.done_marker}'"
            if done
            else "The step worked; the goal is not done yet"
        )
        return SemanticVerdict(
            action_succeeded=True,
            task_completed=done,
            confidence=0.9,
            reason=reason,
            evidence=change_line_numbers(request.text, task.done_marker) if done else [],
        )

    def audit(self, request: ScriptedRequest) -> CompletionAudit:
        task = _task(request)
        done = task.done_marker in request.text
        return CompletionAudit(
            goal_met=done,
            confidence=0.9,
            reason=f"'{task.done_marker}' appeared" if done else "no sign of the goal yet",
        )

    def correct(self, request: ScriptedRequest) -> CorrectionChoice:
        task = _task(request)
        thought, action = task.next_action(PageExcerpt(request))
        element = re.search(r"\((\d+)", action)
        return CorrectionChoice(
            strategy="alternative_element",
            element_id=int(element.group(1)) if element else None,
            thought=f"That click changed nothing; {thought[0].lower()}{thought[1:]} instead",
        )

    def replan(self, _request: ScriptedRequest) -> PlanValidation:
        return PlanValidation(valid=True, minor_modifications_only=True)


def _task(request: ScriptedRequest) -> Task:
    # Only the user's goal line counts: system prompts quote example goals too.
    goals = _GOAL.findall(request.text)
    for task in TASKS:
        if task.goal in goals:
            return task
    raise LookupError(f"the request's goal is none of the demo goals: {goals}")
