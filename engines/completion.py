"""Completion that is hard to hallucinate: cited evidence for goal_achieved, and the finish audit.

A verdict's ``task_completed`` counts only when its ``evidence`` cites observation lines that exist
and are changes the verified action produced (a line saying nothing changed, or what the client
merely witnessed, is no evidence). Before finish(), one audit call sees the goal and every
action's observed changes (never the page) and must agree with its own typed verdict. An audit
answer that cannot be used is a veto: an error never completes a task. A provider outage
(LLMUnavailable) propagates, as for every verdict.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from veriloop.engines.observation import (
    CLIENT_URL_CHANGED,
    CLIENT_URL_UNCHANGED,
    CONTENT_UNCHANGED_HASH,
    CONTENT_UNCHANGED_SKELETON,
    CONTENT_UPDATED_NO_SKELETON_CHANGE,
    MUTATION_WITNESSED,
    NETWORK_WITNESSED,
    URL_UNCHANGED,
)
from veriloop.llm.base import AsyncStructuredLLM, LLMOutputError
from veriloop.prompts.audit import build_audit_messages
from veriloop.prompts.verification import numbered_lines
from veriloop.schemas.outputs import CompletionAudit
from veriloop.schemas.verification import CompletionAuditResult

NOT_CHANGES = frozenset(
    {
        URL_UNCHANGED,
        CONTENT_UNCHANGED_SKELETON,
        CONTENT_UNCHANGED_HASH,
        CONTENT_UPDATED_NO_SKELETON_CHANGE,  # a ticker or an ad: not meaningful
        NETWORK_WITNESSED,
        MUTATION_WITNESSED,
        CLIENT_URL_CHANGED,  # the client's report: witnessed, not observed on the page
        CLIENT_URL_UNCHANGED,
    }
)
"""Observation lines that report no change the action produced."""
NO_CHANGE_SEEN = "(no change observed)"

_log = logging.getLogger("veriloop.completion")


def is_change(line: str) -> bool:
    """Whether an observation line reports a change on the page (not its absence, not a client report)."""
    return line not in NOT_CHANGES


def cites_changes(evidence: Sequence[int], observations: Sequence[str]) -> bool:
    """True when ``evidence`` is non-empty and every number names an existing change line (1-based)."""
    return bool(evidence) and all(
        1 <= number <= len(observations) and is_change(observations[number - 1])
        for number in evidence
    )


def change_line_numbers(prompt_text: str, contains: str = "") -> list[int]:
    """The numbers of a verification prompt's change lines (those containing ``contains``): what an
    honest verdict cites. Scripted models use it; a real model reads the numbers itself."""
    return [
        number
        for number, line in numbered_lines(prompt_text).items()
        if is_change(line) and contains in line
    ]


def build_trajectory(
    action_history: Sequence[Mapping[str, Any]], verification_history: Sequence[Mapping[str, Any]]
) -> list[str]:
    """One line per verified action, then the changes observed after it (not the verdicts, not the page)."""
    actions = {record.get("step_index"): record.get("action") for record in action_history}
    lines: list[str] = []
    for verified in verification_history:
        index = verified.get("step_index")
        changes = [line for line in verified.get("observations") or [] if is_change(line)]
        lines.append(f"Action {int(index or 0) + 1}: {actions.get(index, '?')}")
        lines += [f"  - {line}" for line in changes] or [f"  {NO_CHANGE_SEEN}"]
    return lines


@dataclass
class AuditOutcome:
    """The audit's decision and what it cost."""

    result: CompletionAuditResult
    usage: dict[str, dict]
    """``{"verification": Usage dict}`` (the audit is verification cost), also for an unusable answer."""


async def audit_completion(
    *,
    goal: str,
    trajectory: Sequence[str],
    llm: AsyncStructuredLLM,
    goal_threshold: float = 0.70,
    log: logging.LoggerAdapter | logging.Logger | None = None,
) -> AuditOutcome:
    """One ``audit`` call: agreed = goal_met and confidence >= ``goal_threshold``; an unusable answer vetoes.

    Raises LLMUnavailable when the provider cannot be reached: the task must stay unchanged.
    """
    log = log or _log
    try:
        answer = await llm.astructured(
            "audit", build_audit_messages(goal, trajectory), CompletionAudit
        )
    except LLMOutputError as exc:
        log.warning("finish audit unusable, not finishing: %s", exc)
        return AuditOutcome(
            CompletionAuditResult(
                agreed=False, reason=f"The audit's verdict could not be used ({exc})"
            ),
            exc.usage_update("verification"),  # the unusable call still counts
        )
    audit = answer.value
    agreed = audit.goal_met and audit.confidence >= goal_threshold
    if not agreed:
        log.warning("finish audit disagrees (confidence %.2f): %s", audit.confidence, audit.reason)
    return AuditOutcome(
        CompletionAuditResult(
            agreed=agreed, goal_met=audit.goal_met, confidence=audit.confidence, reason=audit.reason
        ),
        answer.usage_update("verification"),
    )
