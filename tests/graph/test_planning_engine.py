"""Planning engine: generate or keep the plan, advance steps and sub-tasks, the continuation sentence."""

from __future__ import annotations

import pytest

from veriloop.context import Context
from veriloop.engines.planning import (
    apply_sub_task_verdict,
    current_sub_task,
    hierarchical_plan_complete,
    plan_next,
)
from veriloop.engines.step_context import StepContext
from veriloop.llm import get_llm
from veriloop.prompts.progress import CONTINUATION_SENTENCE
from veriloop.schemas import PlannedStep, PlanOutput

pytestmark = pytest.mark.anyio

GOAL = "Add a patient named Jas"


async def _plan_next(page, goal=GOAL, verification=None, **overrides):
    now = StepContext(
        goal=goal,
        url="http://clinic.test/patients",
        dom=page("patients"),
        verification=verification,
    )
    args = dict(plan=None, step_index=0, sub_task_index=0, verified_step_index=None, suggestions=[])
    args.update(overrides)
    args["succeeded"] = bool(verification and verification.get("success"))
    return await plan_next(get_llm(Context()), now, **args)


async def test_generates_a_plan_with_ids_and_sub_tasks(scripted_model, page):
    scripted_model.script(
        "planning",
        PlanOutput(
            steps=[
                PlannedStep(description="Add Jas", sub_tasks=["Open the form", "Save Jas"]),
                PlannedStep(description="Add Kim", sub_tasks=["Open the form", "Save Kim"]),
            ]
        ),
    )
    outcome = await _plan_next(page, goal="Add patients Jas and then Kim")
    plan = outcome.plan
    assert outcome.generated and outcome.usage["planning"]["calls"] == 1
    assert [s.id for s in plan.steps] == ["step-1", "step-2"]
    assert [t.id for t in plan.steps[1].sub_tasks] == ["step-2.1", "step-2.2"]
    assert plan.is_hierarchical and plan.steps[0].status == "in_progress"
    prompt = scripted_model.requests[0].text
    assert "Add patients Jas and then Kim" in prompt and "<<<PAGE_DATA" in prompt
    assert "New patient" in prompt  # grounded on the page excerpt


async def test_keeps_the_plan_and_advances_after_a_verified_success(scripted_model, page):
    scripted_model.script(
        "planning",
        PlanOutput(steps=[PlannedStep(description="Open form"), PlannedStep(description="Save")]),
    )
    first = await _plan_next(page)
    success = {"success": True, "task_completed": False, "confidence": 0.9, "step_index": 0}
    second = await _plan_next(page, plan=first.plan, verification=success, verified_step_index=0)
    assert not second.generated and second.step_index == 1
    assert (
        second.plan.steps[0].status == "completed" and second.plan.steps[1].status == "in_progress"
    )
    assert scripted_model.calls("planning") == 1
    # A failed verification, or a success of an action chosen for another step, does not advance.
    failed = {**success, "success": False}
    assert (
        await _plan_next(page, plan=first.plan, verification=failed, verified_step_index=0)
    ).step_index == 0
    assert (
        await _plan_next(
            page, plan=second.plan, step_index=1, verification=success, verified_step_index=0
        )
    ).step_index == 1


async def test_continuation_sentence_only_when_the_action_succeeded_but_the_goal_is_open(
    scripted_model, page
):
    scripted_model.on("planning", lambda req: PlanOutput(steps=[PlannedStep(description="Next")]))
    ok = {"success": True, "action_succeeded": True, "task_completed": False, "confidence": 0.9}
    await _plan_next(page, verification=ok)
    await _plan_next(page, verification={**ok, "success": False, "action_succeeded": False})
    first, second = scripted_model.requests
    assert CONTINUATION_SENTENCE in first.text
    assert CONTINUATION_SENTENCE not in second.text


async def test_a_plan_that_ran_out_is_regenerated(scripted_model, page):
    scripted_model.script("planning", PlanOutput(steps=[PlannedStep(description="Only step")]))
    scripted_model.script("planning", PlanOutput(steps=[PlannedStep(description="Fresh step")]))
    first = await _plan_next(page)
    success = {"success": True, "task_completed": False, "confidence": 0.9}
    again = await _plan_next(page, plan=first.plan, verification=success, verified_step_index=0)
    assert again.generated and again.step_index == 0
    assert again.plan.steps[0].description == "Fresh step"


@pytest.mark.parametrize("answer", ["not json at all", '{"steps": []}'])
async def test_unusable_plan_answer_gives_a_one_step_plan(scripted_model, page, answer):
    scripted_model.script("planning", answer)
    outcome = await _plan_next(page)
    assert [s.description for s in outcome.plan.steps] == [GOAL]
    assert outcome.usage["planning"]["calls"] == 1  # the unusable call still counts


async def test_sub_tasks_advance_fail_and_complete_the_plan(scripted_model, page):
    scripted_model.script(
        "planning",
        PlanOutput(steps=[PlannedStep(description="Add Jas", sub_tasks=["Open form", "Save"])]),
    )
    plan = (await _plan_next(page)).plan
    assert current_sub_task(plan, 0, 0).objective == "Open form"
    # Not confident enough: nothing changes.
    same = apply_sub_task_verdict(
        plan, 0, 0, sub_task_completed=True, confident=False, success=False
    )
    assert same == (plan, 0, 0)
    failed, _, _ = apply_sub_task_verdict(
        plan, 0, 0, sub_task_completed=False, confident=True, success=False
    )
    assert failed.steps[0].sub_tasks[0].status == "failed"
    plan, step, sub = apply_sub_task_verdict(
        plan, 0, 0, sub_task_completed=True, confident=True, success=True
    )
    assert (step, sub) == (0, 1) and not hierarchical_plan_complete(plan)
    plan, step, sub = apply_sub_task_verdict(
        plan, 0, 1, sub_task_completed=True, confident=True, success=True
    )
    assert (step, sub) == (1, 0) and plan.steps[0].status == "completed"
    assert hierarchical_plan_complete(plan)
