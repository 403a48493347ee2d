"""The runner loop's edges: starting on the current page, an environment that stops it, an agent that errs."""

from __future__ import annotations

import pytest

from veriloop.llm.scripted import ScriptedModelServer
from veriloop.runners.browser.agents import InProcessAgent
from veriloop.runners.browser.client import PageSession
from veriloop.runners.browser.loop import run_task
from veriloop.schemas.outputs import ActionChoice, PlannedStep, PlanOutput, RefinedStep

pytestmark = pytest.mark.browser


def test_start_on_the_current_page_and_stop_before_acting(
    scripted_model: ScriptedModelServer, session: PageSession, pages_url: str
) -> None:
    scripted_model.on(
        "planning", lambda _r: PlanOutput(steps=[PlannedStep(description="Tick Subscribe")])
    )
    scripted_model.on("refinement", lambda _r: RefinedStep(instruction="Tick Subscribe"))
    scripted_model.on(
        "action", lambda _r: ActionChoice(thought="tick", action='setValue(1, "true")')
    )
    session.goto(f"{pages_url}/subscribe.html")
    asked: list[str] = []

    def environment_over(current: PageSession) -> bool:
        asked.append(current.page.url)
        return True

    result = run_task(
        "Subscribe",
        "ignored://start",
        session=session,
        agent=InProcessAgent(),
        navigate=False,
        stop_before_action=environment_over,
        screenshots=False,
    )
    assert result.status == "stopped"
    assert asked == [f"{pages_url}/subscribe.html"]  # it started where the page already was
    assert [step.action for step in result.steps] == ['setValue(1, "true")']
    assert result.steps[0].execution_ok is None  # never executed
    assert not session.page.is_checked("#subscribe")


def test_agent_without_a_model_is_an_error_not_a_completion(
    session: PageSession, pages_url: str
) -> None:
    result = run_task(
        "Subscribe",
        f"{pages_url}/subscribe.html",
        session=session,
        agent=InProcessAgent(),
        screenshots=False,
    )
    assert result.status == "error" and not result.completed
    assert "OPENAI_API_KEY" in result.error
    assert result.steps == []
