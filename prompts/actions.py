"""Prompt for choosing the next action in the extension protocol."""

from __future__ import annotations

from veriloop.prompts.page_data import PAGE_DATA_RULE
from veriloop.prompts.progress import Situation, step_messages

SYSTEM = f"""You choose the next browser action that carries out the instruction on the page.
Answer with exactly one action, written as one of:
  click(ID)  setValue(ID, "text")  selectOption(ID, "option")  press("Key")  press(ID, "Key")
  navigate("url")  goBack()  refresh()  scroll("down"|"up"|"top"|"bottom")  scroll(ID)  wait(SECONDS)
ID is the data-veriloop-id number of an element in the page excerpt; never invent one.
Do not answer finish() or fail(): whether the task is complete is decided by verifying the page.
{PAGE_DATA_RULE}"""


def action_messages(
    situation: Situation, *, instruction: str, target_element_id: int | None
) -> list[dict[str, str]]:
    """Messages asking for an ActionChoice."""
    return step_messages(
        SYSTEM,
        situation,
        f"Instruction: {instruction}",
        f"Suggested element: {target_element_id}" if target_element_id is not None else None,
    )


def rejection_message(problem: str) -> dict[str, str]:
    """Feedback after an answer we could not use; the model gets one more try."""
    return {"role": "user", "content": f"Your answer was rejected: {problem}. Choose again."}
