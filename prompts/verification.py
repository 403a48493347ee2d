"""The semantic verification prompt: goal + action + observation list (never the full DOM).

The observation lines come from the page (element texts, alert texts, URLs), so
they are placed only inside :func:`~veriloop.prompts.page_data.page_data`, and
the system prompt carries :data:`~veriloop.prompts.page_data.PAGE_DATA_RULE`.
"""

from __future__ import annotations

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
    "appears -> action_succeeded true, task_completed true."
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


def build_verification_messages(
    goal: str, action: str, observations: Sequence[str], sub_task_objective: str | None = None
) -> list[dict[str, str]]:
    """System and user messages for the semantic verdict; observations sit inside the page-data section."""
    section = page_data_lines(f"- {line}" for line in observations)
    return [
        {"role": "system", "content": VERIFICATION_SYSTEM_PROMPT},
        {
            "role": "user",
            "content": verification_user_message(goal, action, section, sub_task_objective),
        },
    ]
