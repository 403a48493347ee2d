"""batch_end node: apply each finished step's failure policy once the whole batch is done
(seed 000: classify first, replan after, so independent steps of the batch keep their results)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from veriloop.context import PlanContext
from veriloop.engines.plan.policy import disposition, replan_allowed
from veriloop.graph.plan_state import PlanState
from veriloop.nodes.plan.lane import forget_batch
from veriloop.nodes.plan.support import emit, plan_context, results_update, steps_in


def batch_end(state: PlanState, runtime: Runtime[PlanContext]) -> dict:
    """Record each failed step's disposition (skip, block, halt, replan: its status stays what
    happened to it); ask for one replan covering every step of the batch that wants one."""
    ctx = plan_context(runtime)
    steps = steps_in(state)
    results = state.get("step_results") or {}
    disposed, replan, halts = {}, [], []
    forget_batch(state.get("batch_id", ""))
    sent = [s for lane in state.get("lanes") or [] for s in lane] + (state.get("window") or [])
    for step_id in [s for s in sent if s in results]:  # what did not start: the next batch's
        result = results[step_id]
        allowed = replan_allowed(
            step_id,
            attempts_by_step=state.get("replan_attempts") or {},
            replans_in_run=state.get("replan_count", 0),
            max_per_step=ctx.max_replans_per_step,
            max_per_run=ctx.max_replans_per_run,
        )
        move = disposition(steps[step_id], result["status"], replan_allowed=allowed)
        if move != "continue":
            disposed[step_id] = {**result, "disposition": move}
            emit(state, "step_disposition", step_id=step_id, disposition=move)
        if move == "replan":
            replan.append(step_id)
        elif move == "halt":
            halts.append(
                f"critical step {step_id!r} {result['status']}: {result.get('diagnosis', '')}"
            )
    return {
        **results_update(disposed),
        "replan_required": bool(replan) and not halts,
        "replan_steps": replan,
        "halted": bool(halts),
        "halt_reason": "; ".join(halts),
    }
