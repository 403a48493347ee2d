"""The semantic verification prompt: goal + action + observation list (never the full DOM).

The observation lines come from the page (element texts, alert texts, URLs), so
they are placed only inside :func:`~veriloop.prompts.page_data.page_data`, and
the system prompt carries :data:`~veriloop.prompts.page_data.PAGE_DATA_RULE`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from veriloop.prompts.grounding import LOOKUP_QUERY_RULE
from veriloop.prompts.page_data import PAGE_DATA_RULE, page_data_lines

STEP_TASK_LEVEL_CONTRACT = (
    "Step-level vs task-level: action_succeeded judges this one action; task_completed judges the "
    "whole user goal. Set task_completed true ONLY when the entire goal is done; in a multi-step "
    "task keep it false until the final step is done."
)

STEP_TASK_LEVEL_EXAMPLE = (
    'Example, goal "Add a patient named Jas": after clicking "New Patient" the form opens -> '
    "action_succeeded true, task_completed false. After typing Jas into the name field -> "
    'action_succeeded true, task_completed false. After clicking "Save" a "Patient saved" message '
    "appears -> action_succeeded true, task_completed true, evidence = the number of that message's line."
)

VERIFICATION_SYSTEM_PROMPT = f"""You verify one browser action of a web agent. You get the user's goal, the action just executed \
and observations of what changed on the page afterwards. You do not see the page itself.

Your answer's fields are a contract: the system acts on them and never reads your reason.
- action_succeeded: this action did something useful toward the goal.
- task_completed: the entire user goal is achieved now.
- confidence: 0.0-1.0. Be decisive: high when the observations clearly show success or failure.
- reason: one short sentence for people.
- sub_task_completed: only when a current sub-task is given, whether its objective is achieved; else null.
- failure_category: when the action failed: no_effect, element_missing, wrong_page, error_message, \
blocked_auth (login needed), captcha or unknown; else null.
- impossible: true only when the page shows the goal cannot be achieved at all.
{LOOKUP_QUERY_RULE}
- evidence: the numbers of the observation lines that show the entire goal is met, e.g. [2]. Required \
when task_completed is true (a completion without evidence is not accepted); lines saying that \
nothing changed are never evidence. Empty otherwise.

{STEP_TASK_LEVEL_CONTRACT}
{STEP_TASK_LEVEL_EXAMPLE}

URL changed toward the goal -> action_succeeded true. Page updated but steps remain -> task_completed false. \
Nothing relevant changed -> action_succeeded false. An error message appeared -> action_succeeded false.

{PAGE_DATA_RULE}"""


def verification_user_message(
    goal: str, action: str, page_section: str, sub_task_objective: str | None = None
) -> str:
    """The user message around an already-wrapped page section (observation list or, for comparison, a DOM window)."""
    lines = [f"User goal: {goal}"]
    if sub_task_objective:
        lines.append(f"Current sub-task objective: {sub_task_objective}")
    lines += [f"Action executed: {action}", "Observations after the action:", page_section]
    return "\n".join(lines)


def numbered(lines: Sequence[str]) -> list[str]:
    """``[1] first line``, ``[2] second line``...: the numbers a verdict's ``evidence`` cites."""
    return [f"[{number}] {line}" for number, line in enumerate(lines, start=1)]


_NUMBERED_LINE = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)


def numbered_lines(text: str) -> dict[int, str]:
    """The observation lines of a verification prompt by number: the inverse of :func:`numbered`."""
    return {int(number): line for number, line in _NUMBERED_LINE.findall(text)}


def build_verification_messages(
    goal: str, action: str, observations: Sequence[str], sub_task_objective: str | None = None
) -> list[dict[str, str]]:
    """System and user messages for the semantic verdict; observations sit inside the page-data section,
    numbered from 1 so the verdict can cite them as evidence."""
    section = page_data_lines(numbered(observations))
    return [
        {"role": "system", "content": VERIFICATION_SYSTEM_PROMPT},
        {
            "role": "user",
            "content": verification_user_message(goal, action, section, sub_task_objective),
        },
    ]
