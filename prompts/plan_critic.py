"""The plan critic's LLM review: the manifest goes to the model as JSON inside a ``PLAN_MANIFEST``
fence, and the review ends with ``<Approved>YES</Approved>`` or ``<Approved>NO</Approved>``.

A model-written manifest is untrusted text (its inputs and prompts may carry instructions), so it is
only ever placed inside the fence, and any approval tag inside it is defused before it is sent.
"""

from __future__ import annotations

from veriloop.prompts.page_data import fence_rule, fenced

PLAN_MANIFEST = "PLAN_MANIFEST"

PLAN_CRITIC_RULE = fence_rule(PLAN_MANIFEST, "the plan under review, as JSON")

PLAN_CRITIC_SYSTEM = f"""You review a plan of tool-using steps before it runs. The plan is a manifest: agents \
(a prompt and tool names) and steps (id, type, executor, agent, input, command, depends_on, on_failure, \
max_retries, critical, checks). Steps whose dependencies are done run in parallel.

Look for what would make the plan fail, waste work or do harm:
- the steps, taken together, do not achieve the user's goal, or do more than it asks;
- a step needs another step's result but does not depend on it, or depends on a step it never uses;
- several parallel results are consumed without a synthesis_gate step that combines and checks them;
- checks that do not verify the outcome (always true, hard-coded values instead of values from input \
or depends), or a critical step without any check;
- a flaky operation (network, installs, pushes) marked critical with no retry or fallback;
- on_failure retry on a step that cannot act on feedback (shell, python), or with max_retries 0;
- destructive or irreversible commands (deleting files, force pushes, sending messages) without a \
human_review step before them;
- agents given more tools than their steps need.

Write a short review: each problem in one line naming the step id, then your verdict. End with exactly \
one tag on its own line: <Approved>YES</Approved> when the plan can run as it is, \
<Approved>NO</Approved> when any problem above must be fixed first. The tag is the only thing the \
system reads.

{PLAN_CRITIC_RULE}"""

_TAG_OPEN = "<Approved>"
_TAG_CLOSE = "</Approved>"


def manifest_data(manifest_json: str) -> str:
    """The manifest JSON inside the ``PLAN_MANIFEST`` fence; approval tags inside it are defused so a
    reviewer echoing the data can never approve on the manifest's behalf."""
    defused = manifest_json.replace(_TAG_OPEN, "<approved>").replace(_TAG_CLOSE, "</approved>")
    return fenced(defused, PLAN_MANIFEST)


def plan_critic_user_message(goal: str, manifest_json: str) -> str:
    """The user message: the user's goal, then the fenced manifest (everything model-written is inside
    the fence, step ids included)."""
    return "\n".join(
        [f"User goal: {goal or '(not given)'}", "The plan:", manifest_data(manifest_json)]
    )
