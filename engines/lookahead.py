"""Lookahead: prepare the next action while verification judges the last one.

A verified success on a flat plan step leads to one known place: the next plan
step, refined on this page into one action. That work does not depend on the
verdict, only on its being a success, so it can run beside the verification
call instead of after it: two model calls on the critical path per action
instead of three. The verdict still gates every advance: the prepared action
is used only after a success that is not the goal, and discarded otherwise
(the discarded calls are still counted in usage).

No lookahead when the verdict decides where the plan goes (a step with
sub-tasks: ``sub_task_completed`` picks the sub-task) or when the plan would
run out (a new plan would be needed, and the goal is the likelier outcome).
In that last case the finish audit runs beside the verdict instead
(``audit_ahead_allowed``): a "done" verdict then finishes without one more
model wait, and any other verdict discards the audit (still counted in usage).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from veriloop.engines.actions import choose_action
from veriloop.engines.planning import current_sub_task, plan_next
from veriloop.engines.refinement import refine_step
from veriloop.engines.step_context import StepContext
from veriloop.llm.base import AsyncStructuredLLM
from veriloop.schemas.plan import Plan
from veriloop.schemas.usage import Purpose, add_usage


def lookahead_allowed(plan: Plan | None, step_index: int, verified_step_index: int | None) -> bool:
    """A success here leads to a known flat-plan step: the next one (or the same, if the action was not for it)."""
    if plan is None or step_index >= len(plan.steps) or plan.steps[step_index].sub_tasks:
        return False
    next_index = step_index + 1 if verified_step_index == step_index else step_index
    return next_index < len(plan.steps)


def audit_ahead_allowed(
    plan: Plan | None, step_index: int, verified_step_index: int | None
) -> bool:
    """The verified action was for the flat plan's last step: a success leaves no step to prepare,
    and finishing is the likelier outcome, so the finish audit runs beside the verdict."""
    if plan is None or step_index >= len(plan.steps) or plan.steps[step_index].sub_tasks:
        return False
    return verified_step_index == step_index and step_index + 1 == len(plan.steps)


@dataclass(frozen=True)
class Lookahead:
    """Where a verified success leads and the action prepared for it (None: no valid action, correction's turn)."""

    plan: dict[str, Any]
    current_step_index: int
    current_sub_task_index: int
    refined_instruction: str
    target_element_id: int | None
    action: dict[str, Any] | None
    thought: str

    def dump(self) -> dict[str, Any]:
        # Shallow: the plan and action are fresh dumps already (asdict's deep copy cost ms per step).
        return {f.name: getattr(self, f.name) for f in fields(self)}


async def prepare_next_action(
    llm_for: Callable[[Purpose], AsyncStructuredLLM],
    now: StepContext,
    *,
    plan: Plan,
    step_index: int,
    sub_task_index: int,
    verified_step_index: int | None,
) -> tuple[Lookahead, dict[str, dict]]:
    """Advance the plan as a success would, refine that step on this page, choose its action.

    ``llm_for`` gives each purpose's model; ``now`` carries no verdict (it is not known yet).
    Returns the lookahead and its usage.
    """
    planned = await plan_next(
        llm_for("planning"),
        now,
        plan=plan,
        step_index=step_index,
        sub_task_index=sub_task_index,
        verified_step_index=verified_step_index,
        succeeded=True,
        suggestions=[],
    )
    step = planned.plan.steps[planned.step_index]
    sub_task = current_sub_task(planned.plan, planned.step_index, planned.sub_task_index)
    refined = await refine_step(llm_for("refinement"), now, step=step, sub_task=sub_task)
    chosen = await choose_action(
        llm_for("action"),
        now,
        instruction=refined.step.instruction,
        target_element_id=refined.step.target_element_id,
    )
    lookahead = Lookahead(
        plan=planned.plan.model_dump(),
        current_step_index=planned.step_index,
        current_sub_task_index=planned.sub_task_index,
        refined_instruction=refined.step.instruction,
        target_element_id=refined.step.target_element_id,
        action=chosen.action.model_dump() if chosen.action else None,
        thought=chosen.thought,
    )
    return lookahead, add_usage(add_usage(planned.usage, refined.usage), chosen.usage)
