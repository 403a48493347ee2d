"""use_lookahead node: after a verified success, the prepared step and action become this run's,
and a valid one is finalized in the same superstep."""

from __future__ import annotations

from veriloop.graph.state import State
from veriloop.nodes.finalize import finalize


def use_lookahead(state: State) -> dict:
    """Adopt the lookahead and finalize its action; no valid action in it -> correction, as after
    action_generation.

    Finalizing here, not in a superstep of its own, is the same update (finalize's keys overwrite
    the adopted ones as its later write would; neither writes a key with a reducer the other
    writes) at one LangGraph superstep less a step (about 1 ms of CPU, docs/service.md).
    """
    prepared = state.get("lookahead")
    if not prepared:
        raise RuntimeError("use_lookahead reached without a lookahead")
    adopted = {
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
    if adopted["needs_correction"]:
        return adopted
    return {**adopted, **finalize({**state, **adopted})}
