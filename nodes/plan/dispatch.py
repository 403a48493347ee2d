"""dispatch node: find the next batch (every step whose dependencies finished, lowest levels
first); mark steps that can never run as blocked. The router sends one ``Send`` per ready step."""

from __future__ import annotations

from typing import Any

from langgraph.config import get_config

from veriloop.engines.plan.policy import dependency_results, next_batch
from veriloop.graph.plan_state import PlanState, StepInput
from veriloop.nodes.plan.support import emit, levels_of, manifest_of, results_update
from veriloop.schemas.plan_run import StepResult


def dispatch(state: PlanState) -> dict:
    """The next batch, or none once the run halted."""
    if state.get("halted"):
        return {"ready": []}
    batch = next_batch(
        manifest_of(state), state.get("step_results") or {}, levels_of(state), _batch_limit()
    )
    blocked = {
        step_id: StepResult(step_id=step_id, status="blocked", diagnosis=why).model_dump()
        for step_id, why in batch.blocked.items()
    }
    for step_id, result in blocked.items():
        emit(
            state, "step_finished", step_id=step_id, status="blocked", diagnosis=result["diagnosis"]
        )
    return {"ready": batch.ready, **results_update(blocked)}


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
    """One StepInput per ready step: the step, the agents, and its dependencies' outputs."""
    manifest = manifest_of(state)
    results: dict[str, Any] = state.get("step_results") or {}
    agents = {name: agent.model_dump() for name, agent in manifest.agents.items()}
    inputs = []
    for step_id in state.get("ready") or []:
        step = manifest.step(step_id)
        inputs.append(
            StepInput(
                run_id=state["run_id"],
                goal=state.get("goal", ""),
                step=step.model_dump(),
                agents=agents,
                depends=dependency_results(step, results),
                depth=state.get("depth", 1),
                sandbox=manifest.sandbox,
            )
        )
    return inputs
