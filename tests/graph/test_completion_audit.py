"""Before finish(), the audit of the whole trajectory must agree; a veto keeps the task going."""

from __future__ import annotations

from veriloop.schemas import ActionChoice, CompletionAudit, PlannedStep, PlanOutput, RefinedStep

GOAL = "Add a patient named Jas"
SAVED_LINE = 2
"""On patient_saved after the form, observation [1] is the navigation and [2] the first page change."""


def _keep_going(jas) -> None:
    """After a refused completion the agent plans on: one more look at the list."""
    jas.script("planning", PlanOutput(steps=[PlannedStep(description="Check the patient list")]))
    jas.script("refinement", RefinedStep(instruction="Wait for the list"))
    jas.script("action", ActionChoice(thought="Look again", action="wait(0.5)"))


def _run_to_save(agent, jas, observe, verdict, final_verdict):
    jas.script(
        "verification",
        verdict(True, False, 0.9, "The new patient form opened."),
        verdict(True, False, 0.9, "The name field now holds Jas."),
        final_verdict,
    )
    first = agent.step(observe("patients", query=GOAL))
    agent.step(observe("patient_form", task_id=first.task_id))
    agent.step(observe("patient_form_filled", task_id=first.task_id))
    return first.task_id


def test_the_audit_sees_the_goal_and_each_actions_changes_not_the_page(
    agent, jas, observe, verdict
):
    task_id = _run_to_save(
        agent, jas, observe, verdict, verdict(True, True, 0.95, evidence=[SAVED_LINE])
    )
    done = agent.step(observe("patient_saved", task_id=task_id))

    assert (done.action, done.status) == ("finish()", "completed")
    [audit] = [r for r in jas.requests if r.purpose == "audit"]
    assert GOAL in audit.text
    assert "Action 3: click(7)" in audit.text and "Patient Jas added" in audit.text
    assert "<td>" not in audit.text  # the page itself is never shown (its text changes are)
    assert "The name field now holds Jas." not in audit.text  # nor the verifier's opinions
    task = agent.get_task(task_id)
    assert task.usage["verification"]["calls"] == 4  # three verdicts and the audit
    assert "audit" not in task.usage


def test_a_veto_takes_back_goal_achieved_and_the_agent_continues(agent, jas, observe, verdict):
    jas.on("audit", lambda request: CompletionAudit(goal_met=False, confidence=0.9, reason="no"))
    task_id = _run_to_save(
        agent, jas, observe, verdict, verdict(True, True, 0.95, evidence=[SAVED_LINE])
    )
    _keep_going(jas)  # queued answers come before jas' handlers: queue them for after the save
    vetoed = agent.step(observe("patient_saved", task_id=task_id))

    assert (vetoed.status, vetoed.action) == ("executing", "wait(0.5)")
    assert vetoed.verification.goal_achieved is False
    state = agent.graph.get_state({"configurable": {"thread_id": task_id}}).values
    assert state["completion_audit"]["agreed"] is False
    assert jas.calls("audit") == 1


def test_a_completion_without_cited_changes_never_reaches_the_audit(agent, jas, observe, verdict):
    jas.on("audit", lambda request: CompletionAudit(goal_met=True, confidence=0.99, reason="yes"))
    task_id = _run_to_save(agent, jas, observe, verdict, verdict(True, True, 0.99))
    _keep_going(jas)
    step = agent.step(observe("patient_saved", task_id=task_id))

    assert (step.status, step.action) == ("executing", "wait(0.5)")
    assert step.verification.goal_achieved is False
    # On the plan's last step the audit ran beside the verdict, and agreed; without a cited
    # change the verdict is no completion, so the audit's answer is never used (only paid for).
    assert jas.calls("audit") == 1
    state = agent.graph.get_state({"configurable": {"thread_id": task_id}}).values
    assert state.get("completion_audit") is None
    assert agent.get_task(task_id).usage["verification"]["calls"] == 4
    [last] = agent.get_task(task_id).verifications[-1:]
    assert last["uncited_completion"] is True


def test_a_veto_with_a_prepared_lookahead_takes_the_prepared_action(agent, jas, observe, verdict):
    # "Done" claimed (with a cited change) after the form opened; the lookahead prepared the
    # next step beside that verdict; the audit sees no confirmation and vetoes.
    jas.script(
        "verification", verdict(True, True, 0.95, "The patient is added.", evidence=[SAVED_LINE])
    )
    first = agent.step(observe("patients", query=GOAL))
    vetoed = agent.step(observe("patient_form", task_id=first.task_id))

    assert (vetoed.status, vetoed.action) == ("executing", 'setValue(5, "Jas")')
    assert vetoed.verification.goal_achieved is False
    state = agent.graph.get_state({"configurable": {"thread_id": first.task_id}}).values
    assert state["completion_audit"]["agreed"] is False
    # The lookahead's refinement and action were adopted: no second choice after the veto.
    assert (jas.calls("refinement"), jas.calls("action"), jas.calls("audit")) == (2, 2, 1)
