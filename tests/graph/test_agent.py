"""The Python API: Agent.step/astep/run/arun/get_task, and graph.invoke / graph.ainvoke directly."""

from __future__ import annotations

import asyncio

import pytest
from langgraph.checkpoint.memory import InMemorySaver

import veriloop
from veriloop.agent import Agent, UnknownTaskError
from veriloop.graph import build_graph
from veriloop.graph.io import observation_to_input, state_to_response
from veriloop.schemas import Action, Observation

GOAL = "Add a patient named Jas"
NEXT_PAGE = {
    "click(4)": "patient_form",
    'setValue(5, "Jas")': "patient_form_filled",
    "click(7)": "patient_saved",
}


@pytest.fixture
def happy(jas, verdict):
    jas.script(
        "verification",
        verdict(True, False, 0.9),
        verdict(True, False, 0.9),
        verdict(True, True, 0.9, evidence=[2]),
    )
    return jas


def test_unknown_task_and_missing_goal_are_clear_errors(agent, scripted_model, observe):
    with pytest.raises(UnknownTaskError, match="unknown task 'nope'"):
        agent.step(observe("patients", task_id="nope"))
    with pytest.raises(UnknownTaskError):
        agent.get_task("nope")
    with pytest.raises(ValueError, match="needs a non-empty goal"):
        agent.step(observe("patients"))
    assert scripted_model.calls() == 0


def test_run_drives_the_task_with_a_caller_supplied_executor(agent, happy, observe):
    executed: list[Action] = []

    def executor(action: Action) -> Observation:
        executed.append(action)
        return observe(NEXT_PAGE[str(action)])

    report = agent.run(GOAL, executor, observe("patients"), max_steps=10)
    assert report.status == "completed" and report.goal == GOAL
    assert [str(a) for a in executed] == ["click(4)", 'setValue(5, "Jas")', "click(7)"]
    assert len(report.actions) == 4 and len(report.verifications) == 3
    assert report.total_usage.calls == 11  # with the finish audit


def test_run_stops_after_max_steps(agent, happy, observe):
    report = agent.run(
        GOAL, lambda action: observe(NEXT_PAGE[str(action)]), observe("patients"), max_steps=2
    )
    assert report.status == "executing" and len(report.actions) == 2


def test_arun_with_an_async_executor(happy, observe):
    agent = Agent(checkpointer=InMemorySaver())

    async def executor(action: Action) -> Observation:
        await asyncio.sleep(0)
        return observe(NEXT_PAGE[str(action)])

    report = asyncio.run(agent.arun(GOAL, executor, observe("patients")))
    assert report.status == "completed" and [a["action"] for a in report.actions][-1] == "finish()"


def test_graph_invoke_and_ainvoke_share_one_thread(happy, observe):
    compiled = build_graph().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "task-1"}}
    first = state_to_response(
        compiled.invoke(
            observation_to_input(observe("patients", query=GOAL), "task-1", new_task=True), config
        )
    )
    assert first.action == "click(4)"

    async def continue_async():
        state = await compiled.ainvoke(
            observation_to_input(observe("patient_form"), "task-1", new_task=False), config
        )
        return state_to_response(state)

    second = asyncio.run(continue_async())
    assert second.action == 'setValue(5, "Jas")' and second.step_index == 1
    assert second.verification.success


def test_public_names_are_exported_lazily():
    assert veriloop.Agent is Agent and veriloop.build_graph is build_graph
    assert veriloop.Observation is Observation
    assert {"Agent", "Context", "TaskFinishedError", "UnknownTaskError", "parse_action"} <= set(
        veriloop.__all__
    )
    with pytest.raises(AttributeError):
        veriloop.no_such_name  # noqa: B018


def test_step_works_where_an_event_loop_is_already_running(agent, happy, observe):
    """A notebook cell calls the sync API inside a running loop: the async node bodies still run."""

    async def cell() -> str:
        first = agent.step(observe("patients", query=GOAL))
        return agent.step(observe("patient_form", task_id=first.task_id)).action

    assert asyncio.run(cell()) == 'setValue(5, "Jas")'
    assert happy.calls("verification") == 1
