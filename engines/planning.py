"""Planning: generate a plan, or keep the current one and move to the next step or sub-task."""

from __future__ import annotations

from dataclasses import dataclass

from veriloop.engines.dom_context import hint_words
from veriloop.engines.step_context import StepContext, ask
from veriloop.llm.base import AsyncStructuredLLM
from veriloop.prompts.planning import planning_messages
from veriloop.schemas.outputs import PlannedStep, PlanOutput
from veriloop.schemas.plan import Plan, PlanStep, StepStatus, SubTask


@dataclass(frozen=True)
class PlanningOutcome:
    """The plan to work on now, where we are in it, and what planning cost."""

    plan: Plan
    step_index: int
    sub_task_index: int
    usage: dict[str, dict]
    generated: bool


def plan_steps(planned: list[PlannedStep], *, first_number: int = 1) -> list[PlanStep]:
    """PlanSteps with positional ids (``step-3``, sub-task ``step-3.2``) from the model's proposal."""
    steps = []
    for offset, proposed in enumerate(planned):
        step_id = f"step-{first_number + offset}"
        steps.append(
            PlanStep(
                id=step_id,
                description=proposed.description,
                expected_outcome=proposed.expected_outcome,
                sub_tasks=[
                    SubTask(id=f"{step_id}.{n}", objective=objective)
                    for n, objective in enumerate(proposed.sub_tasks, start=1)
                ],
            )
        )
    return steps


async def generate_plan(
    llm: AsyncStructuredLLM, now: StepContext, *, suggestions: list[str]
) -> tuple[Plan, dict[str, dict]]:
    """Ask for a plan; an unusable answer gives a one-step plan (the goal itself), never a completion."""
    messages = planning_messages(now.situation(hints=hint_words(now.goal)), suggestions=suggestions)
    answer = await ask(llm, "planning", messages, PlanOutput)
    planned = answer.value.steps if answer.value else [PlannedStep(description=now.goal)]
    return Plan(goal=now.goal, steps=plan_steps(planned)), answer.usage


async def plan_next(
    llm: AsyncStructuredLLM,
    now: StepContext,
    *,
    plan: Plan | None,
    step_index: int,
    sub_task_index: int,
    verified_step_index: int | None,
    succeeded: bool,
    suggestions: list[str],
) -> PlanningOutcome:
    """Keep the plan and, after a verified success, advance; generate a plan when there is none or it ran out.

    ``verified_step_index`` is the plan step the verified action was chosen
    for, ``succeeded`` whether its verdict was a success (a lookahead assumes
    one). A step with sub-tasks advances through its sub-tasks in verification
    (:func:`apply_sub_task_verdict`); any other step advances here, one step
    per verified successful action chosen for it.
    """
    usage: dict[str, dict] = {}
    if plan is not None and succeeded and verified_step_index == step_index < len(plan.steps):
        if not plan.steps[step_index].sub_tasks:
            plan = _with_step_status(plan, step_index, "completed")
            step_index, sub_task_index = step_index + 1, 0
    generated = plan is None or step_index >= len(plan.steps)
    if generated:
        plan, usage = await generate_plan(llm, now, suggestions=suggestions)
        step_index, sub_task_index = 0, 0
    plan = _with_step_status(plan, step_index, "in_progress")
    return PlanningOutcome(plan, step_index, sub_task_index, usage, generated)


def current_sub_task(plan: Plan | None, step_index: int, sub_task_index: int) -> SubTask | None:
    """The sub-task being worked on, if the current step has sub-tasks."""
    if plan is None or step_index >= len(plan.steps):
        return None
    sub_tasks = plan.steps[step_index].sub_tasks
    return sub_tasks[sub_task_index] if sub_task_index < len(sub_tasks) else None


def apply_sub_task_verdict(
    plan: Plan,
    step_index: int,
    sub_task_index: int,
    *,
    sub_task_completed: bool | None,
    confident: bool,
    success: bool,
) -> tuple[Plan, int, int]:
    """Complete the current sub-task (and its step when it was the last) or mark it failed.

    Completed: ``sub_task_completed`` and the verdict's confidence reached the
    success threshold (``confident``). Failed: ``sub_task_completed`` is False
    and the action did not succeed. Otherwise nothing changes.
    """
    if current_sub_task(plan, step_index, sub_task_index) is None:
        return plan, step_index, sub_task_index
    if sub_task_completed and confident:
        plan = _with_sub_task_status(plan, step_index, sub_task_index, "completed")
        if sub_task_index + 1 < len(plan.steps[step_index].sub_tasks):
            return plan, step_index, sub_task_index + 1
        return _with_step_status(plan, step_index, "completed"), step_index + 1, 0
    if sub_task_completed is False and not success:
        plan = _with_sub_task_status(plan, step_index, sub_task_index, "failed")
    return plan, step_index, sub_task_index


def hierarchical_plan_complete(plan: Plan | None) -> bool:
    """True when the plan has sub-tasks and every sub-task (and every step without any) is completed."""
    if plan is None or not plan.is_hierarchical:
        return False
    return all(
        all(sub.status == "completed" for sub in step.sub_tasks)
        if step.sub_tasks
        else step.status == "completed"
        for step in plan.steps
    )


def _with_step_status(plan: Plan, step_index: int, status: StepStatus) -> Plan:
    if step_index >= len(plan.steps):
        return plan
    steps = list(plan.steps)
    steps[step_index] = steps[step_index].model_copy(update={"status": status})
    return plan.model_copy(update={"steps": steps})


def _with_sub_task_status(
    plan: Plan, step_index: int, sub_task_index: int, status: StepStatus
) -> Plan:
    step = plan.steps[step_index]
    sub_tasks = list(step.sub_tasks)
    sub_tasks[sub_task_index] = sub_tasks[sub_task_index].model_copy(update={"status": status})
    steps = list(plan.steps)
    steps[step_index] = step.model_copy(update={"sub_tasks": sub_tasks})
    return plan.model_copy(update={"steps": steps})
