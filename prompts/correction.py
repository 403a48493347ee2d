"""Prompt for choosing a recovery strategy after a failed step."""

from __future__ import annotations

from veriloop.prompts.page_data import PAGE_DATA_RULE
from veriloop.prompts.progress import Situation, step_messages

SYSTEM = f"""A browser agent's last step did not work. Choose ONE recovery strategy from the
offered list (strategy names exactly as offered). Strategies already tried on this step are listed:
never choose one of them again with the same element. For alternative_element and scroll_into_view
give element_id, the data-veriloop-id of an element in the page excerpt.
{PAGE_DATA_RULE}"""


def correction_messages(
    situation: Situation,
    *,
    failed_action: str | None,
    problem: str,
    expectation: list[str],
    offered: list[str],
    tried: list[str],
) -> list[dict[str, str]]:
    """Messages asking for a CorrectionChoice; ``expectation``: "Expected: X; observed: Y" and the
    prediction check's lines (empty when the action expected nothing in particular)."""
    return step_messages(
        SYSTEM,
        situation,
        f"Failed action: {failed_action}" if failed_action else None,
        f"Problem: {problem}",
        "\n".join(expectation) if expectation else None,
        "Already tried on this step: " + ", ".join(tried)
        if tried
        else "Nothing tried yet on this step.",
        "Offered strategies:\n" + "\n".join(f"- {line}" for line in offered),
    )
