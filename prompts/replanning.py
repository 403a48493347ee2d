"""Prompt for checking the remaining plan against what actually happened."""

from __future__ import annotations

from veriloop.prompts.page_data import PAGE_DATA_RULE
from veriloop.prompts.progress import Situation, step_messages

SYSTEM = f"""A browser agent is stuck on a step of its plan: corrections did not help.
Check the remaining plan against what happened and the current page.
Set minor_modifications_only to true when editing the remaining steps suffices, and then give
the replacement for the remaining steps (from the current step on) in modified_steps.
Set it to false when the plan must be made again from scratch; list your reasons in suggested_changes.
{PAGE_DATA_RULE}"""


def replanning_messages(
    situation: Situation, *, done_steps: list[str], remaining_steps: list[str]
) -> list[dict[str, str]]:
    """Messages asking for a PlanValidation."""
    return step_messages(
        SYSTEM,
        situation,
        "Steps done:\n" + "\n".join(done_steps) if done_steps else "No step done yet.",
        "Remaining steps (the first is the stuck one):\n" + "\n".join(remaining_steps),
    )
