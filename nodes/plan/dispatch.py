"""dispatch node: find the next batch (every step whose dependencies finished, lowest levels
first, each with its lane, and the window of steps its lanes may take as their dependencies
complete; steps that may change the same files never in one batch's separate lanes); mark steps
that can never run as blocked. The router sends one ``Send`` per lane."""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime

from veriloop.context import PlanContext
from veriloop.engines.plan.execution import commands_needing_approval
from veriloop.engines.plan.policy import apart, dependency_results, lanes, next_batch, window
from veriloop.graph.plan_state import PlanState, StepInput
from veriloop.nodes.plan.lane import open_batch
from veriloop.nodes.plan.support import (
    dependents_in,
    emit,
    levels_of,
    manifest_of,
    plan_context,
    results_update,
    steps_in,
)
from veriloop.schemas.manifest import ManifestStep
from veriloop.schemas.plan_run import StepResult


def dispatch(state: PlanState, runtime: Runtime[PlanContext]) -> dict:
    """The next batch, or none once the run halted."""
    if state.get("halted"):
        return {"lanes": [], "window": []}
    manifest, results = manifest_of(state), state.get("step_results") or {}
    batch = next_batch(manifest, results, levels_of(state), _batch_limit())
    blocked = {
        step_id: StepResult(step_id=step_id, status="blocked", diagnosis=why).model_dump()
        for step_id, why in batch.blocked.items()
    }
    for step_id, result in blocked.items():
        emit(
            state, "step_finished", step_id=step_id, status="blocked", diagnosis=result["diagnosis"]
        )
    ctx = plan_context(runtime)

    def may_pause(step: ManifestStep) -> bool:
        return bool(commands_needing_approval(step, ctx.shell_allowlist))

    sent, claims = apart(
        manifest,
        lanes(manifest, batch.ready, results, dependents_in(state), ctx.lane_steps, may_pause),
    )
    extra = []  # a lane of one step takes no other: every step waits for its batch
    if ctx.lane_steps > 1:
        in_lanes = {step_id for lane in sent for step_id in lane}
        candidates = window(
            manifest, results, levels_of(state), in_lanes, _batch_limit(), may_pause
        )
        extra = [step_id for [step_id] in apart(manifest, [[s] for s in candidates], claims)[0]]
    batch_id = uuid.uuid4().hex
    if extra:
        steps = steps_in(state)
        needed = {dep for step_id in extra for dep in steps[step_id].depends_on}
        open_batch(
            batch_id,
            [steps[step_id].model_dump() for step_id in extra],
            {dep: results[dep].get("output") for dep in needed if dep in results},
        )
    return {"lanes": sent, "window": extra, "batch_id": batch_id, **results_update(blocked)}


BATCH_PER_SLOT = 4
"""A batch holds at most 4 steps per concurrency slot; a wider level runs in several batches.

LangGraph's runner waits on every task of a superstep each time one finishes, so a superstep of
1,000 steps cost a fan ~50% more CPU a step than one of 100 (``benchmarks.plan_scaling``). Four a
slot keeps the slots busy: a batch ends only when its slowest step does."""


def _batch_limit() -> int | None:
    """The largest batch for the run's ``max_concurrency`` (None when it has none)."""
    slots = get_config().get("max_concurrency")
    return slots * BATCH_PER_SLOT if slots else None


def step_inputs(state: PlanState) -> list[StepInput]:
    """One StepInput per lane: its first step, the steps after it, the agents, and the first
    step's dependencies' outputs."""
    manifest = manifest_of(state)
    results: dict[str, Any] = state.get("step_results") or {}
    agents = {name: agent.model_dump() for name, agent in manifest.agents.items()}
    steps = steps_in(state)
    inputs = []
    for head, *after in state.get("lanes") or []:
        step = steps[head]
        inputs.append(
            StepInput(
                run_id=state["run_id"],
                goal=state.get("goal", ""),
                step=step.model_dump(),
                agents=agents,
                depends=dependency_results(step, results),
                depth=state.get("depth", 1),
                sandbox=manifest.sandbox,
                claimed={s.id: list(s.writes) for s in manifest.steps if s.writes},
                hidden=state.get("hidden") or {},
                lane=[steps[step_id].model_dump() for step_id in after],
                batch_id=state["batch_id"],
                windowed=bool(state.get("window")),
            )
        )
    return inputs
