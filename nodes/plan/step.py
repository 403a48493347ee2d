"""The verify-fix loop of one step (seed 004): prepare -> execute -> check -> correct -> execute ...
-> finish. Every node is a checkpoint, so a crash resumes at the attempt it was in."""

from __future__ import annotations

import asyncio
import dataclasses
import time

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from veriloop.context import PlanContext
from veriloop.engines.plan.confinement.sandbox import (
    Confinement,
    step_confinement,
    stricter,
    will_sandbox,
)
from veriloop.engines.plan.execution import commands_needing_approval, execute_step
from veriloop.engines.plan.fixloop import (
    attempt_report,
    build_corrective_prompt,
    next_move,
    step_duration,
    step_status,
)
from veriloop.engines.plan.judge.checks import run_checks, take_baseline
from veriloop.engines.plan.judge.testrun import discover_test_command
from veriloop.engines.plan.planning import render_task
from veriloop.graph.plan_state import StepState
from veriloop.llm import get_llm
from veriloop.nodes.plan.support import (
    emit,
    plan_context,
    step_of,
    tool_registry,
    workspace_of,
)
from veriloop.schemas.manifest import AgentSpec
from veriloop.schemas.plan_run import AttemptReport, ExecutionResult, ReviewDecision, StepResult
from veriloop.schemas.usage import add_usage

_VERIFICATION_STATUS = {
    "verified": "verified",
    "partial_pass": "partial_pass",
    "oscillating": "partial_pass",
    "blocker": "partial_pass",
    "execution_failed": "execution_failed",
}


def prepare(state: StepState, runtime: Runtime[PlanContext]) -> dict:
    """The task text, the fingerprints taken before anything runs, and approval of model commands."""
    ctx = plan_context(runtime)
    step = step_of(state)
    workspace = workspace_of(ctx)
    pending = commands_needing_approval(step, ctx.shell_allowlist)
    approved = True
    if pending:
        answer = interrupt(
            {
                "kind": "command_approval",
                "step_id": step.id,
                "question": "A model-written step wants to run these commands. Approve?",
                "commands": pending,
            }
        )
        approved = ReviewDecision.model_validate(answer).approved
    task = render_task(step, state.get("depends") or {})
    discovered = step.test_command or discover_test_command(step.id, workspace)
    return {
        "task": task,
        "prompt": task,
        "attempts": [],
        "baseline": take_baseline(step, workspace, discovered_command=discovered),
        "commands_approved": approved,
    }


async def execute(state: StepState, runtime: Runtime[PlanContext]) -> dict:
    """One execution with the step's executor (LLMUnavailable propagates: the run can resume)."""
    ctx = plan_context(runtime)
    step = step_of(state)
    run_number = len(state.get("attempts") or []) + 1
    emit(state, "attempt_started", step_id=step.id, run_number=run_number)
    started = time.time()
    if not state.get("commands_approved", True):
        execution = ExecutionResult(ok=False, error="a person did not approve the step's commands")
    else:
        agent = _agent(state, step.agent)
        llm = None
        if step.executor == "llm":
            if agent and agent.model:  # the manifest's agent names the model of its own steps
                own = {**ctx.purposes.get("execution", {}), "model": agent.model}
                ctx = dataclasses.replace(ctx, purposes={**ctx.purposes, "execution": own})
            llm = get_llm(ctx, "execution")
        execution = await execute_step(
            step,
            prompt=state.get("prompt") or state.get("task", ""),
            agent=agent,
            depends=state.get("depends") or {},
            tools=tool_registry(ctx),
            workspace=workspace_of(ctx),
            llm=llm,
            timeout_s=step.timeout_s or ctx.step_timeout_s,
            max_turns=ctx.max_turns,
            confinement=_confinement(ctx, state),
        )
    return {
        "execution": execution.model_dump(),
        "started_at": started,
        "usage": execution.usage,
    }


async def check(state: StepState, runtime: Runtime[PlanContext]) -> dict:
    """Every applicable check, cheapest first; then the loop's next move (a typed flag)."""
    ctx = plan_context(runtime)
    step = step_of(state)
    execution = ExecutionResult.model_validate(state["execution"])
    history = [AttemptReport.model_validate(a) for a in state.get("attempts") or []]
    run_number = len(history) + 1
    results = []
    review = step.critical and ctx.review_critical_steps
    confinement = _confinement(ctx, state)
    if execution.ok:  # an executor failure is not a verification failure: nothing to check
        emit(state, "step_testing", step_id=step.id, run_number=run_number)
        results = await run_checks(
            step,
            execution,
            depends=state.get("depends") or {},
            workspace=workspace_of(ctx),
            baseline=state.get("baseline") or {},
            previous_collected=_collected(history),
            llm=get_llm(ctx, "review") if review else None,
            review=review,
            check_timeout_s=ctx.check_timeout_s,
            confinement=confinement,
            hidden=state.get("hidden") or {},
            claimed=[
                pattern
                for step_id, patterns in (state.get("claimed") or {}).items()
                if step_id != step.id
                for pattern in patterns
            ],
        )
    for result in results:
        emit(
            state,
            "check_result",
            step_id=step.id,
            run_number=run_number,
            name=result.name,
            type=result.type,
            passed=result.passed,
            diagnosis=result.diagnosis,
        )
    review_usage: dict = {}
    for result in results:
        review_usage = add_usage(review_usage, result.details.get("usage"))
    started = state.get("started_at") or time.time()
    report = attempt_report(
        run_number,
        execution,
        results,
        started_at=started,
        ended_at=time.time(),
        corrective_prompt=state.get("prompt") if run_number > 1 else None,
    )
    started_processes = execution.sandboxed is not None or any(
        result.type in ("command", "tests") and not result.errored for result in results
    )
    report = report.model_copy(
        update={
            "usage": add_usage(report.usage, review_usage),
            # Every process of a step starts the same way (one confinement, one cached probe).
            "sandboxed": await asyncio.to_thread(will_sandbox, confinement)
            if started_processes
            else None,
        }
    )
    attempts = [*history, report]
    move = next_move(
        attempts,
        max_retries=step.max_retries,
        self_correcting=step.self_correcting,
        retry_blockers=step.on_failure == "retry",
    )
    emit(
        state,
        "attempt_finished",
        step_id=step.id,
        run_number=run_number,
        passed=report.passed,
        move=move,
    )
    return {"attempts": [a.model_dump() for a in attempts], "move": move, "usage": review_usage}


def correct(state: StepState) -> dict:
    """The corrective prompt: the original task, the latest failure only, checks to keep passing."""
    step = step_of(state)
    attempts = [AttemptReport.model_validate(a) for a in state["attempts"]]
    return {
        "prompt": build_corrective_prompt(
            task=state["task"],
            attempt=len(attempts) + 1,
            max_attempts=step.max_retries + 1,
            latest=attempts[-1],
            previous_output=attempts[-1].output_excerpt,
        )
    }


def finish(state: StepState) -> dict:
    """The step's result: its status comes from the checks' typed results, never from its notes."""
    step = step_of(state)
    attempts = [AttemptReport.model_validate(a) for a in state.get("attempts") or []]
    execution = ExecutionResult.model_validate(state["execution"])
    verification = _VERIFICATION_STATUS[state["move"]]
    last = attempts[-1]
    failed = [c for c in last.checks if not c.passed]
    diagnosis = execution.error or "; ".join(f"{c.name}: {c.diagnosis}" for c in failed)
    if state["move"] == "oscillating":
        diagnosis = f"stopped early: the same checks kept alternating between attempts. {diagnosis}"
    elif state["move"] == "blocker":
        diagnosis = (
            "stopped: the executor reported that it cannot go on, without trying a tool "
            f"(on_failure: retry would try again). {diagnosis}"
        )
    usage: dict = {}
    for attempt in attempts:
        usage = add_usage(usage, attempt.usage)
    result = StepResult(
        step_id=step.id,
        status=step_status(verification, last.checks),
        verification_status=verification,
        output=execution.output,
        notes=execution.notes,
        diagnosis=diagnosis,
        attempts=attempts,
        oscillated=state["move"] == "oscillating",
        usage=usage,
        duration_s=step_duration(attempts, ended_at=time.time()),
    )
    emit(
        state,
        "step_finished",
        step_id=step.id,
        status=result.status,
        verification_status=verification,
        attempts=len(attempts),
        diagnosis=diagnosis,
    )
    return {"step_results": {step.id: result.model_dump()}}


def _confinement(ctx: PlanContext, state: StepState) -> Confinement:
    """How this step's processes start: the run's settings, the manifest's, what the step declares."""
    step = step_of(state)
    return step_confinement(
        step,
        _agent(state, step.agent),
        sandbox=stricter(ctx.sandbox, state.get("sandbox")),
        pass_env=ctx.pass_env,
        manifest_env=ctx.manifest_env,
        allow_network=ctx.allow_network,
        allow_shell=ctx.allow_shell,
        private_root=ctx.private_root,
    )


def _agent(state: StepState, name: str | None) -> AgentSpec | None:
    agents = state.get("agents") or {}
    return AgentSpec.model_validate(agents[name]) if name and name in agents else None


def _collected(history: list[AttemptReport]) -> int | None:
    """Tests the previous attempt collected (a later attempt may not collect fewer)."""
    for attempt in reversed(history):
        for result in attempt.checks:
            if result.type == "tests" and "collected" in result.details:
                return int(result.details["collected"])
    return None
