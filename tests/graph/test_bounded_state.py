"""Task histories are stored as deltas: a checkpoint holds the step's new records (the whole
history only every few updates), the state all of them, and loading a task stays bounded."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from veriloop.agent import Agent
from veriloop.context import Context
from veriloop.graph.state import HISTORY_SNAPSHOT_EVERY, history

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
    # Three steps: three actions recorded, two verdicts and fingerprints (the first step has none).
    updates = {"action_history": 3, "verification_history": 2, "action_fingerprints": 2}
    stored = {name for name in HISTORIES if name in head.checkpoint["channel_values"]}
    assert stored == {n for n in HISTORIES if updates[n] % HISTORY_SNAPSHOT_EVERY == 0}
    assert "action_history" not in stored  # so the state below is replayed, not read whole
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


class Counting(JsonPlusSerializer):
    """Counts the bytes the saver deserializes."""

    read = 0

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.read += len(data[1])
        return super().loads_typed(data)


class Steps(TypedDict):
    page: str
    records: Annotated[list[dict[str, Any]], history()]


def test_loading_a_long_task_from_sqlite_reads_no_more_than_a_short_one(tmp_path):
    # The SQLite saver deserializes every checkpoint it walks back through to replay a history;
    # each carries the page state. Bounded state means a load does not walk further as tasks grow.
    def step(state: Steps) -> dict:
        return {"page": "p" * 20_000, "records": [{"step": len(state.get("records") or [])}]}

    async def bytes_read_loading(after: list[int]) -> list[int]:
        serde, read = Counting(), []
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "t.sqlite")) as saver:
            saver.serde = serde
            graph = StateGraph(Steps).add_node("step", step).add_edge(START, "step")
            graph = graph.compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "task"}}
            for n in range(1, max(after) + 1):
                await graph.ainvoke({}, config, durability="exit")
                if n in after:
                    serde.read = 0
                    state = await graph.aget_state(config)
                    assert len(state.values["records"]) == n
                    read.append(serde.read)
        return read

    short, long = asyncio.run(bytes_read_loading([4, 24]))
    assert long < 1.3 * short, (short, long)
