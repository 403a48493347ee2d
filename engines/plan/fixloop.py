"""The verify-fix loop's decisions (seed 004), as pure functions the step subgraph's nodes call.

One attempt = execute, then (when the executor worked) every applicable check. After it:

* every check passed -> ``verified``;
* the executor itself failed -> ``execution_failed``: not a verification failure, so it is not fed
  back to the model and spends no verification budget;
* checks failed and the executor reported a blocker (``[FAIL]:`` notes, no tool called): it said it
  cannot go on, and a corrective prompt does not give it what it lacks -> ``blocker`` (ends
  ``partial_pass``; the checks ran once, for the report), unless the step's policy is ``retry``;
* checks failed, the executor can act on feedback (``step.self_correcting``: llm steps; re-running
  a deterministic shell or python step changes nothing) and retries remain -> ``retry`` with a
  corrective prompt, unless the failing checks alternate between two sets (``oscillating``: the
  caller stops early and ends ``partial_pass``, saying why);
* otherwise -> ``partial_pass``.

The corrective prompt carries the original task, the latest attempt's failures only (never the
history, so it does not grow with attempts), the checks that passed ("keep these passing": the
regression guard), and the previous output, each output truncated keeping head and tail.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from veriloop.engines.plan.judge.checks import (
    checks_passed,
    output_text,
    reports_failure,
    truncate_middle,
)
from veriloop.prompts.plan_checks import FailedCheck, corrective_prompt
from veriloop.prompts.plan_executor import MARK_STEP
from veriloop.schemas.plan_run import (
    AttemptReport,
    CheckResult,
    ExecutionResult,
    PlanStepStatus,
    VerificationStatus,
)

Move = Literal["verified", "retry", "partial_pass", "execution_failed", "oscillating", "blocker"]

CHECK_TEXT_CHARS = 500
"""Each failed check's diagnosis and output in the corrective prompt."""
PREVIOUS_OUTPUT_CHARS = 1000
"""The previous output in the corrective prompt."""
OUTPUT_EXCERPT_CHARS = 2000
"""An attempt report's output excerpt and notes."""
CORRECTIVE_PROMPT_CHARS = 6000
"""A retry's corrective prompt is kept in its attempt report up to about this many characters."""


def build_corrective_prompt(
    *,
    task: str,
    attempt: int,
    max_attempts: int,
    latest: AttemptReport,
    previous_output: str,
) -> str:
    """The prompt of attempt ``attempt``: the original task, the latest failures, what to keep
    passing, the previous output, and the line ``Attempt: {attempt} of {max_attempts}``."""
    failed = [
        FailedCheck(
            name=f"{check.name} (the check itself errored)" if check.errored else check.name,
            diagnosis=_one_line(truncate_middle(check.diagnosis, CHECK_TEXT_CHARS)),
            output=truncate_middle(check.output, CHECK_TEXT_CHARS),
        )
        for check in latest.checks
        if not check.passed
    ]
    passed = [check.name for check in latest.checks if check.passed]
    return corrective_prompt(
        task=task,
        attempt=attempt,
        max_attempts=max_attempts,
        failed=failed,
        passed=passed,
        previous_output=truncate_middle(previous_output or "", PREVIOUS_OUTPUT_CHARS),
    )


def failing_checks(attempt: AttemptReport) -> frozenset[str]:
    """Names of the checks that did not pass on ``attempt``."""
    return frozenset(check.name for check in attempt.checks if not check.passed)


def oscillating(attempts: Sequence[AttemptReport]) -> bool:
    """The failing checks alternate: the last attempt fails the same set as the one two before it
    and a different set from the one just before it (needs at least 3 attempts)."""
    if len(attempts) < 3:
        return False
    last, before, two_before = (failing_checks(a) for a in attempts[-1:-4:-1])
    return bool(last) and last == two_before and last != before


def next_move(
    attempts: Sequence[AttemptReport],
    *,
    max_retries: int,
    self_correcting: bool,
    retry_blockers: bool = False,
) -> Move:
    """What the loop does after the last attempt (see the module docstring); ``retry_blockers``:
    the step's policy asks for retries even after a reported blocker (``on_failure: retry``)."""
    if not attempts:
        raise ValueError("next_move needs at least one attempt")
    last = attempts[-1]
    if last.passed:
        return "verified"
    if not last.execution_ok:
        return "execution_failed"
    if last.blocker and not retry_blockers:
        return "blocker"
    if self_correcting and len(attempts) - 1 < max_retries:
        return "oscillating" if oscillating(attempts) else "retry"
    return "partial_pass"


def step_status(
    verification_status: VerificationStatus, checks: Sequence[CheckResult]
) -> PlanStepStatus:
    """completed when verified; test_failed when the tests check failed; failed otherwise."""
    if verification_status == "verified":
        return "completed"
    if any(check.type == "tests" and not check.passed for check in checks):
        return "test_failed"
    return "failed"


def attempt_report(
    run_number: int,
    execution: ExecutionResult,
    checks: Sequence[CheckResult],
    *,
    started_at: float,
    ended_at: float,
    corrective_prompt: str | None = None,
) -> AttemptReport:
    """The report of one attempt (times in epoch seconds): passed = the executor worked and every
    applicable check passed. ``corrective_prompt``: what a retry was told (kept for the people who
    read the report, cut in the middle past a size)."""
    return AttemptReport(
        corrective_prompt=truncate_middle(corrective_prompt, CORRECTIVE_PROMPT_CHARS)
        if corrective_prompt
        else None,
        run_number=run_number,
        execution_ok=execution.ok,
        output_excerpt=truncate_middle(output_text(execution.output), OUTPUT_EXCERPT_CHARS)
        if execution.output is not None
        else "",
        notes=truncate_middle(execution.notes or "", OUTPUT_EXCERPT_CHARS),
        error=execution.error,
        checks=list(checks),
        passed=execution.ok and checks_passed(list(checks)),
        blocker=reports_failure(execution.notes)
        and not any(call.name != MARK_STEP for call in execution.tool_calls),
        usage={purpose: dict(usage) for purpose, usage in execution.usage.items()},
        started_at=datetime.fromtimestamp(started_at, UTC),
        duration_s=round(max(ended_at - started_at, 0.0), 3),
    )


def step_duration(attempts: Sequence[AttemptReport], *, ended_at: float) -> float | None:
    """Wall time from the first attempt's start to ``ended_at`` (epoch seconds), corrections included."""
    first = attempts[0].started_at if attempts else None
    return round(max(ended_at - first.timestamp(), 0.0), 3) if first else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


__all__ = [
    "Move",
    "attempt_report",
    "build_corrective_prompt",
    "failing_checks",
    "next_move",
    "oscillating",
    "step_duration",
    "step_status",
]
