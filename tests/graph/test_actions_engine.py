"""Action generation: strict parsing, element ids checked against the page, one more try, then nothing."""

from __future__ import annotations

import pytest

from veriloop.context import Context
from veriloop.engines.actions import InvalidAction, choose_action, validate_action
from veriloop.engines.step_context import StepContext
from veriloop.llm import get_llm
from veriloop.schemas import ActionChoice

pytestmark = pytest.mark.anyio


async def _choose(page, name="patient_form"):
    dom = page(name)
    now = StepContext(
        goal="Add a patient named Jas",
        url="http://clinic.test/patients/new",
        dom=dom,
        history=["1. click(4) -> worked"],
    )
    return await choose_action(
        get_llm(Context()),
        now,
        instruction="Type Jas into the Full name input",
        target_element_id=5,
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("click(99)", "not on the page"),
        ("finish()", "only verification decides"),
        ('fail("stuck")', "only verification decides"),
        ("clack(5)", "unknown action"),
        ("click the save button", "not an action call"),
    ],
)
def test_validate_action_rejects(text, problem):
    with pytest.raises(InvalidAction, match=problem):
        validate_action(text, {4, 5, 7})


def test_validate_action_accepts_actions_without_an_element():
    assert (
        str(validate_action('navigate("http://clinic.test/")', set()))
        == 'navigate("http://clinic.test/")'
    )
    assert str(validate_action('setValue(5, "Jas")', {5})) == 'setValue(5, "Jas")'


async def test_first_valid_answer_is_used(scripted_model, page):
    scripted_model.script("action", ActionChoice(thought="type it", action='setValue(5, "Jas")'))
    outcome = await _choose(page)
    assert str(outcome.action) == 'setValue(5, "Jas")' and outcome.thought == "type it"
    assert outcome.usage["action"]["calls"] == 1
    prompt = scripted_model.requests[0].text
    assert 'data-veriloop-id="5"' in prompt and "1. click(4) -> worked" in prompt


async def test_unknown_element_is_rejected_and_asked_again_once(scripted_model, page):
    scripted_model.script(
        "action",
        ActionChoice(thought="guess", action="click(99)"),
        ActionChoice(thought="fixed", action="click(7)"),
    )
    outcome = await _choose(page)
    assert str(outcome.action) == "click(7)"
    assert outcome.rejections == ["click(99) names element 99, which is not on the page"]
    assert "element 99, which is not on the page" in scripted_model.requests[1].text
    assert outcome.usage["action"]["calls"] == 2


async def test_finish_and_garbage_leave_no_action_after_the_second_try(scripted_model, page):
    scripted_model.script("action", ActionChoice(thought="done?", action="finish()"), "{{not json")
    outcome = await _choose(page)
    assert outcome.action is None
    assert len(outcome.rejections) == 2 and "only verification decides" in outcome.rejections[0]
    assert scripted_model.calls("action") == 2
