"""The compiled plan graph: the run loop and the step loop wired as DESIGN.md says."""

from __future__ import annotations

from pathlib import Path

from langgraph.graph import END

from veriloop.graph.plan import build_plan_graph, graph
from veriloop.graph.plan_routers import route_after_finish, route_after_step

SNAPSHOT = Path(__file__).parent / "plan_graph.mmd"
RUN_NODES = {"plan", "critique", "dispatch", "run_step", "batch_end", "replan", "finalize"}
STEP_NODES = {
    "prepare", "execute", "check", "correct", "finish", "human_review", "subplan", "next_step"
}  # fmt: skip
CONDITIONAL = {
    ("plan", "critique"), ("plan", "finalize"),
    ("critique", "plan"), ("critique", "dispatch"), ("critique", "finalize"),
    ("dispatch", "run_step:__start__"), ("dispatch", "finalize"),
    ("batch_end", "replan"), ("batch_end", "dispatch"), ("batch_end", "finalize"),
    ("run_step:__start__", "run_step:prepare"), ("run_step:__start__", "run_step:human_review"),
    ("run_step:__start__", "run_step:subplan"),
    ("run_step:check", "run_step:correct"), ("run_step:check", "run_step:finish"),
    # A step goes on in its lane, or ends the task when nothing can follow it.
    ("run_step:finish", "run_step:next_step"), ("run_step:finish", "run_step:__end__"),
    ("run_step:human_review", "run_step:next_step"), ("run_step:human_review", "run_step:__end__"),
    ("run_step:subplan", "run_step:next_step"), ("run_step:subplan", "run_step:__end__"),
    # A lane's next step starts the way a step does; the end of the lane ends the task.
    ("run_step:next_step", "run_step:prepare"), ("run_step:next_step", "run_step:human_review"),
    ("run_step:next_step", "run_step:subplan"), ("run_step:next_step", "run_step:__end__"),
}  # fmt: skip


def test_run_loop_and_step_loop_edges():
    drawn = graph.get_graph(xray=1)
    inner = {n.split(":", 1)[1] for n in drawn.nodes if n.startswith("run_step:")}
    assert inner - {"__start__", "__end__"} == STEP_NODES
    assert {n for n in drawn.nodes if ":" not in n} - {"__start__", "__end__"} == RUN_NODES - {
        "run_step"
    }
    assert {(e.source, e.target) for e in drawn.edges if e.conditional} == CONDITIONAL
    # The only way back into execute is through a corrective prompt.
    assert {e.source for e in drawn.edges if e.target == "run_step:execute"} == {
        "run_step:prepare",
        "run_step:correct",
    }


def test_mermaid_snapshot():
    assert graph.get_graph(xray=1).draw_mermaid() == SNAPSHOT.read_text(encoding="utf-8")


def test_exported_plan_graph_has_no_checkpointer():
    assert graph.checkpointer is None and graph.name == "plan"
    assert set(build_plan_graph().nodes) == RUN_NODES


def test_a_step_goes_to_next_step_only_when_something_can_follow_it():
    def state(status: str, **fields) -> dict:
        return {"step": {"id": "s"}, "step_results": {"s": {"status": status}}, **fields}

    assert (
        route_after_finish(state("completed")) == END
    )  # a lone step of a batch: one checkpoint less
    assert route_after_finish(state("completed", lane=[{"id": "t"}])) == "next_step"
    assert route_after_finish(state("completed", windowed=True)) == "next_step"
    assert route_after_finish(state("failed")) == "next_step"  # its batch's lanes must stop
    assert route_after_step({"lane_move": "end", "step": {"id": "t"}}) == END
    assert route_after_step({"lane_move": "next", "step": {"id": "t", "type": "human_review"}}) == (
        "human_review"
    )
