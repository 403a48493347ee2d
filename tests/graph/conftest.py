"""Fixtures for graph tests: small patient-records admin pages and a fresh agent per test."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from veriloop.context import Context
from veriloop.llm.scripted import ScriptedRequest
from veriloop.schemas import (
    ActionChoice,
    CompletionAudit,
    Observation,
    PlannedStep,
    PlanOutput,
    RefinedStep,
    SemanticVerdict,
)

# importlib mode keeps tests/ off sys.path: let the Studio tests import devserver.py.
sys.path.insert(0, str(Path(__file__).parent))

PAGES = Path(__file__).parent / "pages"
URLS = {
    "patients": "http://clinic.test/patients",
    "patient_form": "http://clinic.test/patients/new",
    "patient_form_filled": "http://clinic.test/patients/new",
    "patient_saved": "http://clinic.test/patients",
}


@pytest.fixture
def page() -> Callable[[str], str]:
    """HTML of a fixture page by name; ``patient_form_filled`` is the form after setValue(5, "Jas")."""

    def read(name: str) -> str:
        if name == "patient_form_filled":
            # The snapshot script mirrors the live value into the attribute.
            return read("patient_form").replace(
                'value="" data-veriloop-id="5"', 'value="Jas" data-veriloop-id="5"'
            )
        return (PAGES / f"{name}.html").read_text(encoding="utf-8")

    return read


@pytest.fixture
def observe(page) -> Callable[..., Observation]:
    """An observation of a fixture page (at its URL), with any extra fields."""

    def make(name: str, **fields) -> Observation:
        return Observation(url=URLS[name], dom=page(name), **fields)

    return make


@pytest.fixture
def agent():
    """An agent on a fresh InMemorySaver with default thresholds and budgets."""
    from veriloop.agent import Agent

    return Agent(checkpointer=InMemorySaver(), context=Context())


def _verdict(
    action_succeeded: bool, task_completed: bool, confidence: float, reason: str = "", **extra
) -> SemanticVerdict:
    return SemanticVerdict(
        action_succeeded=action_succeeded,
        task_completed=task_completed,
        confidence=confidence,
        reason=reason or "Observed the page change.",
        **extra,
    )


@pytest.fixture
def verdict() -> Callable[..., SemanticVerdict]:
    """verdict(action_succeeded, task_completed, confidence, reason="", **extra) -> SemanticVerdict."""
    return _verdict


JAS_PLAN = PlanOutput(
    steps=[
        PlannedStep(description="Open the new patient form", expected_outcome="The form is shown"),
        PlannedStep(
            description="Type Jas into the name field", expected_outcome="The name field holds Jas"
        ),
        PlannedStep(description="Save the patient", expected_outcome="A confirmation appears"),
    ]
)
JAS_REFINED = [
    RefinedStep(instruction="Click the New patient button", target_element_id=4),
    RefinedStep(instruction="Type Jas into the Full name input", target_element_id=5),
    RefinedStep(instruction="Click Save", target_element_id=7),
]
JAS_ACTIONS = [
    ActionChoice(thought="Open the form", action="click(4)"),
    ActionChoice(thought="Enter the name", action='setValue(5, "Jas")'),
    ActionChoice(thought="Save", action="click(7)"),
]


def _jas_step(request: ScriptedRequest) -> int:
    """Which Jas step the page in the prompt is at: the list, the empty form, the filled form."""
    if 'value="Jas"' in request.text:
        return 2
    return 1 if 'data-veriloop-id="5"' in request.text else 0


def jas_audit(request) -> CompletionAudit:
    """An honest finish audit for the Jas task: met once the confirmation was observed."""
    met = "Patient Jas added" in request.text
    return CompletionAudit(
        goal_met=met, confidence=0.9, reason="confirmation seen" if met else "no"
    )


@pytest.fixture
def jas(scripted_model):
    """The seed's "Add a patient named Jas" task: a scripted plan; refinements and actions answer the
    page in the prompt, as a model would (a discarded lookahead must not shift them); an honest
    finish audit; verdicts are up to the test."""
    scripted_model.script("planning", JAS_PLAN)
    scripted_model.on("refinement", lambda request: JAS_REFINED[_jas_step(request)])
    scripted_model.on("action", lambda request: JAS_ACTIONS[_jas_step(request)])
    scripted_model.on("audit", jas_audit)
    return scripted_model


@pytest.fixture
def parses(monkeypatch) -> list[int]:
    """One entry per page parse in this process (the observation's and the compact page's); clear it
    where the count should start."""
    from veriloop.engines import dom_context, observation

    counted: list[int] = []
    for module, name in ((observation, "parse_utf8"), (dom_context, "parse_html")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda page, real=real: counted.append(1) or real(page))
    return counted
