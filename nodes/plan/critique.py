"""critique node: the static critic (and, when enabled, an LLM review) before anything runs."""

from __future__ import annotations

from langgraph.runtime import Runtime

from veriloop.context import PlanContext
from veriloop.engines.plan.critic import (
    critic_messages,
    rejection_reason,
    static_review,
    with_llm_review,
)
from veriloop.graph.plan_state import PlanState
from veriloop.llm import get_llm
from veriloop.nodes.plan.support import manifest_of, plan_context, tool_registry
from veriloop.schemas.outputs import CriticReview
from veriloop.schemas.plan_run import Critique


async def critique(state: PlanState, runtime: Runtime[PlanContext]) -> dict:
    """Approve the plan, send a model's plan back to the planner (bounded), or reject the run."""
    ctx = plan_context(runtime)
    usage: dict = {}
    if not state.get("plan"):  # the planner's draft was unusable; its critique says why
        report = Critique.model_validate(state["critique"])
    else:
        manifest = manifest_of(state)
        report = static_review(
            manifest,
            tools=sorted(tool_registry(ctx)),
            max_depth=ctx.max_depth,
            max_parallel=ctx.max_parallel_steps,
        )
        if ctx.llm_plan_review and not report.has_critical:
            answer = await get_llm(ctx, "critic").astructured(
                "critic", critic_messages(manifest, state.get("goal", "")), CriticReview
            )
            report = with_llm_review(report, answer.value.review)
            usage = answer.usage_update("critic")
    update = {
        "critique": report.model_dump(),
        "plan_approved": not report.has_critical,
        "usage": usage,
    }
    if not report.has_critical:
        return update
    revisions = state.get("plan_revisions", 0)
    if state.get("plan_origin") == "model" and revisions < ctx.max_plan_revisions:
        return {**update, "plan": None, "plan_revisions": revisions + 1}
    return {**update, "status": "rejected", "halt_reason": rejection_reason(report)}
