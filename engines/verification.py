"""Did the last action work, and is the goal done? Observation-based verification (seed Step 5).

Order of cost: the observation list is free; when nothing changed and the
client witnessed nothing the action failed without a model call; otherwise one
structured model call judges the observations (never the full DOM). Only the
typed verdict decides: ``goal_achieved`` and ``success`` come from
``task_completed``/``action_succeeded`` and the confidence, never from words
in ``reason``, and a completion only when the verdict cites observation lines that are changes
(:mod:`veriloop.engines.completion`). A model answer that cannot be used is a failed verification
with ``goal_achieved`` unset; a provider outage (LLMUnavailable) propagates.

Grounding (off unless a search provider is given): when the verdict names a
``lookup_query`` or its confidence sits between the thresholds, one web lookup
runs and the model judges again with the results fenced as untrusted data; the
second verdict stands, its reason citing the sources. At most one lookup per
verification; a search outage keeps the first verdict and logs an event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from veriloop.engines.completion import cites_changes
from veriloop.engines.dom_context import remember_compact_page
from veriloop.engines.log import (
    CLIENT_WITNESS_OVERRIDE,
    GROUNDED_VERDICT,
    GROUNDING_UNAVAILABLE,
    LOW_CONFIDENCE_COMPLETION,
    task_logger,
)
from veriloop.engines.loop import action_fingerprint
from veriloop.engines.observation import ObservationList, build_observation_list
from veriloop.llm.base import (
    AsyncStructuredLLM,
    LLMOutputError,
    SearchProvider,
    SearchResults,
    SearchUnavailable,
    Structured,
)
from veriloop.prompts.grounding import grounded_messages, render_results
from veriloop.prompts.verification import build_verification_messages
from veriloop.schemas.actions import Action, ActionParseError, parse_action
from veriloop.schemas.observation import BeforeState, ClientObservations
from veriloop.schemas.outputs import SemanticVerdict
from veriloop.schemas.usage import add_usage
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
    """``{"verification": Usage dict}`` when the model was called (plus ``"grounding"`` after a
    lookup), else ``{}`` (add_usage-shaped)."""
    page_state: BeforeState
    """The current page, ready to be the ``before_state`` of the next action."""
    fingerprint: str
    """Fingerprint of (verified action, page it acted on); keep it in the step's ``seen_fingerprints``."""


def needs_lookup(
    verdict: SemanticVerdict, *, threshold: float, low_confidence_threshold: float
) -> bool:
    """The verdict asks for a fact (``lookup_query``) or is unsure: ``threshold <= confidence < low``."""
    return bool(verdict.lookup_query) or threshold <= verdict.confidence < low_confidence_threshold


async def _look_up(
    search: SearchProvider, query: str, log: logging.LoggerAdapter
) -> SearchResults | None:
    """The lookup's results; None (and a logged event) when the provider failed or found nothing."""
    try:
        results = await search.asearch(query)
    except SearchUnavailable as exc:
        log.event(GROUNDING_UNAVAILABLE, f"{exc}; keeping the ungrounded verdict", logging.WARNING)
        return None
    if not results.hits and not results.answer:
        log.event(GROUNDING_UNAVAILABLE, f"{search.name} found nothing for {query!r}")
        return None
    return results


@dataclass
class ActionObservation:
    """The free part of verification (cost order 1-2): what changed, and the verdict when nothing did."""

    facts: VerificationResult
    """The observation lines and typed flags, as a not-yet-judged result (failed, confidence 0)."""
    no_change: VerificationResult | None
    """The deterministic failure when nothing changed and the client witnessed nothing; else None."""
    page_state: dict[str, Any]
    """The current page, ready to be the ``before_state`` of the next action (``BeforeState.stored``)."""
    fingerprint: str
    """Fingerprint of (verified action, page it acted on)."""


def observe_page(
    before: BeforeState | Mapping[str, Any],
    dom: str,
    url: str,
    client: ClientObservations | None,
    active: str | None,
    action: str,
) -> tuple[ObservationList, str]:
    """The page work of :func:`observe_action` in one call, which may run in a page process: the
    observation list (with the page's compact form for the next prompt) and the fingerprint of
    ``action`` on the page it acted on. ``before`` may be a stored dump: it is parsed here, where the
    page work runs, not in the process that forwards it."""
    before = BeforeState.model_validate(before)
    try:  # once for both readers
        read: Action | str = parse_action(action)
    except ActionParseError:
        read = action
    observed = build_observation_list(before, dom, url, client, active, read, keep_compact=True)
    return observed, action_fingerprint(read, before)


async def observe_action(
    *,
    action: str,
    step_index: int,
    before_state: BeforeState | Mapping[str, Any],
    current_dom: str,
    current_url: str,
    client_observations: ClientObservations | None = None,
    current_active_element: str | None = None,
    seen_fingerprints: Sequence[str] = (),
    offload: Callable[..., Awaitable[Any]] = asyncio.to_thread,
) -> ActionObservation:
    """What changed after ``action`` (chosen on ``before_state``), and the no-change verdict; no model call.

    ``offload`` runs the page work off the event loop: a worker thread by default, the
    service's page processes (:mod:`veriloop.page_processes`) when it has them.
    """
    # Parse, skeleton and diff take ~40 ms on the corpus' slowest 1 MB page: off the event loop,
    # so other tasks' model calls are not held up behind it. The next action's prompt reads the
    # page's compact form from the same parse (a second parse was an eighth of a step's CPU).
    # The page the action acted on fingerprints it: the same action there again is a repeat.
    observed, fingerprint = await offload(
        observe_page,
        before_state,
        current_dom,
        current_url,
        client_observations,
        current_active_element,
        action,
    )
    if observed.compact_page is not None:
        remember_compact_page(current_dom, observed.compact_page)
    facts = VerificationResult(
        step_index=step_index,
        success=False,
        confidence=0.0,
        reason="",
        repeated_action=fingerprint in seen_fingerprints,
        observations=observed.observations,
        meaningful_content_change=observed.meaningful_content_change,
        url_changed=observed.url_changed,
        client_saw_something=observed.client_saw_something,
    )
    no_change = None
    if not (
        observed.url_changed or observed.meaningful_content_change or observed.client_saw_something
    ):
        no_change = facts.model_copy(
            update={
                "confidence": NO_CHANGE_CONFIDENCE,
                "reason": "No change after the action: " + "; ".join(observed.observations),
                "failure_category": "no_effect",
            }
        )
    return ActionObservation(facts, no_change, observed.page_state, fingerprint)


async def judge_action(
    facts: VerificationResult,
    *,
    goal: str,
    action: str,
    llm: AsyncStructuredLLM,
    sub_task_objective: str | None = None,
    success_threshold: float = 0.70,
    goal_threshold: float = 0.70,
    low_confidence_threshold: float = 0.85,
    search: SearchProvider | None = None,
    log: logging.LoggerAdapter | None = None,
) -> tuple[VerificationResult, dict[str, dict]]:
    """The semantic verdict (cost order 3) on observations that showed a change: one model call.

    Returns the judged result and its usage. Raises LLMUnavailable when the
    provider cannot be reached: the task must stay unchanged.
    """
    log = log or _default_log
    if not (facts.url_changed or facts.meaningful_content_change):
        log.event(
            CLIENT_WITNESS_OVERRIDE, "proceeding with the model (the client reported a change)"
        )
    messages = build_verification_messages(goal, action, facts.observations, sub_task_objective)
    try:
        answer = await llm.astructured("verification", messages, SemanticVerdict)
    except LLMOutputError as exc:
        log.warning("verification verdict unusable: %s", exc)
        unusable = {
            "reason": f"Verification failed: the model's verdict could not be used ({exc})",
            "failure_category": "unknown",
            "model_called": True,
        }
        # The unusable call still counts.
        return facts.model_copy(update=unusable), exc.usage_update("verification")
    usage = answer.usage_update("verification")
    sources: list[str] = []
    if search is not None and needs_lookup(
        answer.value,
        threshold=min(success_threshold, goal_threshold),
        low_confidence_threshold=low_confidence_threshold,
    ):
        answer, usage, sources = await _grounded(llm, search, messages, goal, answer, usage, log)
    verdict = answer.value
    # A completion counts only with cited change lines: a claim of "done" must point at its proof.
    cited = cites_changes(verdict.evidence, facts.observations)
    if verdict.task_completed and not cited:
        log.warning("completion claimed without valid evidence %s: not achieved", verdict.evidence)
    reason = verdict.reason
    if sources:
        reason += " Sources: " + "; ".join(f"[{n}] {url}" for n, url in enumerate(sources, 1))
    judged = {
        "success": verdict.action_succeeded and verdict.confidence >= success_threshold,
        "confidence": verdict.confidence,
        "reason": reason,
        "action_succeeded": verdict.action_succeeded,
        "task_completed": verdict.task_completed,
        "goal_achieved": cited
        and compute_goal_achieved(
            verdict.task_completed,
            verdict.confidence,
            threshold=goal_threshold,
            low_confidence_threshold=low_confidence_threshold,
            log=log,
        ),
        "evidence": verdict.evidence,
        "uncited_completion": verdict.task_completed and not cited,
        "sub_task_completed": verdict.sub_task_completed if sub_task_objective else None,
        "semantic_summary": verdict.reason[:SUMMARY_CHARS],
        "failure_category": verdict.failure_category,
        "impossible": verdict.impossible,
        "model_called": True,
        "grounding_sources": sources,
    }
    return facts.model_copy(update=judged), usage


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
    search: SearchProvider | None = None,
    log: logging.LoggerAdapter | None = None,
) -> VerificationOutcome:
    """Verify ``action`` against the page now: :func:`observe_action`, then :func:`judge_action`
    unless nothing changed. See the module docstring.

    Raises LLMUnavailable when the provider cannot be reached: the task must stay unchanged.
    """
    observed = await observe_action(
        action=action,
        step_index=step_index,
        before_state=before_state,
        current_dom=current_dom,
        current_url=current_url,
        client_observations=client_observations,
        current_active_element=current_active_element,
        seen_fingerprints=seen_fingerprints,
    )
    result, usage = observed.no_change, {}
    if result is None:
        result, usage = await judge_action(
            observed.facts,
            goal=goal,
            action=action,
            llm=llm,
            sub_task_objective=sub_task_objective,
            success_threshold=success_threshold,
            goal_threshold=goal_threshold,
            low_confidence_threshold=low_confidence_threshold,
            search=search,
            log=log,
        )
    page_state = BeforeState.model_validate(observed.page_state)
    return VerificationOutcome(result, usage, page_state, observed.fingerprint)


async def _grounded(
    llm: AsyncStructuredLLM,
    search: SearchProvider,
    messages: list[dict[str, str]],
    goal: str,
    answer: Structured[SemanticVerdict],
    usage: dict[str, dict],
    log: logging.LoggerAdapter,
) -> tuple[Structured[SemanticVerdict], dict[str, dict], list[str]]:
    """One lookup and one second judgement: (the verdict that stands, usage so far, cited URLs)."""
    query = answer.value.lookup_query or goal
    results = await _look_up(search, query, log)
    if results is None:
        return answer, usage, []
    usage = add_usage(usage, results.usage_update())
    second, spent = await _judge_again(llm, messages, results, log)
    usage = add_usage(usage, spent)
    if second is None:
        return answer, usage, []
    sources = [hit.url for hit in results.hits]
    log.event(GROUNDED_VERDICT, f"{search.name}: {query!r}, {len(sources)} sources")
    return second, usage, sources


async def _judge_again(
    llm: AsyncStructuredLLM,
    messages: list[dict[str, str]],
    results: SearchResults,
    log: logging.LoggerAdapter,
) -> tuple[Structured[SemanticVerdict] | None, dict[str, dict]]:
    """The verdict with the search results and its usage; None (the first verdict stands) when it
    is unusable (its call still counts)."""
    text = render_results(results.answer, [(h.title, h.url, h.content) for h in results.hits])
    try:
        second = await llm.astructured(
            "verification", grounded_messages(messages, results.query, text), SemanticVerdict
        )
    except LLMOutputError as exc:
        log.warning("grounded verdict unusable, keeping the first one: %s", exc)
        return None, exc.usage_update("verification")
    return second, second.usage_update("verification")
