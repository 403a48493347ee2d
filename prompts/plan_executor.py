"""What an ``llm`` plan step's model is told: the notes contract, the step message, mark_step.

The notes contract (seed 000): the model MUST finish by calling ``mark_step``
with notes that start with ``[SUCCESS]:`` or ``[FAIL]:``; the verifier fails a
step whose notes start with ``[FAIL]`` (``startswith``, so ``[FAIL] reason``
counts too). The first user message starts with the exact line ``Step: <id>``
(scripted test models key on it).
"""

from __future__ import annotations

import json
from typing import Any

MARK_STEP = "mark_step"
"""The tool that ends an ``llm`` step; its ``notes`` and ``output`` are the step's result."""

SUCCESS_MARKER = "[SUCCESS]"
FAIL_MARKER = "[FAIL]"

DEFAULT_AGENT_PROMPT = "You carry out one step of a larger plan, using the tools you are offered."

STEP_COMPLETION_CONTRACT = f"""## Step Completion Reporting

When you complete a step, you MUST call {MARK_STEP} with a notes field that starts with a status tag:

- {SUCCESS_MARKER}: <brief description of what was accomplished>
- {FAIL_MARKER}: <reason why the step could not be completed>

Examples:
- {SUCCESS_MARKER}: Wrote report.md with the three requested sections
- {FAIL_MARKER}: Cannot run the migration - no database tool available
- {SUCCESS_MARKER}: All 12 tests pass after fixing the date parser
- {FAIL_MARKER}: Cannot create image - no image generation tool available

Put the step's result, when it has one, in {MARK_STEP}'s `output` (any JSON value).
Be HONEST about failures. If you cannot complete a step due to missing tools,
permissions, or external dependencies, report {FAIL_MARKER} with a clear reason.
Claiming success you have not verified is worse than reporting a failure."""

MARK_STEP_REMINDER = (
    f"Reminder: you have not called {MARK_STEP}. Finish this step now by calling {MARK_STEP} "
    f'with notes starting "{SUCCESS_MARKER}: ..." or "{FAIL_MARKER}: ..." (and the result in '
    "output, if any). Do not answer with text only."
)
"""Sent once, as a user message, when the model answers with text and no tool call."""

MARK_STEP_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": MARK_STEP,
        "description": (
            "Finish this step and report how it went. Call it exactly once, last. notes must "
            f"start with '{SUCCESS_MARKER}: ' or '{FAIL_MARKER}: '."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "notes": {
                    "type": "string",
                    "description": f"'{SUCCESS_MARKER}: what was done' or '{FAIL_MARKER}: why not'.",
                },
                "output": {
                    "description": "The step's result, any JSON value (optional).",
                },
            },
            "required": ["notes"],
        },
    },
}
"""The OpenAI function-tool dict of :data:`MARK_STEP`."""


def executor_system_prompt(agent_prompt: str) -> str:
    """The agent's own prompt (or a default) followed by the notes contract."""
    return f"{(agent_prompt or '').strip() or DEFAULT_AGENT_PROMPT}\n\n{STEP_COMPLETION_CONTRACT}"


def step_message(step_id: str, task: Any) -> str:
    """The first user message: the exact line ``Step: <step_id>``, a blank line, then the task."""
    body = task if isinstance(task, str) else json.dumps(task, indent=2, default=str)
    return f"Step: {step_id}\n\n{body}"
