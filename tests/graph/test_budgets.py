"""Correction, replanning and task budgets through the real graph (no-change pages need no verdict call)."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from veriloop.agent import Agent, TaskFinishedError
from veriloop.context import Context
from veriloop.schemas import (
    ActionChoice,
    CorrectionChoice,
    PlannedStep,
    PlanOutput,
    PlanValidation,
    RefinedStep,
)

GOAL = "Add a patient named Jas"
RETRY = CorrectionChoice(strategy="retry_with_delay", thought="maybe slow")


@pytest.fixture
def model(scripted_model):
    """One plan; every refinement and action (unless queued by the test) clicks New patient."""
    scripted_model.script(
        "planning", PlanOutput(steps=[PlannedStep(description="Open the new patient form")])
    )
    scripted_model.on(
        "refinement", lambda req: RefinedStep(instruction="Click New patient", target_element_id=4)
    )
    scripted_model.on(
        "action", lambda req: ActionChoice(thought="open the form", action="click(4)")
    )
    return scripted_model


def _agent(**budgets) -> Agent:
    return Agent(checkpointer=InMemorySaver(), context=Context(**budgets))


def _stuck(agent, observe, invocations: int):
    """Start the task, then send the unchanged list page ``invocations`` times: every action fails."""
    replies = [agent.step(observe("patients", query=GOAL))]
    for _ in range(invocations):
        replies.append(agent.step(observe("patients", task_id=replies[0].task_id)))
    return replies


def _purposes(server) -> list[str]:
    return [r.purpose for r in server.requests]


def test_correction_budget_spent_goes_to_replanning_then_minor_edit_resumes_at_refinement(
    model, observe
):
    model.script("correction", RETRY, RETRY, RETRY)
    model.script(
        "replanning",
        PlanValidation(
            valid=False,
            minor_modifications_only=True,
            modified_steps=[PlannedStep(description="Click New patient again")],
        ),
    )
    agent = _agent()
    replies = _stuck(agent, observe, 4)
    assert [r.action for r in replies] == [
        "click(4)",
        "wait(0.5)",
        "wait(1)",
        "wait(2)",
        "click(4)",
    ]
    assert model.calls("verification") == 0  # nothing changed: failed without asking the model
    assert model.calls("correction") == 3 and model.calls("replanning") == 1
    purposes = _purposes(model)
    assert (
        purposes[purposes.index("replanning") + 1] == "refinement"
    )  # minor -> step_refinement, not planning
    assert model.calls("planning") == 1
    task = agent.get_task(replies[0].task_id)
    assert [s["description"] for s in task.plan["steps"]] == ["Click New patient again"]
    assert [a["source"] for a in task.actions] == [
        "action_generation",
        "correction",
        "correction",
        "correction",
        "action_generation",
    ]
    values = agent.graph.get_state({"configurable": {"thread_id": replies[0].task_id}}).values
    assert (
        values["replan_count"] == 1
        and values["correction_attempts"] == 0
        and values["tried_strategies"] == []
    )


def test_regenerated_plan_goes_through_planning_with_the_reviewers_reasons(model, observe):
    model.script("correction", RETRY)
    model.script(
        "replanning",
        PlanValidation(
            valid=False,
            minor_modifications_only=False,
            suggested_changes=["The button is elsewhere"],
        ),
    )
    model.script(
        "planning", PlanOutput(steps=[PlannedStep(description="Use the Patients link first")])
    )
    model.script("refinement", RefinedStep(instruction="Click New patient", target_element_id=4))
    model.script("action", ActionChoice(thought="open the form", action="click(4)"))
    model.script("refinement", RefinedStep(instruction="Open Patients", target_element_id=2))
    model.script("action", ActionChoice(thought="t", action="click(2)"))
    agent = _agent(max_corrections_per_step=1)
    replies = _stuck(agent, observe, 2)
    assert [r.action for r in replies] == ["click(4)", "wait(0.5)", "click(2)"]
    purposes = _purposes(model)
    assert purposes[purposes.index("replanning") + 1] == "planning"
    replanned = [r for r in model.requests if r.purpose == "planning"][1]
    assert "The button is elsewhere" in replanned.text
    assert (
        agent.get_task(replies[0].task_id).plan["steps"][0]["description"]
        == "Use the Patients link first"
    )


def test_replan_budget_spent_fails_the_task(model, observe):
    model.on("correction", lambda req: RETRY)
    model.on("replanning", lambda req: PlanValidation(valid=False, minor_modifications_only=True))
    model.script("action", ActionChoice(thought="open the form", action="click(4)"))
    model.script("action", ActionChoice(thought="another way", action="click(2)"))
    agent = _agent(max_corrections_per_step=1, max_replans_per_task=1)
    replies = _stuck(agent, observe, 4)
    assert [r.action for r in replies] == [
        "click(4)",
        "wait(0.5)",
        "click(2)",
        "wait(0.5)",
        'fail("replan budget spent (1 replans)")',
    ]
    assert [r.status for r in replies][-2:] == ["executing", "failed"]
    with pytest.raises(TaskFinishedError) as finished:
        agent.step(observe("patients", task_id=replies[0].task_id))
    assert finished.value.status == "failed"
    assert agent.get_task(replies[0].task_id).status == "failed"


def test_step_budget_spent_fails_the_task_even_after_a_success(jas, observe, verdict):
    jas.script("verification", verdict(True, False, 0.9), verdict(True, False, 0.9))
    agent = _agent(max_steps_per_task=2)
    first = agent.step(observe("patients", query=GOAL))
    second = agent.step(observe("patient_form", task_id=first.task_id))
    third = agent.step(observe("patient_form_filled", task_id=first.task_id))
    assert (second.action, third.action) == (
        'setValue(5, "Jas")',
        'fail("step budget spent (2 actions)")',
    )
    assert third.status == "failed" and third.verification.success


def test_a_failed_strategy_is_not_offered_again_on_the_step(model, observe):
    refresh = CorrectionChoice(strategy="refresh_page", thought="reload")
    model.script("correction", refresh, refresh)
    agent = _agent()
    replies = _stuck(agent, observe, 2)
    assert [r.action for r in replies] == [
        "click(4)",
        "refresh()",
        "wait(0.5)",
    ]
    first, second = [r.text for r in model.requests if r.purpose == "correction"]
    assert "- refresh_page: reload the current page" in first
    assert "- refresh_page" not in second and "Already tried on this step: refresh_page" in second


def test_a_repeated_action_on_an_unchanged_page_escalates_to_replanning(model, observe):
    model.on("correction", lambda req: RETRY)
    model.on("replanning", lambda req: PlanValidation(valid=False, minor_modifications_only=True))
    agent = _agent(max_corrections_per_step=1)
    replies = _stuck(agent, observe, 3)
    # click(4) fails, a retry fails, replanning chooses click(4) again on the same page ...
    assert [r.action for r in replies] == ["click(4)", "wait(0.5)", "click(4)", "click(4)"]
    # ... and verifying that repeat goes straight to replanning although this step's correction budget is fresh.
    assert model.calls("replanning") == 2 and model.calls("correction") == 1
    assert agent.get_task(replies[0].task_id).verifications[-1]["repeated_action"] is True


def test_an_impossible_verdict_fails_the_task(jas, observe, verdict):
    jas.script(
        "verification",
        verdict(False, False, 0.9, "The clinic is closed for new patients.", impossible=True),
    )
    agent = _agent()
    first = agent.step(observe("patients", query=GOAL))
    second = agent.step(observe("patient_form", task_id=first.task_id))
    assert second.action == 'fail("the page shows the goal cannot be achieved")'
    assert second.status == "failed" and jas.calls("correction") == 0


def test_correction_sees_the_expected_outcome_against_what_was_observed(scripted_model, observe):
    from veriloop.schemas.observation import ClientVerification

    scripted_model.script(
        "planning",
        PlanOutput(
            steps=[
                PlannedStep(
                    description="Open the new patient form",
                    expected_outcome="The new patient form is shown",
                )
            ]
        ),
    )
    scripted_model.on(
        "refinement", lambda req: RefinedStep(instruction="Click New patient", target_element_id=4)
    )
    scripted_model.on("action", lambda req: ActionChoice(thought="open", action="click(4)"))
    scripted_model.script("correction", RETRY)
    agent = _agent()
    first = agent.step(observe("patients", query=GOAL))
    missing = ClientVerification(element_found=False, selector="#patient-form")
    agent.step(observe("patients", task_id=first.task_id, client_verification=missing))
    # The action carried its expected outcome (the plan step's: click(4) is a plain button).
    record = agent.get_task(first.task_id).actions[0]
    assert (record["action_type"], record["expected_outcome"]) == (
        "generic",
        "The new patient form is shown",
    )
    (request,) = [r for r in scripted_model.requests if r.purpose == "correction"]
    assert "Expected: The new patient form is shown; observed: " in request.text
    assert "The client did not find the expected element #patient-form" in request.text
    assert "Prediction confidence: 0.20" in request.text
