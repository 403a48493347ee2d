"""Did the last action work, and is the goal done? Observation-based verification (seed Step 5).

Order of cost: the observation list is free; when nothing changed and the
client witnessed nothing the action failed without a model call; otherwise one
structured model call judges the observations (never the full DOM). Only the
typed verdict decides: ``goal_achieved`` and ``success`` come from
``task_completed``/``action_succeeded`` and the confidence, never from words
in ``reason``, and a completion only when the verdict cites observation lines that are changes
(:mod:`veriloop.engines.completion`). A model answer that cannot be used is a failed verification
with ``goal_achieved`` unset; a provider outage (LLMUnavailable) propagates.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from veriloop.engines.completion import cites_changes
from veriloop.engines.log import CLIENT_WITNESS_OVERRIDE, LOW_CONFIDENCE_COMPLETION, task_logger
from veriloop.engines.loop import action_fingerprint
from veriloop.engines.observation import ObservationList, build_observation_list
from veriloop.llm.base import AsyncStructuredLLM, LLMOutputError
from veriloop.prompts.verification import build_verification_messages
from veriloop.schemas.observation import BeforeState, ClientObservations
from veriloop.schemas.outputs import SemanticVerdict
from veriloop.schemas.verification import VerificationResult

NO_CHANGE_CONFIDENCE = 0.2
"""Confidence of the deterministic "nothing happened" failure (seed Step 5.3)."""
SUMMARY_CHARS = 300

_default_log = task_logger(None, None, "verification")


def compute_goal_achieved(
    task_completed: bool,
    confidence: float,
    *,
    threshold: float = 0.70,
    low_confidence_threshold: float = 0.85,
    log: logging.LoggerAdapter | None = None,
) -> bool:
    """``task_completed and confidence >= threshold``; a completion below ``low_confidence_threshold`` is logged."""
    achieved = bool(task_completed) and confidence >= threshold
    if achieved and confidence < low_confidence_threshold:
        (log or _default_log).event(LOW_CONFIDENCE_COMPLETION, f"confidence {confidence:.2f}")
    return achieved


@dataclass
class VerificationOutcome:
    """The verdict, what it cost, and what the graph keeps for the next action."""

    result: VerificationResult
    usage: dict[str, dict]
    """``{"verification": Usage dict}`` when the model was called, else ``{}`` (add_usage-shaped)."""
    page_state: BeforeState
    """The current page, ready to be the ``before_state`` of the next action."""
    fingerprint: str
    """Fingerprint of (verified action, page it acted on); keep it in the step's ``seen_fingerprints``."""


def _flags(observed: ObservationList) -> dict:
    return {
        "observations": observed.observations,
        "meaningful_content_change": observed.meaningful_content_change,
        "url_changed": observed.url_changed,
        "client_saw_something": observed.client_saw_something,
    }


async def verify_action_with_observations(
    *,
    goal: str,
    action: str,
    step_index: int,
    before_state: BeforeState,
    current_dom: str,
    current_url: str,
    llm: AsyncStructuredLLM,
    client_observations: ClientObservations | None = None,
    current_active_element: str | None = None,
    sub_task_objective: str | None = None,
    seen_fingerprints: Sequence[str] = (),
    success_threshold: float = 0.70,
    goal_threshold: float = 0.70,
    low_confidence_threshold: float = 0.85,
    log: logging.LoggerAdapter | None = None,
) -> VerificationOutcome:
    """Verify ``action`` (chosen on ``before_state``) against the page now. See the module docstring.

    Raises LLMUnavailable when the provider cannot be reached: the task must stay unchanged.
    """
    log = log or _default_log
    # Parse, skeleton and diff take ~40 ms on the corpus' slowest 1 MB page: off the event loop,
    # so other tasks' model calls are not held up behind it.
    observed = await asyncio.to_thread(
        build_observation_list,
        before_state,
        current_dom,
        current_url,
        client_observations,
        current_active_element,
    )
    # The page the action acted on: the same action there again is a repeat, whatever happens next.
    fingerprint = action_fingerprint(action, before_state)
    common = {
        "step_index": step_index,
        "repeated_action": fingerprint in seen_fingerprints,
        **_flags(observed),
    }

    def outcome(result: VerificationResult, usage: dict[str, dict]) -> VerificationOutcome:
        return VerificationOutcome(
            result=result, usage=usage, page_state=observed.page_state, fingerprint=fingerprint
        )

    if not (
        observed.url_changed or observed.meaningful_content_change or observed.client_saw_something
    ):
        reason = "No change after the action: " + "; ".join(observed.observations)
        return outcome(
            VerificationResult(
                success=False,
                confidence=NO_CHANGE_CONFIDENCE,
                reason=reason,
                failure_category="no_effect",
                **common,
            ),
            {},
        )
    if not (observed.url_changed or observed.meaningful_content_change):
        log.event(
            CLIENT_WITNESS_OVERRIDE, "proceeding with the model (the client reported a change)"
        )

    messages = build_verification_messages(goal, action, observed.observations, sub_task_objective)
    try:
        answer = await llm.astructured("verification", messages, SemanticVerdict)
    except LLMOutputError as exc:
        log.warning("verification verdict unusable: %s", exc)
        return outcome(
            VerificationResult(
                success=False,
                confidence=0.0,
                reason=f"Verification failed: the model's verdict could not be used ({exc})",
                failure_category="unknown",
                model_called=True,
                **common,
            ),
            {},
        )
    verdict = answer.value
    # A completion counts only with cited change lines: a claim of "done" must point at its proof.
    cited = cites_changes(verdict.evidence, observed.observations)
    if verdict.task_completed and not cited:
        log.warning("completion claimed without valid evidence %s: not achieved", verdict.evidence)
    result = VerificationResult(
        success=verdict.action_succeeded and verdict.confidence >= success_threshold,
        confidence=verdict.confidence,
        reason=verdict.reason,
        action_succeeded=verdict.action_succeeded,
        task_completed=verdict.task_completed,
        goal_achieved=cited
        and compute_goal_achieved(
            verdict.task_completed,
            verdict.confidence,
            threshold=goal_threshold,
            low_confidence_threshold=low_confidence_threshold,
            log=log,
        ),
        evidence=verdict.evidence,
        uncited_completion=verdict.task_completed and not cited,
        sub_task_completed=verdict.sub_task_completed if sub_task_objective else None,
        semantic_summary=verdict.reason[:SUMMARY_CHARS],
        failure_category=verdict.failure_category,
        impossible=verdict.impossible,
        model_called=True,
        **common,
    )
    return outcome(result, answer.usage_update("verification"))
