"""plan node: parse the user's manifest, or have the meta-planner write one from the goal."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from langgraph.runtime import Runtime

from veriloop.context import PlanContext
from veriloop.engines.plan.judge.hidden import hide
from veriloop.engines.plan.manifest import ManifestError, load_manifest
from veriloop.engines.plan.planning import critique_report, draft_manifest, rejection_critique
from veriloop.graph.plan_state import PlanState
from veriloop.llm import get_llm
from veriloop.nodes.plan.support import plan_context, tool_registry
from veriloop.schemas.plan_run import Critique


async def plan(state: PlanState, runtime: Runtime[PlanContext]) -> dict:
    """A user's manifest that does not parse rejects the run; a model's draft goes to the critic."""
    ctx = plan_context(runtime)
    tools = sorted(tool_registry(ctx))
    started = {"started_at": state.get("started_at") or time.time()}
    if state.get("plan"):  # a nested plan step hands its child a parsed plan
        return {**started, "model": ctx.model}
    if state.get("manifest") is not None:
        try:
            manifest = await asyncio.to_thread(  # a large manifest: off the event loop
                load_manifest,
                state["manifest"],
                origin="user",
                tools=tools,
                max_depth=ctx.max_depth,
            )
        except ManifestError as exc:
            return {
                **started,
                "manifest": None,
                "status": "rejected",
                "halt_reason": str(exc),
                "critique": rejection_critique(exc.problems).model_dump(),
            }
        # Hidden tests leave the workspace before any step runs; finalize puts them back.
        hidden = await asyncio.to_thread(hide, Path(ctx.workspace), manifest.hidden)
        return {
            **started,
            "hidden": hidden,
            "manifest": None,  # parsed: kept once as ``plan``, not copied into every checkpoint
            "plan": manifest.model_dump(),
            "plan_origin": "user",
            "goal": state.get("goal") or manifest.goal,
            "model": ctx.model,
        }
    previous = state.get("critique")
    feedback = critique_report(Critique.model_validate(previous)) if previous else None
    draft = await draft_manifest(
        get_llm(ctx, "planning"), state["goal"], tools=tools, feedback=feedback
    )
    return {
        **started,
        "plan": draft.manifest.model_dump() if draft.manifest else None,
        "plan_origin": "model",
        "critique": draft.critique.model_dump() if draft.critique else None,
        "usage": draft.usage,
        "model": ctx.model,
    }
