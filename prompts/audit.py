"""The finish audit prompt: the goal and what every action of the task changed (never the page).

The verifier judged one action; the audit judges the whole task once, before finish(), from the
changes each action produced. Observation lines come from the page, so they sit inside the
page-data fence.
"""

from __future__ import annotations

from collections.abc import Sequence

from veriloop.prompts.page_data import PAGE_DATA_RULE, page_data_lines

AUDIT_SYSTEM_PROMPT = f"""You audit a web agent's claim that the user's goal is done, before the task is closed. \
You get the user's goal and, for every action the agent took, the changes observed on the page after it. \
You do not see the page, and you are not told what the agent believes.

Your answer's fields are a contract: the system acts on them and never reads your reason.
- goal_met: true only when the observed changes show the ENTIRE goal is achieved. An action that \
changed something unrelated, a step toward the goal, or a page with no visible result is not enough. \
When in doubt, false: a false "done" is worse than another look.
- confidence: 0.0-1.0.
- reason: one short sentence for people.

{PAGE_DATA_RULE}"""


def build_audit_messages(goal: str, trajectory: Sequence[str]) -> list[dict[str, str]]:
    """System and user messages of the finish audit; the trajectory sits inside the page-data section."""
    return [
        {"role": "system", "content": AUDIT_SYSTEM_PROMPT},
        {
            "role": "user",
            "content": f"User goal: {goal}\nWhat each action changed:\n"
            + page_data_lines(trajectory),
        },
    ]
