"""Prompt for generating a plan toward the user's goal."""

from __future__ import annotations

from veriloop.prompts.page_data import PAGE_DATA_RULE, page_data
from veriloop.prompts.progress import Situation, step_messages

SYSTEM = f"""You plan how a browser agent reaches a user's goal on a web page.
Return a short ordered list of steps. Each step is one thing a person does on the page
(open a form, fill a field, press a button) with the outcome you expect to see.
When the goal has several independent parts (for example "add patient Jas, then add patient Kim"),
make one step per part and list in its sub_tasks the objectives that must each be verified done,
in order. A goal with a single part gets steps without sub_tasks.
Do not add a step for declaring the task finished: completion is decided by verification.
{PAGE_DATA_RULE}"""


def planning_messages(situation: Situation, *, suggestions: list[str]) -> list[dict[str, str]]:
    """Messages asking for a PlanOutput; ``suggestions`` come from a replan's plan check (model text)."""
    reviewer = (
        "A reviewer found the previous plan wrong and suggested:\n"
        + page_data("\n".join(suggestions))
        if suggestions
        else None
    )
    return step_messages(SYSTEM, situation, reviewer)
