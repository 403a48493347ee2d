"""Critic approval tags; finish() description; finalize bookkeeping."""

from __future__ import annotations

import pytest

from veriloop.engines.critic import parse_critic_response
from veriloop.engines.task import finalize_update, finish_action, task_status
from veriloop.schemas import parse_action


@pytest.mark.parametrize(
    ("text", "approved"),
    [
        ("Looks right.\n<Approved>YES</Approved>", True),
        ("<Approved>NO</Approved>", False),
        ("APPROVED>YES", False),
        ("Approved: YES", False),
        ("I approve this plan, yes.", False),
        ("<approved>yes</approved>", False),
        ("<Approved>YES</Approved> ... <Approved>NO</Approved>", False),
        ("", False),
        (None, False),
    ],
)
def test_parse_critic_response(text, approved):
    assert parse_critic_response(text) is approved


def test_finish_description_comes_from_semantic_summary_not_reason():
    action, thought = finish_action(
        {"semantic_summary": "Jas is in the list", "reason": "Semantic verdict: other"}
    )
    assert str(action) == "finish()"
    assert thought == "Task complete. Jas is in the list"


@pytest.mark.parametrize(
    ("action", "status"),
    [("finish()", "completed"), ('fail("x")', "failed"), ("click(4)", "executing")],
)
def test_task_status(action, status):
    assert task_status(parse_action(action)) == status


def _update(**overrides):
    args = dict(
        action=parse_action("wait(0.5)"),
        thought="retry",
        source="correction",
        history_length=3,
        before_state={"url": "http://clinic.test/", "dom_hash": "abc"},
        plan_step_index=1,
        verified_success=False,
        correction_attempts=1,
        tried_strategies=["refresh_page"],
        correction_strategy="retry_with_delay(0.5)",
    )
    args.update(overrides)
    return finalize_update(**args)


def test_finalize_counts_a_correction_against_the_step():
    update = _update()
    assert update["correction_attempts"] == 2
    assert update["tried_strategies"] == ["refresh_page", "retry_with_delay(0.5)"]
    record = update["action_history"][0]
    assert (
        record["step_index"] == 3
        and record["action"] == "wait(0.5)"
        and record["source"] == "correction"
    )
    assert record["correction_strategy"] == "retry_with_delay(0.5)"  # what the task page shows
    assert record["before_state"]["dom_hash"] == "abc"


def test_a_verified_success_gives_the_next_step_a_fresh_budget():
    update = _update(
        action=parse_action("click(7)"),
        source="action_generation",
        verified_success=True,
        correction_strategy=None,
    )
    assert update["correction_attempts"] == 0 and update["tried_strategies"] == []
    assert update["action_history"][0]["correction_strategy"] is None
    assert update["status"] == "executing"
