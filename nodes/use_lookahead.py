"""use_lookahead node: after a verified success, the prepared step and action become this run's."""

from __future__ import annotations

from veriloop.graph.state import State


def use_lookahead(state: State) -> dict:
    """Adopt the lookahead (no valid action in it -> correction, as after action_generation)."""
    prepared = state.get("lookahead")
    if not prepared:
        raise RuntimeError("use_lookahead reached without a lookahead")
    return {
        "plan": prepared["plan"],
        "current_step_index": prepared["current_step_index"],
        "current_sub_task_index": prepared["current_sub_task_index"],
        "refined_instruction": prepared["refined_instruction"],
        "target_element_id": prepared["target_element_id"],
        "action": prepared["action"],
        "thought": prepared["thought"],
        "action_source": "action_generation",
        "needs_correction": prepared["action"] is None,
        "lookahead": None,
    }
