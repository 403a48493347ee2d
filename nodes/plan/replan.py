"""replan node: one call for every blocked step of the batch and everything downstream of them;
completed steps keep their results. An unusable repair falls back to each step's policy."""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime

from veriloop.context import PlanContext
from veriloop.engines.plan.critic import static_review
from veriloop.engines.plan.planning import repair_plan
from veriloop.graph.plan_state import PlanState
from veriloop.llm import get_llm
from veriloop.nodes.plan.support import emit, manifest_of, plan_context, tool_registry


async def replan(state: PlanState, runtime: Runtime[PlanContext]) -> dict:
    """Repair the plan; replaced steps' results move to ``superseded`` so the new steps run."""
    ctx = plan_context(runtime)
    manifest = manifest_of(state)
    blocked = state.get("replan_steps") or []
    results = state.get("step_results") or {}
    tools = sorted(tool_registry(ctx))
    await asyncio.sleep(ctx.replan_cooldown_s)
    round_number = state.get("replan_count", 0) + 1
    repair = await repair_plan(
        get_llm(ctx, "replanning"),
        manifest,
        blocked=blocked,
        results=results,
        tools=tools,
        round_number=round_number,
    )
    error = repair.error
    if repair.manifest is not None:
        review = static_review(
            repair.manifest,
            tools=tools,
            max_depth=ctx.max_depth,
            max_parallel=ctx.max_parallel_steps,
        )
        if review.has_critical:
            error = f"the repaired plan failed the critic: {review.summary}"
    attempts = dict(state.get("replan_attempts") or {})
    for step_id in blocked:
        attempts[step_id] = attempts.get(step_id, 0) + 1
    record = repair.record
    emit(
        state,
        "replan",
        round=round_number,
        blocked=blocked,
        replaced=record.replaced,
        added=record.added,
        error=error,
    )
    update = {
        "replan_count": round_number,
        "replan_attempts": attempts,
        "replan_required": False,
        "replan_steps": [],
        "usage": repair.usage,
        "replan_history": [
            record.model_copy(update={"summary": error or record.summary}).model_dump()
        ],
    }
    if error is not None:
        return {**update, **_fallback(manifest, blocked, results)}
    replaced = [step_id for step_id in record.replaced if step_id in results]
    return {
        **update,
        "plan": repair.manifest.model_dump(),
        "step_results": {step_id: None for step_id in replaced},
        "superseded": [{**results[step_id], "disposition": "replan"} for step_id in replaced],
    }


def _fallback(manifest, blocked, results) -> dict:
    """No usable repair: a critical step halts the run, the run goes on without any other."""
    halts = [s for s in blocked if manifest.step(s).critical]
    disposed = {s: {**results[s], "disposition": "halt" if s in halts else "skip"} for s in blocked}
    return {
        "step_results": disposed,
        "halted": bool(halts),
        "halt_reason": f"replan failed for critical step(s) {', '.join(halts)}" if halts else "",
    }
