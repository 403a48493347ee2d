"""Entry without a before_state, and actions the model may not take."""

from __future__ import annotations

import logging

from langgraph.checkpoint.memory import InMemorySaver

from veriloop.graph import build_graph
from veriloop.graph.io import observation_to_input, state_to_response
from veriloop.schemas import ActionChoice, CorrectionChoice, PlannedStep, PlanOutput, RefinedStep

GOAL = "Add a patient named Jas"


def test_previous_action_without_before_state_plans_with_a_warning_and_no_verdict(
    jas, observe, caplog
):
    compiled = build_graph().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "legacy"}}
    # A task recorded by an older client: its last action has no before_state.
    compiled.update_state(
        config,
        {
            "task_id": "legacy",
            "session_id": "tab-3",
            "goal": GOAL,
            "action_history": [{"step_index": 0, "action": "click(4)", "before_state": None}],
            "status": "executing",
        },
        as_node="finalize",
    )
    with caplog.at_level(logging.WARNING, logger="veriloop"):
        state = compiled.invoke(
            observation_to_input(observe("patient_form"), "legacy", new_task=False), config
        )
    reply = state_to_response(state)
    assert jas.calls("verification") == 0 and reply.verification is None
    assert reply.step_index == 1 and reply.status == "executing"
    warnings = [r for r in caplog.records if getattr(r, "event", None) == "Missing before_state"]
    assert (
        len(warnings) == 1 and warnings[0].task_id == "legacy" and warnings[0].session_id == "tab-3"
    )


def test_finish_or_an_unknown_element_from_the_action_model_goes_to_correction(
    agent, scripted_model, observe
):
    scripted_model.script(
        "planning", PlanOutput(steps=[PlannedStep(description="Open the new patient form")])
    )
    scripted_model.script(
        "refinement", RefinedStep(instruction="Click New patient", target_element_id=4)
    )
    scripted_model.script(
        "action",
        ActionChoice(thought="done", action="finish()"),
        ActionChoice(thought="?", action="click(99)"),
    )
    scripted_model.script(
        "correction", CorrectionChoice(strategy="retry_with_delay", thought="let the page settle")
    )
    reply = agent.step(observe("patients", query=GOAL))
    assert reply.action == "wait(0.5)" and reply.status == "executing"
    assert scripted_model.calls("action") == 2
    record = agent.get_task(reply.task_id).actions[-1]
    assert (
        record["source"] == "correction"
        and record["before_state"]["url"] == "http://clinic.test/patients"
    )
    correction = [r.text for r in scripted_model.requests if r.purpose == "correction"][0]
    assert "Problem: no valid action could be chosen" in correction
    assert "alternative_element" not in correction.split("Offered strategies:")[1]
