"""What every step prompt shows: the goal, the recent actions, the last verdict and the page excerpt."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from veriloop.prompts.page_data import page_data_lines

CONTINUATION_SENTENCE = "Previous action succeeded; the full goal is not yet achieved."
LOOKAHEAD_SENTENCE = (
    "The previous action is being verified right now. Answer as if it succeeded and the full goal "
    "is not yet achieved: your answer is used only in that case."
)
HISTORY_LIMIT = 8


@dataclass(frozen=True)
class Situation:
    """The shared part of the planning, refinement, action, correction and replanning prompts."""

    goal: str
    url: str
    page_excerpt: str
    verification: Mapping[str, Any] | None = None
    history: Sequence[str] = ()


def continues_goal(verification: Mapping[str, Any] | None) -> bool:
    """The last verification says the action worked but the task is not complete (typed flags only)."""
    return bool(
        verification and verification.get("success") and not verification.get("task_completed")
    )


def pending_verdict(observations: Sequence[str]) -> dict[str, Any]:
    """What a lookahead knows of the last action: its observations, and that the verdict is pending."""
    return {"pending": True, "observations": list(observations)}


def verification_block(verification: Mapping[str, Any] | None) -> str | None:
    """The verdict on the last action: flags in our words, page-derived details inside page_data."""
    if not verification:
        return None
    if verification.get("pending"):
        lines = [LOOKAHEAD_SENTENCE]
    else:
        verdict = "succeeded" if verification.get("success") else "failed"
        confidence = float(verification.get("confidence", 0.0))
        lines = [f"The last action {verdict} (confidence {confidence:.2f})."]
        if continues_goal(verification):
            lines.append(CONTINUATION_SENTENCE)
    details = list(verification.get("observations") or [])
    if verification.get("semantic_summary"):
        details.append(f"Verdict: {verification['semantic_summary']}")
    if details:
        lines.append("What was observed after it:\n" + page_data_lines(details))
    return "\n".join(lines)


def history_lines(
    actions: Sequence[Mapping[str, Any]], verifications: Sequence[Mapping[str, Any]]
) -> list[str]:
    """The last actions handed to the client, each with its verdict."""
    verdicts = {v.get("step_index"): v for v in verifications}
    lines = []
    for record in list(actions)[-HISTORY_LIMIT:]:
        verdict = verdicts.get(record["step_index"])
        outcome = (
            "not verified"
            if verdict is None
            else ("worked" if verdict.get("success") else "failed")
        )
        lines.append(f"{record['step_index'] + 1}. {record['action']} -> {outcome}")
    return lines


def step_messages(system: str, situation: Situation, *sections: str | None) -> list[dict[str, str]]:
    """System prompt, then one user message: goal, the prompt's own sections, actions, verdict, page."""
    parts = [
        f"User goal: {situation.goal}",
        *sections,
        "Actions so far:\n" + "\n".join(situation.history) if situation.history else None,
        verification_block(situation.verification),
        "Current page (URL and excerpt):\n"
        + page_data_lines([situation.url, situation.page_excerpt]),
    ]
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": "\n\n".join(p for p in parts if p)},
    ]
