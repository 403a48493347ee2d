"""Step refinement: one concrete instruction for the current step, grounded on a bounded DOM window."""

from __future__ import annotations

from dataclasses import dataclass

from veriloop.engines.dom_context import hint_words
from veriloop.engines.step_context import StepContext, ask
from veriloop.llm.base import AsyncStructuredLLM
from veriloop.prompts.refinement import refinement_messages
from veriloop.schemas.outputs import RefinedStep
from veriloop.schemas.plan import PlanStep, SubTask


@dataclass(frozen=True)
class RefinementOutcome:
    """The instruction for this run and what it cost."""

    step: RefinedStep
    usage: dict[str, dict]


async def refine_step(
    llm: AsyncStructuredLLM, now: StepContext, *, step: PlanStep, sub_task: SubTask | None
) -> RefinementOutcome:
    """Ask for a RefinedStep; an unusable answer falls back to the step's (or sub-task's) own text."""
    objective = sub_task.objective if sub_task else None
    messages = refinement_messages(
        now.situation(hints=hint_words(step.description, objective, now.goal)),
        step=step.description,
        expected_outcome=step.expected_outcome,
        sub_task=objective,
    )
    answer = await ask(llm, "refinement", messages, RefinedStep)
    return RefinementOutcome(
        answer.value or RefinedStep(instruction=objective or step.description), answer.usage
    )
