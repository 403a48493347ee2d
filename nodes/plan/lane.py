"""next_step node: after a step, its lane goes on at once with the next step of its lane, or else
with a step of its batch's window whose dependencies have all completed (``engines.plan.policy``),
unless this step, or any other step of its batch, did not complete.

The batch's window, what completed in it and which lane took which step are kept in the process
that dispatched the batch: its lanes run there, side by side, and a step is taken once. A lane
resumed in another process (after a crash, or by a second execution under fencing) finds no window
there and goes on with its own lane only, which is fixed when the batch is sent; the next batch
runs what the window did not. Every lane's checkpoints are fenced, so two executions never both
advance one lane, and a window step runs in the one lane that took it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.runtime import Runtime

from veriloop.context import PlanContext
from veriloop.engines.plan.policy import dependency_results
from veriloop.graph.plan_state import StepState
from veriloop.nodes.plan.support import plan_context
from veriloop.schemas.manifest import ManifestStep

BATCHES_KEPT = 256
"""Batches remembered at most (a batch paused for a review and never resumed stays)."""


@dataclass
class OpenBatch:
    """A batch being run in this process."""

    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Window steps not taken yet (ManifestStep dumps), lowest levels first."""
    completed: dict[str, Any] = field(default_factory=dict)
    """Outputs of the steps the window's steps need that completed, before the batch or in it."""
    failed: bool = False
    """A step of the batch did not complete: no lane takes another step."""

    def take(self, after: str) -> dict[str, Any] | None:
        """The first window step whose dependencies all completed (``after``'s dependents first,
        so a fork's branch stays in its lane), now taken."""
        ready = [
            step_id
            for step_id, step in self.steps.items()
            if all(dep in self.completed for dep in step["depends_on"])
        ]
        if not ready:
            return None
        chosen = next((s for s in ready if after in self.steps[s]["depends_on"]), ready[0])
        return self.steps.pop(chosen)


_batches: OrderedDict[str, OpenBatch] = OrderedDict()
_lock = threading.Lock()  # lanes run as threads under ``graph.invoke``


def open_batch(
    batch_id: str, window: Sequence[dict[str, Any]], completed: Mapping[str, Any]
) -> None:
    """Register a batch about to be sent: its window (ManifestStep dumps, lowest levels first) and
    the outputs of the steps they need that completed before it."""
    with _lock:
        _batches[batch_id] = OpenBatch({s["id"]: s for s in window}, dict(completed))
        while len(_batches) > BATCHES_KEPT:
            _batches.popitem(last=False)


def forget_batch(batch_id: str) -> None:
    """The batch ended: its failures are the batch end's to apply now."""
    with _lock:
        _batches.pop(batch_id, None)


def next_step(state: StepState, runtime: Runtime[PlanContext]) -> dict:
    """The lane's next step with its dependencies' outputs, or the end of the lane."""
    step = state["step"]
    result = (state.get("step_results") or {}).get(step["id"]) or {}
    completed = result.get("status") == "completed"
    room = len(state.get("step_results") or {}) < plan_context(runtime).lane_steps
    lane = state.get("lane") or []
    with _lock:
        batch = _batches.get(state.get("batch_id", ""))
        if batch is None and not completed:  # resumed here: the batch's lanes here still stop
            batch = _batches[state.get("batch_id", "")] = OpenBatch()
        if batch is not None:
            if completed:
                batch.completed[step["id"]] = result.get("output")
            else:
                batch.failed = True
        if (batch is not None and batch.failed) or not room:
            following, rest, outputs = None, lane, {}
        elif lane:
            following, rest, outputs = lane[0], lane[1:], {step["id"]: result.get("output")}
        elif batch is not None and (following := batch.take(step["id"])) is not None:
            rest, outputs = [], {dep: batch.completed[dep] for dep in following["depends_on"]}
        else:
            following, rest, outputs = None, [], {}
    if following is None:
        return {"lane_move": "end"}
    depends = dependency_results(
        ManifestStep.model_validate(following),
        {dep: {"status": "completed", "output": output} for dep, output in outputs.items()},
    )
    return {"step": following, "lane": rest, "depends": depends, "lane_move": "next"}
