"""human_review node: pause the whole run with ``interrupt()`` until a person answers
``Command(resume={"approved": bool, "comment": str})``; a rejection fails the step with the
reviewer's comment as its diagnosis."""

from __future__ import annotations

from langgraph.types import interrupt

from veriloop.engines.plan.planning import review_question
from veriloop.graph.plan_state import StepState
from veriloop.nodes.plan.support import emit, step_of
from veriloop.schemas.plan_run import AttemptReport, CheckResult, ReviewDecision, StepResult


def human_review(state: StepState) -> dict:
    """Ask, wait, and record the answer as the step's only check."""
    step = step_of(state)
    answer = interrupt(
        {
            "kind": "human_review",
            "step_id": step.id,
            "question": review_question(step, state.get("depends") or {}),
        }
    )
    # A malformed answer raises here: the run stays paused at this review and can be answered again.
    decision = ReviewDecision.model_validate(answer)
    check = CheckResult(
        name="human_review",
        type="human_review",
        passed=decision.approved,
        diagnosis=decision.comment,
    )
    result = StepResult(
        step_id=step.id,
        status="completed" if decision.approved else "failed",
        verification_status="verified" if decision.approved else "rejected",
        output={"approved": decision.approved, "comment": decision.comment},
        diagnosis="" if decision.approved else f"rejected by the reviewer: {decision.comment}",
        attempts=[
            AttemptReport(run_number=1, execution_ok=True, checks=[check], passed=decision.approved)
        ],
        review=decision.model_dump(),
    )
    emit(state, "step_finished", step_id=step.id, status=result.status, diagnosis=result.diagnosis)
    return {"step_results": {step.id: result.model_dump()}}
