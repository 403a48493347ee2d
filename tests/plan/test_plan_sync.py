"""The plan graph from plain synchronous Python: ``graph.invoke`` and ``graph.stream``, a human
review's ``interrupt`` and its ``Command(resume=...)``, shell and python steps, a nested plan."""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from plan_testkit import manifest, py_step

from veriloop.context import PlanContext
from veriloop.graph.plan import build_plan_graph
from veriloop.graph.plan_io import state_to_report

REVIEWED = manifest(
    py_step("a"),
    {"id": "shell", "command": "echo from-shell", "depends_on": ["a"]},
    {"id": "sign_off", "type": "human_review", "depends_on": ["shell"], "input": "Ship it?"},
    py_step("after", depends_on=["sign_off"], checks=["depends.sign_off.approved"]),
)


def test_invoke_pauses_at_a_review_and_resumes_with_command(tools, tmp_path):
    # the saver's file outside the workspace: the runner's writes are no step's change
    (tmp_path / "ws").mkdir()
    with SqliteSaver.from_conn_string(str(tmp_path / "plans.sqlite")) as saver:
        graph = build_plan_graph().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "sync-1"}}
        context = PlanContext(
            workspace=str(tmp_path / "ws"), tools=tools, review_critical_steps=False
        )

        paused = graph.invoke({"run_id": "sync-1", "manifest": REVIEWED}, config, context=context)
        (question,) = paused["__interrupt__"]
        assert question.value["step_id"] == "sign_off"
        assert set(paused["step_results"]) == {"a", "shell"}
        assert paused["step_results"]["shell"]["output"]["stdout"].strip() == "from-shell"

        done = graph.invoke(
            Command(resume={"approved": True, "comment": "fine"}), config, context=context
        )
    assert done["status"] == "completed"
    assert done["step_results"]["sign_off"]["output"] == {"approved": True, "comment": "fine"}
    assert state_to_report(done).steps["after"].status == "completed"


def test_stream_yields_progress_events_and_the_interrupt(tools, tmp_path):
    graph = build_plan_graph().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "sync-2"}}
    context = PlanContext(workspace=str(tmp_path), tools=tools, review_critical_steps=False)
    chunks = list(
        graph.stream(
            {"run_id": "sync-2", "manifest": REVIEWED},
            config,
            context=context,
            stream_mode=["custom", "updates"],
            subgraphs=True,
        )
    )
    events = [chunk for _, mode, chunk in chunks if mode == "custom"]
    finished = [e["step_id"] for e in events if e["event"] == "step_finished"]
    assert finished == ["a", "shell"]
    assert any("__interrupt__" in chunk for _, mode, chunk in chunks if mode == "updates")

    resumed = list(
        graph.stream(
            Command(resume={"approved": False, "comment": "not yet"}),
            config,
            context=context,
            stream_mode="custom",
            subgraphs=True,
        )
    )
    statuses = {e["step_id"]: e["status"] for _, e in resumed if e["event"] == "step_finished"}
    assert statuses == {"sign_off": "failed", "after": "blocked"}
    assert graph.get_state(config).values["status"] == "failed"


def test_invoke_runs_a_nested_plan(tools, tmp_path):
    nested = manifest(
        py_step("outer"),
        {"id": "inner", "depends_on": ["outer"], "plan": manifest(py_step("x"), py_step("y"))},
    )
    # The sync saver has no async methods: the child plan runs with invoke as well.
    # the saver's file outside the workspace: the runner's writes are no step's change
    (tmp_path / "ws").mkdir()
    with SqliteSaver.from_conn_string(str(tmp_path / "plans.sqlite")) as saver:
        done = (
            build_plan_graph()
            .compile(checkpointer=saver)
            .invoke(
                {"run_id": "sync-3", "manifest": nested},
                {"configurable": {"thread_id": "sync-3"}},
                context=PlanContext(
                    workspace=str(tmp_path / "ws"), tools=tools, review_critical_steps=False
                ),
            )
        )
    assert done["status"] == "completed"
    assert set(done["step_results"]["inner"]["sub_run"]["steps"]) == {"x", "y"}
