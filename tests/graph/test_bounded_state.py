"""Task histories are stored as deltas: a checkpoint holds the step's new records, the state all of them."""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from veriloop.agent import Agent
from veriloop.context import Context

GOAL = "Add a patient named Jas"
HISTORIES = ("action_history", "verification_history", "action_fingerprints")


def test_checkpoints_store_new_history_records_only_and_the_state_replays_them(
    jas, observe, verdict
):
    saver = InMemorySaver()
    agent = Agent(checkpointer=saver, context=Context())
    jas.script("verification", verdict(True, False, 0.9), verdict(True, False, 0.9))
    first = agent.step(observe("patients", query=GOAL))
    agent.step(observe("patient_form", task_id=first.task_id))
    agent.step(observe("patient_form_filled", task_id=first.task_id))

    config = {"configurable": {"thread_id": first.task_id}}
    head = saver.get_tuple(config)
    assert not any(name in head.checkpoint["channel_values"] for name in HISTORIES)
    values = agent.graph.get_state(config).values
    assert [a["action"] for a in values["action_history"]] == [
        "click(4)",
        'setValue(5, "Jas")',
        "click(7)",
    ]
    assert [v["step_index"] for v in values["verification_history"]] == [0, 1]
    assert len(values["action_fingerprints"]) == 2
    # A fresh agent on the same saver sees the same task (nothing lives only in memory).
    again = Agent(checkpointer=saver, context=Context()).get_task(first.task_id)
    assert [a["action"] for a in again.actions] == [a["action"] for a in values["action_history"]]
