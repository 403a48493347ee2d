"""Replanning: validate the plan against what happened; edit the remaining steps in place, or regenerate.

``minor_modifications_only`` is derived when the validation is built: the model's claim, and the
structural comparison of the remaining steps with the proposed ones (``engines/step_diff.py``)
agreeing that the change is minor. The claim can only make the decision stricter; routing reads
only the flag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from veriloop.engines.dom_context import hint_words
from veriloop.engines.planning import plan_steps
from veriloop.engines.step_context import StepContext, ask
from veriloop.engines.step_diff import compare_steps, step_text
from veriloop.llm.base import AsyncStructuredLLM
from veriloop.prompts.replanning import replanning_messages
from veriloop.schemas.outputs import PlannedStep, PlanValidation
from veriloop.schemas.plan import Plan, PlanStep
from veriloop.schemas.records import ReplanningResult, StepChanges

ReplanAction = Literal["modify", "regenerate"]


@dataclass(frozen=True)
class ReplanOutcome:
    """The edited plan (None: regenerate it in planning), where to resume, and the typed results."""

    plan: Plan | None
    step_index: int
    validation: PlanValidation
    result: ReplanningResult
    usage: dict[str, dict]


def determine_replan_action(validation: PlanValidation) -> ReplanAction:
    """Modify in place or regenerate, from ``minor_modifications_only`` alone (never the change text)."""
    return "modify" if validation.minor_modifications_only else "regenerate"


def modify_remaining_steps(
    plan: Plan, step_index: int, modified_steps: list[PlannedStep] | None
) -> Plan:
    """Keep the steps before ``step_index``; replace the rest with ``modified_steps`` (or retry them as they are)."""
    if modified_steps:
        remaining = plan_steps(modified_steps, first_number=step_index + 1)
    else:
        remaining = [
            step.model_copy(update={"status": "pending"}) for step in plan.steps[step_index:]
        ]
    return plan.model_copy(update={"steps": [*plan.steps[:step_index], *remaining]})


def derive_validation(
    claimed: PlanValidation, remaining: list[PlanStep]
) -> tuple[PlanValidation, StepChanges | None]:
    """The validation with ``minor_modifications_only`` derived: the model claimed it and the
    proposed steps (none: the remaining ones, retried as they are) are a minor change of the
    remaining ones; the comparison is returned for the record."""
    if not claimed.minor_modifications_only:
        return claimed, None
    before = [
        step_text(s.description, s.expected_outcome, [t.objective for t in s.sub_tasks])
        for s in remaining
    ]
    proposed = claimed.modified_steps
    after = (
        [step_text(s.description, s.expected_outcome, s.sub_tasks) for s in proposed]
        if proposed
        else before
    )
    changes = compare_steps(before, after)
    return claimed.model_copy(update={"minor_modifications_only": changes.minor}), changes


async def validate_plan(
    llm: AsyncStructuredLLM, now: StepContext, *, plan: Plan, step_index: int
) -> tuple[PlanValidation, StepChanges | None, dict[str, dict]]:
    """Ask for a PlanValidation and derive its flag; an unusable answer means "not valid,
    regenerate"."""
    remaining = plan.steps[step_index:]
    messages = replanning_messages(
        now.situation(hints=hint_words(now.goal, remaining[0].description)),
        done_steps=[f"- {step.description}" for step in plan.steps[:step_index]],
        remaining_steps=[f"- {step.description}" for step in remaining],
    )
    answer = await ask(llm, "replanning", messages, PlanValidation)
    if answer.value is None:
        unusable = [f"(plan check unusable: {answer.error})"]
        return (
            PlanValidation(valid=False, minor_modifications_only=False, suggested_changes=unusable),
            None,
            answer.usage,
        )
    return *derive_validation(answer.value, remaining), answer.usage


async def replan(
    llm: AsyncStructuredLLM, now: StepContext, *, plan: Plan | None, step_index: int
) -> ReplanOutcome:
    """Validate, then modify the remaining steps or leave planning to generate a new plan."""
    step_changes = None
    if plan is None or step_index >= len(plan.steps):
        validation, usage = PlanValidation(valid=False, minor_modifications_only=False), {}
    else:
        validation, step_changes, usage = await validate_plan(
            llm, now, plan=plan, step_index=step_index
        )
    changes = "; ".join(validation.suggested_changes)
    if plan is not None and determine_replan_action(validation) == "modify":
        edited = modify_remaining_steps(plan, step_index, validation.modified_steps)
        result = ReplanningResult(
            plan_modified=True,
            reason=changes or "remaining steps kept",
            step_changes=step_changes,
        )
        return ReplanOutcome(edited, step_index, validation, result, usage)
    reason = changes or "plan regenerated"
    if step_changes is not None and not step_changes.minor:
        reason += (
            f" (regenerated: the proposed steps change {step_changes.changed} of "
            f"{step_changes.before} remaining steps, more than a minor modification)"
        )
    result = ReplanningResult(plan_regenerated=True, reason=reason, step_changes=step_changes)
    return ReplanOutcome(None, 0, validation, result, usage)
