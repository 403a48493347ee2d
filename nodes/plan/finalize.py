"""finalize node: the run's status. Completed only when every step of the plan completed."""

from __future__ import annotations

import time
from pathlib import Path

from langgraph.runtime import Runtime

from veriloop.context import PlanContext
from veriloop.engines.plan.judge.hidden import restore
from veriloop.engines.plan.policy import run_completed
from veriloop.graph.plan_state import PlanState
from veriloop.nodes.plan.support import manifest_of, plan_context, results_update
from veriloop.schemas.plan_run import FINISHED_STATUSES, StepResult


def finalize(state: PlanState, runtime: Runtime[PlanContext]) -> dict:
    """Steps that never ran are blocked; the status comes from step statuses, never from prose.
    The hidden files go back into the workspace."""
    if state.get("hidden"):
        restore(Path(plan_context(runtime).workspace), state["hidden"])
    if state.get("status") == "rejected" or not state.get("plan"):
        return {"status": "rejected", "ended_at": time.time()}
    manifest = manifest_of(state)
    results = state.get("step_results") or {}
    why = state.get("halt_reason") or "the run ended before this step could run"
    unfinished = {
        step.id: StepResult(step_id=step.id, status="blocked", diagnosis=why).model_dump()
        for step in manifest.steps
        if (results.get(step.id) or {}).get("status") not in FINISHED_STATUSES
    }
    status = "completed" if run_completed(manifest, {**results, **unfinished}) else "failed"
    return {**results_update(unfinished), "status": status, "ended_at": time.time()}
