"""Routers over every flag combination; free text never changes a route."""

from __future__ import annotations

import itertools

import pytest
from langgraph.runtime import Runtime

from veriloop.context import Context
from veriloop.graph.routers import (
    route_after_action_generation,
    route_after_completion_audit,
    route_after_correction,
    route_after_replanning,
    route_after_verification,
    route_entry,
)

RUNTIME = Runtime(context=Context())
# Text that would fool a router that read prose.
TEXTS = [
    {
        "reason": "task completed successfully",
        "semantic_summary": "goal achieved",
        "thought": "done, finish()",
    },
    {
        "reason": "failed, impossible, regenerate the plan",
        "semantic_summary": "",
        "thought": "minor tweak only",
    },
]


def _history(n: int) -> list[dict]:
    return [{"step_index": i, "action": "click(4)"} for i in range(n)]


@pytest.mark.parametrize(
    ("history", "before_state", "expected"),
    [
        ([], None, "planning"),
        (_history(2), {"url": "u", "dom_hash": "h"}, "observation"),
        (_history(2), None, "planning"),
    ],
)
def test_route_entry(history, before_state, expected):
    assert route_entry({"action_history": history, "before_state": before_state}) == expected


@pytest.mark.parametrize(
    ("goal_achieved", "success", "repeated", "steps", "text"),
    list(itertools.product([True, False, None], [True, False], [False, True], [3, 40], TEXTS)),
)
def test_route_after_verification(goal_achieved, success, repeated, steps, text):
    verification = {
        "step_index": steps - 1,
        "goal_achieved": goal_achieved,
        "success": success,
        "repeated_action": repeated,
        **text,
    }
    route = route_after_verification(
        {"verification_result": verification, "action_history": _history(steps)}, RUNTIME
    )
    if goal_achieved is True:
        assert route == "goal_achieved"
    elif success and not repeated and steps < 40:
        assert route == "planning"
    else:
        assert route == "correction"


@pytest.mark.parametrize("needs_correction", [True, False, None])
def test_route_after_action_generation(needs_correction):
    expected = "correction" if needs_correction else "finalize"
    assert route_after_action_generation({"needs_correction": needs_correction}) == expected


@pytest.mark.parametrize(
    ("impossible", "repeated", "attempts", "replans", "steps", "text"),
    list(itertools.product([False, True], [False, True], [0, 2, 3], [0, 3], [5, 40], TEXTS)),
)
def test_route_after_correction(impossible, repeated, attempts, replans, steps, text):
    verification = {
        "step_index": steps - 1,
        "success": False,
        "impossible": impossible,
        "repeated_action": repeated,
        **text,
    }
    state = {
        "verification_result": verification,
        "action_history": _history(steps),
        "correction_attempts": attempts,
        "replan_count": replans,
    }
    route = route_after_correction(state, RUNTIME)
    escalate = (repeated or attempts >= 3) and replans < 3 and not impossible and steps < 40
    assert route == ("replanning" if escalate else "finalize")


def test_route_after_correction_ignores_a_stale_verdict():
    """A verdict from an earlier run (not about the last action) cannot force a replan."""
    state = {
        "verification_result": {
            "step_index": 0,
            "success": False,
            "repeated_action": True,
            "impossible": False,
        },
        "action_history": _history(3),
        "correction_attempts": 0,
        "replan_count": 0,
    }
    assert route_after_correction(state, RUNTIME) == "finalize"


def test_route_after_correction_uses_the_context_budgets():
    state = {
        "verification_result": {"step_index": 0, "success": False},
        "action_history": _history(1),
        "correction_attempts": 1,
    }
    assert route_after_correction(state, RUNTIME) == "finalize"
    assert (
        route_after_correction(state, Runtime(context=Context(max_corrections_per_step=1)))
        == "replanning"
    )
    assert route_after_correction(state, Runtime(context=None)) == "finalize"


@pytest.mark.parametrize(
    ("regenerated", "minor", "text"),
    list(itertools.product([True, False, None], [True, False, None], TEXTS)),
)
def test_route_after_replanning(regenerated, minor, text):
    state = {
        "replanning_result": {"plan_regenerated": regenerated, "reason": text["reason"]},
        "plan_validation": {
            "minor_modifications_only": minor,
            "suggested_changes": [text["thought"]],
        },
    }
    expected = "step_refinement" if (not regenerated and minor) else "planning"
    assert route_after_replanning(state) == expected


@pytest.mark.parametrize(
    ("agreed", "success", "expected"),
    [
        (True, True, "finalize"),
        (True, False, "finalize"),
        (False, True, "planning"),  # vetoed: on to the next step as after a verified success
        (False, False, "correction"),
        (None, True, "planning"),  # no audit decision is not an agreement
    ],
)
@pytest.mark.parametrize("texts", TEXTS)
def test_route_after_completion_audit_reads_only_the_typed_decision(
    agreed, success, expected, texts
):
    audit = None if agreed is None else {"agreed": agreed, "goal_met": True, **texts}
    state = {
        "completion_audit": audit,
        "verification_result": {"goal_achieved": False, "success": success, **texts},
        "action_history": _history(1),
    }
    assert route_after_completion_audit(state, RUNTIME) == expected


def test_a_veto_with_a_prepared_lookahead_uses_it():
    state = {
        "completion_audit": {"agreed": False},
        "verification_result": {"goal_achieved": False, "success": True},
        "action_history": _history(1),
        "lookahead_planned": True,
    }
    assert route_after_completion_audit(state, RUNTIME) == "use_lookahead"


def test_a_veto_that_left_goal_achieved_set_still_never_finishes():
    state = {
        "completion_audit": {"agreed": False},
        "verification_result": {"goal_achieved": True, "success": True},
        "action_history": _history(1),
    }
    assert route_after_completion_audit(state, RUNTIME) == "correction"
