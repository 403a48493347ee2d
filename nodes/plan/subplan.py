"""subplan node: a ``plan`` step runs its nested manifest as a child run of the plan graph (seed
001's hierarchy); the parent step completes only when every child step completed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from veriloop.context import PlanContext
from veriloop.engines.plan.confinement.sandbox import stricter
from veriloop.graph.plan_io import state_to_report
from veriloop.graph.plan_state import StepState
from veriloop.nodes.plan.support import emit, plan_context, step_of
from veriloop.schemas.manifest import ManifestStep
from veriloop.schemas.plan_run import AttemptReport, CheckResult, StepResult


def make_subplan(plan_graph: Callable[[], Any]) -> tuple[Callable, Callable]:
    """The node's sync and async bodies, given a getter for the compiled plan graph (built after
    this node: it contains it). Under ``invoke`` the child runs with ``invoke``, so the run's
    checkpointer needs no async methods."""

    def subplan_sync(state: StepState, runtime: Runtime[PlanContext]) -> dict:
        ctx, step = plan_context(runtime), step_of(state)
        refused = _begin(state, step, ctx)
        if refused is not None:
            return refused
        return _from_child(
            step, plan_graph().invoke(_child_input(state, step), context=_child_context(state, ctx))
        )

    async def subplan(state: StepState, runtime: Runtime[PlanContext]) -> dict:
        ctx, step = plan_context(runtime), step_of(state)
        refused = _begin(state, step, ctx)
        if refused is not None:
            return refused
        child = await plan_graph().ainvoke(
            _child_input(state, step), context=_child_context(state, ctx)
        )
        return _from_child(step, child)

    return subplan_sync, subplan


def _begin(state: StepState, step: ManifestStep, ctx: PlanContext) -> dict | None:
    """Announce the attempt; the step's failed result when its child plan cannot run."""
    emit(state, "attempt_started", step_id=step.id, run_number=1)
    depth = state.get("depth", 1) + 1
    if depth <= ctx.max_depth and step.plan is not None:
        return None
    why = (
        f"nesting depth {depth} exceeds the limit {ctx.max_depth}"
        if step.plan
        else "no nested plan"
    )
    check = CheckResult(name="sub_plan", type="sub_plan", passed=False, diagnosis=why)
    return _result(step.id, None, check, {})


def _child_input(state: StepState, step: ManifestStep) -> dict:
    """The child run's input. Invoked inside the node, the child is a subgraph: it shares the
    run's checkpointer."""
    return {
        "run_id": f"{state['run_id']}/{step.id}",
        "goal": str(step.input or step.plan.goal),
        # A nested plan's llm steps may use the agents of the plans around it.
        "plan": {
            **step.plan.model_dump(),
            "agents": {**(state.get("agents") or {}), **step.plan.model_dump()["agents"]},
        },
        "plan_origin": step.origin,
        "depth": state.get("depth", 1) + 1,
    }


def _child_context(state: StepState, ctx: PlanContext) -> PlanContext:
    """The child run's context: the plans around it can only make its sandbox stricter."""
    return dataclasses.replace(ctx, sandbox=stricter(ctx.sandbox, state.get("sandbox")))


def _from_child(step: ManifestStep, child: dict) -> dict:
    """The plan step's result: completed only when every child step completed."""
    results = child.get("step_results") or {}
    unfinished = sorted(s for s, r in results.items() if r.get("status") != "completed")
    passed = child.get("status") == "completed"
    diagnosis = (
        ""
        if passed
        else f"child steps not completed: {', '.join(unfinished) or child.get('halt_reason', '')}"
    )
    check = CheckResult(
        name="sub_plan",
        type="sub_plan",
        passed=passed,
        diagnosis=diagnosis,
        details={"child_status": child.get("status"), "steps": len(results)},
    )
    return _result(step.id, child, check, child.get("usage") or {})


def _result(step_id: str, child: dict | None, check: CheckResult, usage: dict) -> dict:
    passed = check.passed
    sub_run = state_to_report(child) if child else None
    result = StepResult(
        step_id=step_id,
        status="completed" if passed else "failed",
        verification_status="verified" if passed else "partial_pass",
        diagnosis=check.diagnosis,
        attempts=[
            AttemptReport(
                run_number=1, execution_ok=True, checks=[check], passed=passed, usage=usage
            )
        ],
        usage=usage,
        sub_run=sub_run.model_dump() if sub_run else None,
        duration_s=sub_run.duration_s if sub_run else None,
    )
    return {"step_results": {step_id: result.model_dump()}, "usage": usage}
