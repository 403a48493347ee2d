"""subplan node: a ``plan`` step runs its nested manifest as a child run of the plan graph (seed
001's hierarchy); the parent step completes only when every child step completed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from veriloop.context import PlanContext
from veriloop.engines.plan.sandbox import stricter
from veriloop.graph.plan_io import state_to_report
from veriloop.graph.plan_state import StepState
from veriloop.nodes.plan.support import emit, plan_context, step_of
from veriloop.schemas.plan_run import AttemptReport, CheckResult, StepResult


def make_subplan(plan_graph: Callable[[], Any]) -> Callable:
    """The node, given a getter for the compiled plan graph (built after this node: it contains it)."""

    async def subplan(state: StepState, runtime: Runtime[PlanContext]) -> dict:
        ctx = plan_context(runtime)
        step = step_of(state)
        depth = state.get("depth", 1) + 1
        child_id = f"{state['run_id']}/{step.id}"
        emit(state, "attempt_started", step_id=step.id, run_number=1)
        if depth > ctx.max_depth or step.plan is None:
            why = (
                f"nesting depth {depth} exceeds the limit {ctx.max_depth}"
                if step.plan
                else "no nested plan"
            )
            return _result(
                step.id,
                None,
                CheckResult(name="sub_plan", type="sub_plan", passed=False, diagnosis=why),
                {},
            )
        # Invoked inside this node, the child is a subgraph: it shares the run's checkpointer.
        child = await plan_graph().ainvoke(
            {
                "run_id": child_id,
                "goal": str(step.input or step.plan.goal),
                # A nested plan's llm steps may use the agents of the plans around it.
                "plan": {
                    **step.plan.model_dump(),
                    "agents": {**(state.get("agents") or {}), **step.plan.model_dump()["agents"]},
                },
                "plan_origin": step.origin,
                "depth": depth,
            },
            # The plans around it can only make its sandbox stricter.
            context=dataclasses.replace(ctx, sandbox=stricter(ctx.sandbox, state.get("sandbox"))),
        )
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

    return subplan


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
