"""Lookahead: the next action is prepared beside the verification call, and used only after a success."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from veriloop.agent import Agent
from veriloop.context import Context
from veriloop.engines.lookahead import audit_ahead_allowed, lookahead_allowed
from veriloop.engines.planning import plan_steps
from veriloop.llm.scripted import Span, critical_path_calls
from veriloop.schemas import CorrectionChoice, PlannedStep
from veriloop.schemas.plan import Plan

GOAL = "Add a patient named Jas"
LATENCY = 0.2


def _agent(lookahead: bool = True) -> Agent:
    return Agent(checkpointer=InMemorySaver(), context=Context(lookahead=lookahead))


@pytest.mark.parametrize("lookahead", [True, False])
def test_a_success_takes_two_model_waits_with_lookahead_three_without(
    jas, observe, verdict, lookahead
):
    agent = _agent(lookahead)
    first = agent.step(observe("patients", query=GOAL))
    jas.script("verification", verdict(True, False, 0.9))
    jas.latency_s = LATENCY  # every answer takes a while, so calls made side by side overlap
    mark = len(jas.spans)
    second = agent.step(observe("patient_form", task_id=first.task_id))
    assert second.action == 'setValue(5, "Jas")' and second.verification.success
    spans = jas.spans[mark:]
    assert sorted(s.request.purpose for s in spans) == ["action", "refinement", "verification"]
    assert critical_path_calls(spans) == (2 if lookahead else 3)
    task = agent.get_task(first.task_id)
    assert task.actions[-1]["plan_step_index"] == 1  # the plan advanced past the verified step
    assert task.plan["steps"][0]["status"] == "completed"


def test_use_lookahead_finalizes_the_prepared_action_in_its_own_superstep(jas, observe, verdict):
    agent = _agent()
    first = agent.step(observe("patients", query=GOAL))
    jas.script("verification", verdict(True, False, 0.9))
    second = agent.step(observe("patient_form", task_id=first.task_id))
    config = {"configurable": {"thread_id": first.task_id}}
    # Newest first: the run's last superstep was use_lookahead, which ended it (no finalize after).
    after, before = [s.next for s in agent.graph.get_state_history(config)][:2]
    assert (after, before) == ((), ("use_lookahead",))
    # ... and recorded the action as finalize does: on the page it was chosen on, run scratch cleared.
    values = agent.graph.get_state(config).values
    record = values["action_history"][-1]
    assert record["action"] == second.action == 'setValue(5, "Jas")'
    assert record["before_state"]["url"] == observe("patient_form").url
    assert values["status"] == "executing" and values["dom"] == ""
    assert values["lookahead"] is None and values["action_source"] is None


def test_a_failed_verdict_discards_the_lookahead_and_the_plan_does_not_advance(
    jas, observe, verdict
):
    agent = _agent()
    first = agent.step(observe("patients", query=GOAL))
    jas.script("verification", verdict(False, False, 0.9, failure_category="wrong_page"))
    jas.script("correction", CorrectionChoice(strategy="retry_with_delay", thought="wait"))
    second = agent.step(observe("patient_form", task_id=first.task_id))
    # The lookahead's setValue was prepared (and paid for) but the verdict failed: correction acts.
    assert jas.calls("action") == 2 and second.action.startswith("wait(")
    values = agent.graph.get_state({"configurable": {"thread_id": first.task_id}}).values
    assert values["current_step_index"] == 0 and values["lookahead"] is None
    assert values["plan"]["steps"][0]["status"] == "in_progress"
    assert agent.get_task(first.task_id).usage["action"]["calls"] == 2


def test_the_goal_verdict_finishes_without_a_lookahead_on_the_last_step(jas, observe, verdict):
    agent = _agent()
    jas.script(
        "verification",
        verdict(True, False, 0.9),
        verdict(True, False, 0.9),
        verdict(True, True, 0.95, evidence=[2]),  # [2]: the first change on patient_saved
    )
    first = agent.step(observe("patients", query=GOAL))
    agent.step(observe("patient_form", task_id=first.task_id))
    agent.step(observe("patient_form_filled", task_id=first.task_id))
    before = jas.calls("refinement")
    jas.latency_s = LATENCY  # every answer takes a while, so calls made side by side overlap
    mark = len(jas.spans)
    last = agent.step(observe("patient_saved", task_id=first.task_id))
    # Verifying "Save" (the plan's last step): a success would need a new plan, so no action is
    # prepared; the finish audit runs beside the verdict instead: finishing is one model wait.
    assert last.status == "completed" and jas.calls("refinement") == before
    spans = jas.spans[mark:]
    assert sorted(s.request.purpose for s in spans) == ["audit", "verification"]
    assert critical_path_calls(spans) == 1


def test_without_lookahead_the_finish_audit_waits_for_the_verdict(jas, observe, verdict):
    agent = _agent(lookahead=False)
    jas.script(
        "verification",
        verdict(True, False, 0.9),
        verdict(True, False, 0.9),
        verdict(True, True, 0.95, evidence=[2]),
    )
    first = agent.step(observe("patients", query=GOAL))
    agent.step(observe("patient_form", task_id=first.task_id))
    agent.step(observe("patient_form_filled", task_id=first.task_id))
    jas.latency_s = LATENCY
    mark = len(jas.spans)
    last = agent.step(observe("patient_saved", task_id=first.task_id))
    assert last.status == "completed"
    assert critical_path_calls(jas.spans[mark:]) == 2  # verification, then the audit


def test_nothing_changed_fails_without_a_verdict_or_a_lookahead(jas, observe):
    agent = _agent()
    first = agent.step(observe("patients", query=GOAL))
    jas.script("correction", CorrectionChoice(strategy="retry_with_delay", thought="wait"))
    calls = len(jas.requests)
    second = agent.step(observe("patients", task_id=first.task_id))
    assert second.verification.failure_category == "no_effect"
    assert [r.purpose for r in jas.requests[calls:]] == ["correction"]


def _plan(*sub_tasks: list[str]) -> Plan:
    planned = [PlannedStep(description=f"step {n}", sub_tasks=s) for n, s in enumerate(sub_tasks)]
    return Plan(goal="g", steps=plan_steps(planned))


@pytest.mark.parametrize(
    ("plan", "step_index", "verified_step_index", "allowed"),
    [
        (None, 0, None, False),
        (_plan([], []), 0, 0, True),  # a success advances to step 1
        (_plan([], []), 1, 1, False),  # the plan would run out: a new plan, or the goal
        (_plan([], []), 1, 0, True),  # the action was for another step: step 1 again
        (_plan(["a", "b"], []), 0, 0, False),  # sub-tasks: the verdict picks where to go
        (_plan([], ["a", "b"]), 0, 0, True),  # the next step has sub-tasks: refine its first
    ],
)
def test_lookahead_allowed(plan, step_index, verified_step_index, allowed):
    assert lookahead_allowed(plan, step_index, verified_step_index) is allowed


@pytest.mark.parametrize(
    ("plan", "step_index", "verified_step_index", "allowed"),
    [
        (None, 0, None, False),
        (_plan([], []), 0, 0, False),  # a success leads to step 1: the lookahead's turn
        (_plan([], []), 1, 1, True),  # the last step verified: finishing is the likelier outcome
        (_plan([], []), 1, 0, False),  # the action was for another step
        (_plan([], ["a", "b"]), 1, 1, False),  # sub-tasks: the verdict picks where to go
    ],
)
def test_audit_ahead_allowed(plan, step_index, verified_step_index, allowed):
    assert audit_ahead_allowed(plan, step_index, verified_step_index) is allowed


def test_critical_path_counts_side_by_side_calls_once():
    def span(start, end):
        return Span(request=None, start=start, end=end)

    # verification (0-1) beside refinement (0-1) -> action (1-2): two waits.
    assert critical_path_calls([span(0, 1), span(0, 1), span(1, 2)]) == 2
    assert critical_path_calls([span(0, 1), span(1, 2), span(2, 3)]) == 3
    assert critical_path_calls([span(0, 3), span(0, 1), span(1, 2)]) == 2
    assert critical_path_calls([]) == 0
