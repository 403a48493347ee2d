"""graph.bridge: a node's two bodies reach LangGraph as they are, each on its own entry point."""

from __future__ import annotations

import threading
from typing import Literal

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from veriloop.context import Context
from veriloop.graph.bridge import Router, on_loop, sync_and_async


class Counter(TypedDict):
    """A step count and the threads the nodes ran on."""

    n: int
    model: str
    ran_on: list[str]


async def count(state: Counter, runtime: Runtime[Context]) -> dict:
    return {
        "n": state["n"] + 1,
        "model": runtime.context.model,
        "ran_on": [*state["ran_on"], threading.current_thread().name],
    }


def reshape(state: Counter) -> dict:
    return {"ran_on": [*state["ran_on"], threading.current_thread().name]}


def route_by_model(state: Counter, runtime: Runtime[Context]) -> Literal["reshape", "__end__"]:
    """Reads the run's context, as ``route_after_verification`` does."""
    return "reshape" if runtime.context.model != "skip" else END


def graph():
    builder = StateGraph(Counter, context_schema=Context)
    builder.add_node("count", sync_and_async(count))
    builder.add_node("reshape", on_loop(reshape))
    builder.add_edge(START, "count")
    builder.add_conditional_edges("count", Router(route_by_model))
    builder.add_edge("reshape", END)
    return builder.compile(checkpointer=InMemorySaver())


def test_the_router_keeps_its_edges_and_reads_the_runs_context():
    edges = {(e.source, e.target) for e in graph().get_graph().edges}
    assert {("count", "reshape"), ("count", "__end__")} <= edges  # from its Literal, as drawn
    skipped = graph().invoke(
        {"n": 0, "ran_on": []},
        {"configurable": {"thread_id": "skip"}},
        context=Context(model="skip"),
    )
    assert len(skipped["ran_on"]) == 1  # routed past reshape


def test_invoke_runs_the_async_body_on_the_bridge_loop_with_the_run_context():
    config = {"configurable": {"thread_id": "sync"}}
    out = graph().invoke({"n": 0, "ran_on": []}, config, context=Context(model="m-sync"))
    assert out["n"] == 1 and out["model"] == "m-sync"
    assert out["ran_on"][0] == "veriloop-sync-bridge"  # the coroutine, on the bridge loop
    assert out["ran_on"][1] != "veriloop-sync-bridge"  # the reshaping node, as itself


@pytest.mark.anyio
async def test_ainvoke_runs_both_bodies_on_the_callers_loop():
    config = {"configurable": {"thread_id": "async"}}
    out = await graph().ainvoke({"n": 0, "ran_on": []}, config, context=Context(model="m-async"))
    here = threading.current_thread().name
    assert out["n"] == 1 and out["model"] == "m-async"
    assert out["ran_on"] == [here, here]  # no thread pool, no bridge
    skipped = await graph().ainvoke(
        {"n": 0, "ran_on": []},
        {"configurable": {"thread_id": "skip"}},
        context=Context(model="skip"),
    )
    assert skipped["ran_on"] == [here]
