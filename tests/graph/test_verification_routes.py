"""Only the typed goal_achieved flag completes a task; errors never do."""

from __future__ import annotations

import logging

import pytest

from veriloop.context import Context
from veriloop.llm.base import LLMUnavailable
from veriloop.llm.scripted import Fail, Refusal
from veriloop.schemas import CompletionAudit, CorrectionChoice

GOAL = "Add a patient named Jas"


def _after_first_action(agent, observe):
    first = agent.step(observe("patients", query=GOAL, session_id="tab-9"))
    return first, agent.step(observe("patient_form", task_id=first.task_id))


def test_reason_text_saying_completed_does_not_complete(agent, jas, observe, verdict):
    jas.script(
        "verification",
        verdict(True, False, 0.95, "The task completed successfully; goal achieved."),
    )
    _, second = _after_first_action(agent, observe)
    assert second.status == "executing" and second.action == 'setValue(5, "Jas")'
    assert second.verification.goal_achieved is False


def test_low_confidence_completion_completes_and_is_logged(agent, jas, observe, verdict, caplog):
    jas.script("verification", verdict(True, True, 0.72, evidence=[1]))  # [1]: the navigation
    jas.on("audit", lambda _: CompletionAudit(goal_met=True, confidence=0.9, reason="agreed"))
    with caplog.at_level(logging.INFO, logger="veriloop"):
        first, second = _after_first_action(agent, observe)
    assert second.status == "completed" and second.action == "finish()"
    events = [r for r in caplog.records if getattr(r, "event", None) == "Low confidence completion"]
    assert len(events) == 1
    assert events[0].task_id == first.task_id and events[0].session_id == "tab-9"
    assert f"[task={first.task_id} session=tab-9]" in events[0].getMessage()


def test_below_the_goal_threshold_does_not_complete(agent, jas, observe, verdict, caplog):
    jas.script("verification", verdict(True, True, 0.69, evidence=[1]))
    jas.script("correction", CorrectionChoice(strategy="retry_with_delay", thought="give it time"))
    with caplog.at_level(logging.INFO, logger="veriloop"):
        first, second = _after_first_action(agent, observe)
    assert second.status == "executing" and second.action == "wait(0.5)"
    assert second.verification.goal_achieved is False and not second.verification.success
    assert not [
        r for r in caplog.records if getattr(r, "event", None) == "Low confidence completion"
    ]
    assert agent.get_task(first.task_id).actions[-1]["source"] == "correction"


@pytest.mark.parametrize(
    "bad_answer",
    [
        "I think the patient was added!",
        '{"action_succeeded": true, "task_completed": true}',
        Refusal(),
    ],
    ids=["prose", "incomplete-json", "refusal"],
)
def test_malformed_verdict_goes_to_correction_with_goal_achieved_unset(
    agent, jas, observe, bad_answer
):
    jas.script("verification", bad_answer)
    jas.script("correction", CorrectionChoice(strategy="retry_with_delay", thought="retry"))
    first, second = _after_first_action(agent, observe)
    assert second.status == "executing" and second.action == "wait(0.5)"
    assert second.verification.goal_achieved is None and second.verification.success is False
    assert jas.calls("correction") == 1
    assert agent.get_task(first.task_id).verifications[-1]["goal_achieved"] is None


def test_provider_down_propagates_and_leaves_the_task_unchanged(jas, observe, verdict):
    from langgraph.checkpoint.memory import InMemorySaver

    from veriloop.agent import Agent

    agent = Agent(checkpointer=InMemorySaver(), context=Context(llm_max_retries=0))
    first = agent.step(observe("patients", query=GOAL))
    config = {"configurable": {"thread_id": first.task_id}}
    before = agent.graph.get_state(config).values
    jas.script("verification", Fail(status=503))
    with pytest.raises(LLMUnavailable):
        agent.step(observe("patient_form", task_id=first.task_id))
    task = agent.get_task(first.task_id)
    assert [a["action"] for a in task.actions] == ["click(4)"] and task.verifications == []
    # Nothing of the failed run stays: not the observation node's writes, not the lookahead's.
    assert agent.graph.get_state(config).values == before
    # The same observation, once the provider is back, is verified normally.
    jas.script("verification", verdict(True, False, 0.9))
    again = agent.step(observe("patient_form", task_id=first.task_id))
    assert again.action == 'setValue(5, "Jas")' and again.verification.success
