"""Routers of the plan graph: pure functions of status enums, typed flags and counters; they
never read notes, diagnoses or any other prose."""

from __future__ import annotations

from typing import Literal

from langgraph.graph import END
from langgraph.types import Send

from veriloop.graph.plan_state import PlanState, StepState
from veriloop.nodes.plan.dispatch import step_inputs


def route_after_plan(state: PlanState) -> Literal["critique", "finalize"]:
    """A user's manifest that did not parse ends the run as rejected; anything else is critiqued."""
    return "finalize" if state.get("status") == "rejected" else "critique"


def route_after_critique(state: PlanState) -> Literal["plan", "dispatch", "finalize"]:
    """Approved -> run; rejected -> finalize; a model's plan sent back (plan cleared) -> plan."""
    if state.get("status") == "rejected":
        return "finalize"
    if state.get("plan_approved"):
        return "dispatch"
    return "plan"


def route_dispatch(state: PlanState) -> list[Send] | Literal["finalize"]:
    """One Send per lane (run in parallel, bounded by the run's max_concurrency)."""
    if state.get("halted") or not state.get("lanes"):
        return "finalize"
    return [Send("run_step", step_input) for step_input in step_inputs(state)]


def route_after_batch(state: PlanState) -> Literal["replan", "dispatch", "finalize"]:
    """A halt ends the run; blocked steps with replan budget left replan; otherwise the next batch."""
    if state.get("halted"):
        return "finalize"
    if state.get("replan_required"):
        return "replan"
    return "dispatch"


def route_step_start(state: StepState) -> Literal["prepare", "human_review", "subplan"]:
    """A human review waits for a person, a plan step runs its child plan, the rest run the loop."""
    step = state["step"]
    if step.get("type") == "human_review":
        return "human_review"
    if step.get("executor") == "plan":
        return "subplan"
    return "prepare"


def route_after_finish(state: StepState) -> Literal["next_step", "__end__"]:
    """A step that did not complete, or one its lane may follow (its chain, the batch's window),
    goes to next_step; a lone step of a batch with no window ends the task (one checkpoint less)."""
    result = (state.get("step_results") or {}).get(state["step"]["id"]) or {}
    if result.get("status") != "completed" or state.get("lane") or state.get("windowed"):
        return "next_step"
    return END


def route_after_step(
    state: StepState,
) -> Literal["prepare", "human_review", "subplan", "__end__"]:
    """A lane's next step starts like any step; the end of its lane ends the task."""
    return route_step_start(state) if state.get("lane_move") == "next" else END


def route_after_check(state: StepState) -> Literal["correct", "finish"]:
    """Only the fix loop's typed move decides: retry -> a corrective attempt; anything else ends."""
    return "correct" if state.get("move") == "retry" else "finish"
