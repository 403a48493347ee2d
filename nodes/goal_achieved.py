"""goal_achieved node: finish(), described from the verdict's semantic_summary."""

from __future__ import annotations

from veriloop.engines.task import finish_action
from veriloop.graph.state import State
from veriloop.nodes.support import task_log


def goal_achieved(state: State) -> dict:
    """The verified goal_achieved flag brought us here; the task ends with finish()."""
    action, thought = finish_action(state["verification_result"])
    task_log(state, "goal_achieved").info(
        "goal achieved after %d actions", len(state.get("action_history") or [])
    )
    return {"action": action.model_dump(), "thought": thought, "action_source": "goal_achieved"}
