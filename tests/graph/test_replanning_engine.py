"""Replanning: modify vs regenerate is read from minor_modifications_only alone, and that flag is
derived from a structural comparison of the steps (the model's claim can only make it stricter)."""

from __future__ import annotations

import pytest

from veriloop.context import Context
from veriloop.engines.planning import plan_steps
from veriloop.engines.replanning import determine_replan_action, replan
from veriloop.engines.step_context import StepContext
from veriloop.llm import get_llm
from veriloop.schemas import Plan, PlannedStep, PlanValidation

pytestmark = pytest.mark.anyio

PLAN = Plan(
    goal="Add a patient named Jas",
    steps=plan_steps(
        [
            PlannedStep(description="Open form"),
            PlannedStep(description="Type Jas"),
            PlannedStep(description="Save"),
        ]
    ),
)


def test_determine_replan_action_ignores_the_change_text():
    minor = PlanValidation(
        valid=False, minor_modifications_only=True, suggested_changes=["regenerate everything"]
    )
    major = PlanValidation(
        valid=False, minor_modifications_only=False, suggested_changes=["just a minor tweak"]
    )
    assert determine_replan_action(minor) == "modify"
    assert determine_replan_action(major) == "regenerate"


async def _replan(page, step_index=1):
    now = StepContext(
        goal=PLAN.goal,
        url="http://clinic.test/patients/new",
        dom=page("patient_form"),
        verification={"success": False, "confidence": 0.3},
        history=["1. click(4) -> worked", '2. setValue(5, "Jas") -> failed'],
    )
    return await replan(get_llm(Context()), now, plan=PLAN, step_index=step_index)


async def test_minor_modifications_edit_the_remaining_steps_in_place(scripted_model, page):
    scripted_model.script(
        "replanning",
        PlanValidation(
            valid=False,
            minor_modifications_only=True,
            suggested_changes=["click the name field first"],
            modified_steps=[
                PlannedStep(description="Focus the name field"),
                PlannedStep(description="Type Jas"),
                PlannedStep(description="Save"),
            ],
        ),
    )
    outcome = await _replan(page)
    assert outcome.result.plan_modified and not outcome.result.plan_regenerated
    assert outcome.validation.minor_modifications_only
    assert [s.description for s in outcome.plan.steps] == [
        "Open form",
        "Focus the name field",
        "Type Jas",
        "Save",
    ]
    assert [s.id for s in outcome.plan.steps] == ["step-1", "step-2", "step-3", "step-4"]
    # The structured difference is recorded: one step inserted before the stuck one.
    changes = outcome.result.step_changes
    assert (changes.before, changes.after, changes.changed, changes.minor) == (2, 3, 1, True)
    assert changes.diff == {"iterable_item_added": {"root[0]": "Focus the name field"}}
    assert outcome.step_index == 1 and outcome.usage["replanning"]["calls"] == 1
    prompt = scripted_model.requests[0].text
    assert "Remaining steps (the first is the stuck one):\n- Type Jas\n- Save" in prompt


async def test_anything_else_regenerates(scripted_model, page):
    scripted_model.script(
        "replanning", PlanValidation(valid=False, minor_modifications_only=False), "garbage"
    )
    regenerated = await _replan(page)
    assert (
        regenerated.plan is None
        and regenerated.result.plan_regenerated
        and regenerated.step_index == 0
    )
    unusable = await _replan(page)
    assert unusable.plan is None and unusable.result.plan_regenerated
    assert not unusable.validation.minor_modifications_only


async def test_a_rewrite_the_model_calls_minor_is_regenerated(scripted_model, page):
    scripted_model.script(
        "replanning",
        PlanValidation(
            valid=False,
            minor_modifications_only=True,  # the model's word...
            suggested_changes=["small tweak"],
            modified_steps=[
                PlannedStep(description="Log out"),
                PlannedStep(description="Delete every invoice"),
            ],
        ),
    )
    outcome = await _replan(page)
    # ...is not enough: both remaining steps changed, so the plan is regenerated, not edited.
    assert not outcome.validation.minor_modifications_only
    assert determine_replan_action(outcome.validation) == "regenerate"
    assert outcome.plan is None and outcome.result.plan_regenerated
    changes = outcome.result.step_changes
    assert (changes.changed, changes.minor) == (2, False)
    assert changes.diff["values_changed"]["root[0]"] == {
        "old_value": "Type Jas",
        "new_value": "Log out",
    }
    assert "more than a minor modification" in outcome.result.reason


async def test_the_model_saying_not_minor_is_never_overruled(scripted_model, page):
    scripted_model.script(
        "replanning",
        PlanValidation(
            valid=False,
            minor_modifications_only=False,
            modified_steps=[PlannedStep(description="Type Jas"), PlannedStep(description="Save")],
        ),
    )
    outcome = await _replan(page)
    assert outcome.plan is None and outcome.result.plan_regenerated
