"""Prompt for turning the current plan step into one concrete instruction grounded on the page."""

from __future__ import annotations

from veriloop.prompts.page_data import PAGE_DATA_RULE
from veriloop.prompts.progress import Situation, step_messages

SYSTEM = f"""You turn one step of a plan into ONE concrete instruction for a browser agent,
grounded on the page excerpt: name the element to act on and, if it has a data-veriloop-id,
give that number as target_element_id. If the step is already done on the page, say what the
next useful instruction toward the goal is instead. Never instruct to declare the task finished.
{PAGE_DATA_RULE}"""


def refinement_messages(
    situation: Situation, *, step: str, expected_outcome: str | None, sub_task: str | None
) -> list[dict[str, str]]:
    """Messages asking for a RefinedStep."""
    return step_messages(
        SYSTEM,
        situation,
        f"Current step: {step}",
        f"Expected outcome: {expected_outcome}" if expected_outcome else None,
        f"Current sub-task objective: {sub_task}" if sub_task else None,
    )
