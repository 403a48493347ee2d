"""Correction: the budget decision and the strategies, never offered again unchanged on a step."""

from __future__ import annotations

import itertools

import pytest

from veriloop.context import Context
from veriloop.engines.correction import (
    InvalidStrategy,
    choose_correction,
    decide_correction,
    offered_strategies,
    strategy_action,
)
from veriloop.engines.step_context import StepContext
from veriloop.llm import get_llm
from veriloop.schemas import CorrectionChoice, parse_action

pytestmark = pytest.mark.anyio

URL = "http://clinic.test/patients/new"
PAGE_IDS = {1, 2, 5, 6, 7, 8}


@pytest.mark.parametrize(
    ("impossible", "repeated", "attempts", "replans", "steps"),
    list(itertools.product([False, True], [False, True], [0, 2, 3], [0, 2, 3], [5, 40])),
)
def test_decide_correction_over_every_combination(impossible, repeated, attempts, replans, steps):
    decision = decide_correction(
        impossible=impossible,
        repeated_action=repeated,
        correction_attempts=attempts,
        replan_count=replans,
        steps_taken=steps,
        max_corrections=3,
        max_replans=3,
        max_steps=40,
    )
    if impossible or steps >= 40:
        assert decision.move == "fail"
    elif repeated or attempts >= 3:
        assert decision.move == ("replan" if replans < 3 else "fail")
    else:
        assert decision.move == "retry"
    assert (decision.reason != "") == (decision.move != "retry")


def _apply(strategy, tried=(), element=None, failed="click(7)"):
    choice = CorrectionChoice(strategy=strategy, thought="t", element_id=element)
    failed_action = parse_action(failed) if failed else None
    return strategy_action(
        choice, failed_action=failed_action, page_ids=PAGE_IDS, tried=list(tried)
    )


def test_each_strategy_becomes_a_protocol_action():
    assert _apply("retry_with_delay") == (parse_action("wait(0.5)"), "retry_with_delay(0.5)")
    assert _apply("retry_with_delay", tried=["retry_with_delay(0.5)"])[0] == parse_action("wait(1)")
    assert _apply("alternative_element", element=8) == (
        parse_action("click(8)"),
        "alternative_element(8)",
    )
    assert _apply("alternative_element", element=6, failed='setValue(5, "Jas")')[0] == parse_action(
        'setValue(6, "Jas")'
    )
    assert _apply("scroll_into_view") == (parse_action("scroll(7)"), "scroll_into_view(7)")
    assert _apply("refresh_page") == (parse_action("refresh()"), "refresh_page")


@pytest.mark.parametrize(
    ("strategy", "tried", "element", "failed"),
    [
        ("refresh_page", ["refresh_page"], None, "click(7)"),
        ("alternative_element", ["alternative_element(8)"], 8, "click(7)"),
        ("alternative_element", [], 7, "click(7)"),  # the same element is not an alternative
        ("alternative_element", [], 99, "click(7)"),  # not on the page
        ("alternative_element", [], 8, None),  # nothing to vary
        ("scroll_into_view", ["scroll_into_view(7)"], None, "click(7)"),
        ("fail", [], None, "click(7)"),  # failing is the budgets' call
    ],
)
def test_tried_or_inapplicable_strategies_are_refused(strategy, tried, element, failed):
    with pytest.raises(InvalidStrategy):
        _apply(strategy, tried=tried, element=element, failed=failed)


def test_offered_list_drops_what_was_tried():
    first = offered_strategies([], parse_action("click(7)"))
    later = offered_strategies(["retry_with_delay(0.5)", "refresh_page"], parse_action("click(7)"))
    assert any(line.startswith("refresh_page") for line in first)
    assert not any(line.startswith("refresh_page") for line in later)
    assert "wait(0.5)" in first[0] and "wait(1)" in later[0]
    assert not any(line.startswith("alternative_element") for line in offered_strategies([], None))


async def test_a_repeated_choice_falls_back_to_the_next_delayed_retry(scripted_model, page):
    scripted_model.script("correction", CorrectionChoice(strategy="refresh_page", thought="reload"))
    now = StepContext(
        goal="Add a patient named Jas",
        url=URL,
        dom=page("patient_form"),
        verification={"success": False, "confidence": 0.2, "observations": ["URL did not change"]},
    )
    outcome = await choose_correction(
        get_llm(Context()),
        now,
        failed_action=parse_action("click(7)"),
        problem="the last action did not work",
        tried=["retry_with_delay(0.5)", "refresh_page"],
    )
    assert outcome.strategy == "retry_with_delay(1)" and str(outcome.action) == "wait(1)"
    prompt = scripted_model.requests[0].text
    assert "Already tried on this step: retry_with_delay(0.5), refresh_page" in prompt
    assert "- refresh_page" not in prompt


async def test_garbage_correction_answer_falls_back(scripted_model, page):
    scripted_model.script("correction", "nonsense")
    outcome = await choose_correction(
        get_llm(Context()),
        StepContext(goal="g", url=URL, dom=page("patient_form")),
        failed_action=None,
        problem="no valid action could be chosen",
        tried=[],
    )
    assert str(outcome.action) == "wait(0.5)"
    # The unusable call was still made and paid for: it counts.
    assert outcome.usage["correction"]["calls"] == 1
    assert outcome.usage["correction"]["input_tokens"] > 0


async def test_an_expected_outcome_on_the_page_is_never_redone_on_another_element(
    scripted_model, page
):
    from veriloop.engines.prediction import check_recorded_prediction
    from veriloop.schemas.observation import ClientVerification
    from veriloop.schemas.records import ActionRecord

    record = ActionRecord(
        step_index=0, action="click(7)", action_type="generic", expected_outcome="Jas is saved"
    )
    # The client found the expected element: 0.35 + 0.40 passes the threshold.
    seen = check_recorded_prediction(
        record,
        page_html=page("patient_form"),
        url=URL,
        semantic_confidence=0.35,
        client_verification=ClientVerification(element_found=True, selector="#saved"),
    )
    assert seen.verdict.success
    scripted_model.script(
        "correction", CorrectionChoice(strategy="alternative_element", element_id=5, thought="x")
    )
    now = StepContext(goal="Add a patient named Jas", url=URL, dom=page("patient_form"))
    outcome = await choose_correction(
        get_llm(Context()),
        now,
        failed_action=parse_action("click(7)"),
        problem="the last action did not work",
        tried=[],
        prediction=seen,
        observed=["URL did not change"],
    )
    # Clicking another element would save twice: the choice falls back to waiting.
    assert outcome.strategy == "retry_with_delay(0.5)"
    prompt = scripted_model.requests[0].text
    assert "Expected: Jas is saved; observed: URL did not change" in prompt
    assert "The client found the expected element #saved" in prompt
    assert "- alternative_element" not in prompt
