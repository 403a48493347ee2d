"""The seed's "Add a patient named Jas": three actions over four invocations through the real graph."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from veriloop.agent import Agent, TaskFinishedError
from veriloop.context import Context
from veriloop.prompts.progress import CONTINUATION_SENTENCE, LOOKAHEAD_SENTENCE
from veriloop.schemas.observation import BeforeState

GOAL = "Add a patient named Jas"


def test_add_patient_jas_verifies_every_action_and_completes_once(agent, jas, observe, verdict):
    jas.script(
        "verification",
        verdict(True, False, 0.9, "The new patient form opened."),
        verdict(True, False, 0.9, "The name field now holds Jas."),
        verdict(
            True, True, 0.95, "Jas appears in the patient list with a confirmation.", evidence=[2]
        ),
    )
    first = agent.step(observe("patients", query=GOAL, session_id="tab-1"))
    assert (first.action, first.status, first.step_index, first.verification) == (
        "click(4)",
        "executing",
        0,
        None,
    )
    assert jas.calls("verification") == 0  # nothing to verify on a new task

    second = agent.step(observe("patient_form", task_id=first.task_id))
    assert second.action == 'setValue(5, "Jas")' and second.status == "executing"
    assert second.verification.success and second.verification.goal_achieved is False

    third = agent.step(observe("patient_form_filled", task_id=first.task_id))
    assert third.action == "click(7)" and third.status == "executing"
    assert third.verification.goal_achieved is False

    fourth = agent.step(observe("patient_saved", task_id=first.task_id))
    assert fourth.action == "finish()" and fourth.status == "completed"
    assert fourth.verification.goal_achieved is True
    assert fourth.thought.startswith("Task complete. Jas appears in the patient list")

    task = agent.get_task(first.task_id)
    executed = [a for a in task.actions if a["action"] != "finish()"]
    assert [a["action"] for a in executed] == ["click(4)", 'setValue(5, "Jas")', "click(7)"]
    # N actions, N verifications, each about its own action; goal achieved only by the third.
    assert [v["step_index"] for v in task.verifications] == [0, 1, 2]
    assert [v["goal_achieved"] for v in task.verifications] == [False, False, True]
    assert jas.calls("verification") == 3 and jas.calls("audit") == 1
    # Every action carries the page it was chosen on.
    assert [a["before_state"]["url"] for a in task.actions] == [
        "http://clinic.test/patients",
        "http://clinic.test/patients/new",
        "http://clinic.test/patients/new",
        "http://clinic.test/patients",
    ]
    # Records keep a summary of that page; only the latest page is kept whole (its own field).
    assert all(a["before_state"]["skeleton_elements"] for a in task.actions)
    assert not any("semantic_skeleton" in a["before_state"] for a in task.actions)
    state = agent.graph.get_state({"configurable": {"thread_id": task.task_id}}).values
    # ... kept as JSON text, which the serving process stores and forwards without parsing it
    assert isinstance(state["before_state"]["semantic_skeleton"], str)
    assert BeforeState.model_validate(state["before_state"]).semantic_skeleton["elements"]
    assert state["before_state"]["url"] == task.actions[-1]["before_state"]["url"]
    assert [a["plan_step_index"] for a in executed] == [0, 1, 2]
    assert task.status == "completed"
    assert [s["status"] for s in task.plan["steps"][:2]] == ["completed", "completed"]
    assert {p: u["calls"] for p, u in task.usage.items()} == {
        "planning": 1,
        "refinement": 3,
        "action": 3,
        "verification": 4,  # three verdicts and the finish audit
    }
    assert task.total_usage.calls == 11
    # The verdict on click(7) was asked about click(7), with observations rather than the page.
    last_verification = [r for r in jas.requests if r.purpose == "verification"][-1]
    assert "click(7)" in last_verification.text and "Patient Jas added" in last_verification.text
    assert (
        "<tbody>" not in last_verification.text and "data-veriloop-id" not in last_verification.text
    )

    with pytest.raises(TaskFinishedError) as finished:
        agent.step(observe("patient_saved", task_id=first.task_id))
    assert finished.value.status == "completed"


@pytest.mark.parametrize("lookahead", [False, True])
def test_step_prompts_say_the_previous_action_succeeded_but_the_goal_is_open(
    jas, observe, verdict, lookahead
):
    agent = Agent(checkpointer=InMemorySaver(), context=Context(lookahead=lookahead))
    jas.script("verification", verdict(True, False, 0.9))
    first = agent.step(observe("patients", query=GOAL))
    agent.step(observe("patient_form", task_id=first.task_id))
    refinement = [r for r in jas.requests if r.purpose == "refinement"]
    # Sequential: the verdict is known. Lookahead (beside the verdict): the prompt says it is
    # pending and the answer counts only as after a success with the goal open.
    said = LOOKAHEAD_SENTENCE if lookahead else CONTINUATION_SENTENCE
    assert CONTINUATION_SENTENCE not in refinement[0].text
    assert LOOKAHEAD_SENTENCE not in refinement[0].text
    assert said in refinement[1].text
    # Refinement is grounded on a bounded page excerpt, inside the page-data delimiters.
    assert "<<<PAGE_DATA" in refinement[1].text and 'data-veriloop-id="5"' in refinement[1].text
