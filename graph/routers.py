"""Routers: pure functions of typed flags and integer budgets; they never look at free text."""

from __future__ import annotations

from typing import Literal

from langgraph.graph import END
from langgraph.runtime import Runtime

from veriloop.context import Context
from veriloop.graph.io import current_verification
from veriloop.graph.state import State
from veriloop.nodes.correction import correction_decision


def route_entry(state: State) -> Literal["planning", "observation"]:
    """A previous action with its before_state is verified first; a new task (or no before_state) plans."""
    if state.get("action_history") and state.get("before_state"):
        return "observation"
    return "planning"


def route_after_observation(
    state: State,
) -> (
    Literal["correction", "verification"]
    | list[Literal["verification", "lookahead", "audit_ahead"]]
):
    """No change (already a verdict) -> correction; else the model judges, beside the lookahead
    or the finish audit when planned."""
    if current_verification(state) is not None:
        return "correction"
    if state.get("lookahead_planned"):
        return ["verification", "lookahead"]
    if state.get("audit_ahead_planned"):
        return ["verification", "audit_ahead"]
    return "verification"


def route_after_verification(
    state: State, runtime: Runtime[Context]
) -> Literal["goal_achieved", "use_lookahead", "planning", "correction"]:
    """goal_achieved -> finish; a success (no loop, step budget left) -> next step; anything else -> correction.

    The next step's action is already prepared when a lookahead ran beside this verdict.
    """
    ctx = runtime.context or Context()
    verification = state.get("verification_result") or {}
    if verification.get("goal_achieved") is True:
        return "goal_achieved"
    steps_left = len(state.get("action_history") or []) < ctx.max_steps_per_task
    if (
        verification.get("success") is True
        and not verification.get("repeated_action")
        and steps_left
    ):
        return "use_lookahead" if state.get("lookahead_planned") else "planning"
    return "correction"


def route_after_action_generation(state: State) -> Literal["finalize", "correction"]:
    """An action that was rejected twice (bad element id, finish()/fail(), garbage) goes to correction."""
    return "correction" if state.get("needs_correction") else "finalize"


def route_after_use_lookahead(state: State) -> Literal["correction", "__end__"]:
    """A prepared action that failed action_generation's checks goes to correction; a valid one
    was finalized by use_lookahead itself."""
    return "correction" if state.get("needs_correction") else END


def route_after_correction(
    state: State, runtime: Runtime[Context]
) -> Literal["finalize", "replanning"]:
    """Correction's budget for this step spent (or a loop) -> replanning; a retry or fail() -> finalize."""
    decision = correction_decision(state, runtime.context or Context())
    return "replanning" if decision.move == "replan" else "finalize"


def route_after_replanning(state: State) -> Literal["planning", "step_refinement"]:
    """A regenerated plan goes through planning; a plan edited in place resumes at step_refinement."""
    if (state.get("replanning_result") or {}).get("plan_regenerated"):
        return "planning"
    if (state.get("plan_validation") or {}).get("minor_modifications_only"):
        return "step_refinement"
    return "planning"


def route_after_completion_audit(
    state: State, runtime: Runtime[Context]
) -> Literal["finalize", "use_lookahead", "planning", "correction"]:
    """The audit agreed -> finalize the finish(); a veto goes on as a verified step that did not finish
    (a lookahead prepared beside the verdict is then used like after any success)."""
    if (state.get("completion_audit") or {}).get("agreed") is True:
        return "finalize"
    after = route_after_verification(state, runtime)
    return "correction" if after == "goal_achieved" else after
