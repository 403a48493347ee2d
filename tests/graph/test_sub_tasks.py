"""Hierarchical plans: sub-tasks advance on sub_task_completed; all complete -> goal achieved."""

from __future__ import annotations

from veriloop.schemas import (
    ActionChoice,
    CompletionAudit,
    CorrectionChoice,
    PlannedStep,
    PlanOutput,
    RefinedStep,
)

GOAL = "Add a patient named Jas"
SUB_TASKS = ["The new patient form is open", "Jas is saved"]


def _script(server):
    server.script(
        "planning", PlanOutput(steps=[PlannedStep(description="Add Jas", sub_tasks=SUB_TASKS)])
    )
    server.on("refinement", lambda req: RefinedStep(instruction="Work on the sub-task"))
    server.script(
        "action",
        ActionChoice(thought="t", action="click(4)"),
        ActionChoice(thought="t", action='setValue(5, "Jas")'),
        ActionChoice(thought="t", action="click(7)"),
    )


def test_goal_is_achieved_when_every_sub_task_is_verified_complete(
    agent, scripted_model, observe, verdict
):
    _script(scripted_model)
    scripted_model.script(
        "verification",
        verdict(True, False, 0.9, sub_task_completed=True),
        verdict(True, False, 0.9, sub_task_completed=False),  # progress, sub-task not done yet
        verdict(True, False, 0.9, sub_task_completed=True),  # the model did not say task_completed
    )
    scripted_model.on(
        "audit", lambda _: CompletionAudit(goal_met=True, confidence=0.9, reason="all done")
    )
    first = agent.step(observe("patients", query=GOAL))
    replies = [
        agent.step(observe(name, task_id=first.task_id))
        for name in ("patient_form", "patient_form_filled")
    ]
    assert [r.action for r in replies] == ['setValue(5, "Jas")', "click(7)"]
    last = agent.step(observe("patient_saved", task_id=first.task_id))
    assert (
        last.action == "finish()" and last.status == "completed" and last.verification.goal_achieved
    )
    task = agent.get_task(first.task_id)
    assert [t["status"] for t in task.plan["steps"][0]["sub_tasks"]] == ["completed", "completed"]
    assert task.plan["steps"][0]["status"] == "completed"
    # Each verdict was asked about the sub-task current at the time.
    asked = [r.text for r in scripted_model.requests if r.purpose == "verification"]
    assert SUB_TASKS[0] in asked[0] and SUB_TASKS[1] in asked[1] and SUB_TASKS[1] in asked[2]


def test_a_failed_sub_task_is_marked_and_corrected(agent, scripted_model, observe, verdict):
    _script(scripted_model)
    scripted_model.script("verification", verdict(False, False, 0.9, sub_task_completed=False))
    scripted_model.script(
        "correction", CorrectionChoice(strategy="retry_with_delay", thought="wait")
    )
    first = agent.step(observe("patients", query=GOAL))
    second = agent.step(observe("patient_form", task_id=first.task_id))
    assert second.action == "wait(0.5)" and second.status == "executing"
    sub_tasks = agent.get_task(first.task_id).plan["steps"][0]["sub_tasks"]
    assert [t["status"] for t in sub_tasks] == ["failed", "pending"]
