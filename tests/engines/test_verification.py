"""The verification engine against the real openai client and the scripted model server."""

from __future__ import annotations

import logging

import pytest

from veriloop.context import Context
from veriloop.engines.log import CLIENT_WITNESS_OVERRIDE, LOW_CONFIDENCE_COMPLETION
from veriloop.engines.loop import action_fingerprint
from veriloop.engines.observation import capture_page_state
from veriloop.engines.verification import compute_goal_achieved, verify_action_with_observations
from veriloop.llm import LLMUnavailable
from veriloop.llm.scripted import Fail, Refusal
from veriloop.schemas import ClientObservations, SemanticVerdict

pytestmark = pytest.mark.anyio

URL = "https://clinic.example/patients/new"
GOAL = "Add a patient named Jas"


def verdict(**overrides) -> SemanticVerdict:
    fields = {
        "action_succeeded": True,
        "task_completed": False,
        "confidence": 0.9,
        "reason": "The form saved.",
    }
    return SemanticVerdict(**{**fields, **overrides})


def events(caplog, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == name]


@pytest.fixture
def verify(page, llm):
    """Verify click(14) chosen on the unchanged form against ``after`` (keyword overrides pass through)."""

    async def run(after: str | None = None, **kwargs):
        arguments = {
            "goal": GOAL,
            "action": "click(14)",
            "step_index": 2,
            "before_state": capture_page_state(URL, page()),
            "current_dom": page() if after is None else after,
            "current_url": URL,
            "llm": llm,
            **kwargs,
        }
        return await verify_action_with_observations(**arguments)

    return run


# --- compute_goal_achieved ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("task_completed", "confidence", "achieved", "low"),
    [
        (True, 0.69, False, False),
        (True, 0.70, True, True),
        (True, 0.849, True, True),
        (True, 0.85, True, False),
        (True, 1.0, True, False),
        (False, 1.0, False, False),
    ],
)
def test_compute_goal_achieved_thresholds(caplog, task_completed, confidence, achieved, low):
    caplog.set_level(logging.INFO, logger="veriloop")
    assert compute_goal_achieved(task_completed, confidence) is achieved
    assert bool(events(caplog, LOW_CONFIDENCE_COMPLETION)) is low


def test_engine_defaults_match_the_context_defaults():
    ctx = Context()
    assert (ctx.success_threshold, ctx.goal_threshold, ctx.low_confidence_threshold) == (
        0.70,
        0.70,
        0.85,
    )
    defaults = verify_action_with_observations.__kwdefaults__
    assert defaults["success_threshold"] == ctx.success_threshold
    assert defaults["goal_threshold"] == ctx.goal_threshold
    assert defaults["low_confidence_threshold"] == ctx.low_confidence_threshold


# --- deterministic failure: nothing changed -------------------------------------------------


async def test_nothing_changed_fails_without_a_model_call(verify, scripted_model):
    outcome = await verify()
    result = outcome.result
    assert scripted_model.calls("verification") == 0
    assert (result.success, result.confidence, result.goal_achieved) == (False, 0.2, None)
    assert result.failure_category == "no_effect"
    assert result.model_called is False
    assert outcome.usage == {}
    assert "URL did not change" in result.reason


async def test_ticker_only_change_fails_without_a_model_call(verify, page, scripted_model):
    result = (await verify(page(ticker="12:00:09", quote="Cut once."))).result
    assert scripted_model.calls("verification") == 0
    assert (result.success, result.confidence, result.goal_achieved) == (False, 0.2, None)
    assert result.meaningful_content_change is False


async def test_witness_only_change_reaches_the_model_and_logs_the_override(
    verify, scripted_model, caplog
):
    caplog.set_level(logging.INFO, logger="veriloop")
    scripted_model.script("verification", verdict(action_succeeded=False, confidence=0.8))
    outcome = await verify(client_observations=ClientObservations(did_network_occur=True))
    assert scripted_model.calls("verification") == 1
    assert events(caplog, CLIENT_WITNESS_OVERRIDE)
    assert outcome.result.model_called is True
    assert "Background network activity detected" in scripted_model.requests[0].text


async def test_a_real_change_does_not_log_the_override(verify, page, scripted_model, caplog):
    caplog.set_level(logging.INFO, logger="veriloop")
    scripted_model.script("verification", verdict())
    await verify(page(button="Saved"), client_observations=ClientObservations(did_dom_mutate=True))
    assert not events(caplog, CLIENT_WITNESS_OVERRIDE)


# --- the semantic verdict ---------------------------------------------------------------------


async def test_step_succeeded_but_goal_not_done(verify, page, scripted_model):
    scripted_model.script(
        "verification", verdict(action_succeeded=True, task_completed=False, confidence=0.9)
    )
    outcome = await verify(page(button="Saved"))
    result = outcome.result
    assert (
        result.success,
        result.goal_achieved,
        result.action_succeeded,
        result.task_completed,
    ) == (
        True,
        False,
        True,
        False,
    )
    assert result.observations == [
        "URL did not change",
        "Element '14' changed 'text' from 'Save' to 'Saved'",
    ]
    assert outcome.usage["verification"]["calls"] == 1
    assert outcome.page_state == capture_page_state(URL, page(button="Saved"))


async def test_completion_at_medium_confidence_finishes_and_is_logged(
    verify, page, scripted_model, caplog
):
    caplog.set_level(logging.INFO, logger="veriloop")
    scripted_model.script(
        "verification", verdict(task_completed=True, confidence=0.75, evidence=[2])
    )
    result = (await verify(page(alert="Patient saved"))).result
    assert result.goal_achieved is True
    assert events(caplog, LOW_CONFIDENCE_COMPLETION)


@pytest.mark.parametrize(("confidence", "success"), [(0.69, False), (0.70, True)])
async def test_success_threshold(verify, page, scripted_model, confidence, success):
    scripted_model.script(
        "verification",
        verdict(action_succeeded=True, task_completed=True, confidence=confidence, evidence=[2]),
    )
    result = (await verify(page(button="Saved"))).result
    assert result.success is success
    assert result.goal_achieved is success


async def test_thresholds_come_from_the_caller(verify, page, scripted_model):
    scripted_model.script(
        "verification", verdict(task_completed=True, confidence=0.8, evidence=[2])
    )
    result = (await verify(page(button="Saved"), success_threshold=0.9, goal_threshold=0.9)).result
    assert (result.success, result.goal_achieved) == (False, False)


async def test_routing_fields_not_reason_words_decide(verify, page, scripted_model):
    # Pitfalls 1 and 2: the reason's wording never completes or blocks a task.
    scripted_model.script(
        "verification",
        verdict(
            task_completed=False,
            confidence=0.95,
            reason="Task completed successfully, aligns with the goal",
        ),
        verdict(
            task_completed=True,
            action_succeeded=True,
            confidence=0.95,
            reason="failed? not sure",
            evidence=[2],
        ),
    )
    assert (await verify(page(button="Saved"))).result.goal_achieved is False
    assert (await verify(page(button="Saved"))).result.goal_achieved is True


async def test_semantic_summary_is_the_first_300_characters_of_the_reason(
    verify, page, scripted_model
):
    reason = "The patient record was saved. " * 20
    scripted_model.script("verification", verdict(reason=reason))
    result = (await verify(page(button="Saved"))).result
    assert result.reason == reason
    assert result.semantic_summary == reason[:300]


async def test_failure_category_and_impossible_pass_through(verify, page, scripted_model):
    scripted_model.script(
        "verification",
        verdict(
            action_succeeded=False, confidence=0.9, failure_category="blocked_auth", impossible=True
        ),
    )
    result = (await verify(page(alert="Please sign in to add patients"))).result
    assert (result.success, result.failure_category, result.impossible) == (
        False,
        "blocked_auth",
        True,
    )


async def test_sub_task_objective_is_shown_and_its_verdict_kept(verify, page, scripted_model):
    scripted_model.script(
        "verification", verdict(sub_task_completed=True), verdict(sub_task_completed=True)
    )
    with_sub_task = (
        await verify(page(button="Saved"), sub_task_objective="Open the new-patient form")
    ).result
    assert with_sub_task.sub_task_completed is True
    assert (
        "Current sub-task objective: Open the new-patient form" in scripted_model.requests[0].text
    )
    # A flat plan has no sub-task: a stray flag from the model is not kept.
    assert (await verify(page(button="Saved"))).result.sub_task_completed is None


async def test_the_prompt_carries_observations_not_the_dom(verify, page, scripted_model):
    scripted_model.script("verification", verdict())
    await verify(page(button="Saved", quote="UNIQUE-FOOTER-TEXT"))
    request = scripted_model.requests[0]
    assert request.purpose == "verification"
    assert "Element '14' changed 'text' from 'Save' to 'Saved'" in request.text
    assert "UNIQUE-FOOTER-TEXT" not in request.text
    assert "<form>" not in request.text
    assert GOAL in request.text and "click(14)" in request.text


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_answer",
    [
        "this is not json",
        '{"action_succeeded": true}',
        '{"action_succeeded": true, "task_completed": true, "confidence": 7, "reason": "x"}',
        Refusal(),
    ],
)
async def test_unusable_model_output_is_a_failed_verification_that_never_completes(
    verify, page, scripted_model, bad_answer
):
    scripted_model.script("verification", bad_answer)
    outcome = await verify(page(button="Saved"))
    result = outcome.result
    assert scripted_model.calls("verification") == 1
    assert (result.success, result.goal_achieved, result.task_completed) == (False, None, False)
    assert result.failure_category == "unknown"
    assert result.model_called is True
    # The next action can still be chosen on this page.
    assert outcome.page_state.semantic_skeleton is not None


async def test_provider_outage_propagates(verify, page, scripted_model):
    scripted_model.script("verification", Fail(status=503))
    with pytest.raises(LLMUnavailable):
        await verify(page(button="Saved"))


# --- loop memory --------------------------------------------------------------------------------


async def test_repeated_action_on_an_unchanged_page_is_flagged(verify, page, scripted_model):
    start = capture_page_state(URL, page())
    first = await verify(before_state=start)
    assert first.result.repeated_action is False
    assert first.fingerprint == action_fingerprint("click(14)", start)
    # The correction tried the same click on the same page (the ticker moved; the skeleton did not).
    again = await verify(
        before_state=capture_page_state(URL, page(ticker="12:30:00")),
        seen_fingerprints=[first.fingerprint],
    )
    assert again.result.repeated_action is True
    other = await verify(action="click(13)", seen_fingerprints=[first.fingerprint])
    assert other.result.repeated_action is False
    assert scripted_model.calls("verification") == 0
