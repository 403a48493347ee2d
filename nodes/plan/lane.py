"""next_step node: after a step, its lane's next step starts at once (``engines.plan.policy.lanes``),
unless this step, or any other step of its batch, did not complete.

Which batches had a step that did not complete is kept in this process: the lanes of a batch run
in one process, side by side. A batch resumed elsewhere after a crash does not know of failures
before the crash; its lanes stop at their own failures, and the batch's end applies every policy.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from veriloop.engines.plan.policy import dependency_results
from veriloop.graph.plan_state import StepState
from veriloop.schemas.manifest import ManifestStep

BATCHES_KEPT = 1024
"""Failed batches remembered at most (a batch paused for a review and never resumed stays)."""

_failed: OrderedDict[str, None] = OrderedDict()
_lock = threading.Lock()  # lanes run as threads under ``graph.invoke``


def next_step(state: StepState) -> dict:
    """The lane's next step with this one's output as its dependency's, or the end of the lane."""
    step = state["step"]
    result = (state.get("step_results") or {}).get(step["id"]) or {}
    batch = state.get("batch_id", "")
    with _lock:
        if result.get("status") != "completed":
            _failed[batch] = None
            if len(_failed) > BATCHES_KEPT:
                _failed.popitem(last=False)
        stop = batch in _failed
    lane = state.get("lane") or []
    if stop or not lane:
        return {"lane_move": "end"}
    following, *rest = lane
    depends = dependency_results(ManifestStep.model_validate(following), {step["id"]: result})
    return {"step": following, "lane": rest, "depends": depends, "lane_move": "next"}


def forget_batch(batch_id: str) -> None:
    """The batch ended: its failures are the batch end's to apply now."""
    with _lock:
        _failed.pop(batch_id, None)
