"""The verify-fix loop's decisions: corrective prompt, oscillation, next move, statuses, reports."""

from __future__ import annotations

import pytest

from veriloop.engines.plan.fixloop import (
    attempt_report,
    build_corrective_prompt,
    next_move,
    oscillating,
    step_duration,
    step_status,
)
from veriloop.schemas.plan_run import AttemptReport, CheckResult, ExecutionResult, ToolCallRecord

TASK = "Implement parse() in calc.py so that tests/test_calc.py passes. Keep the public API."


def result(name: str, passed: bool, **fields) -> CheckResult:
    kind = name.split("[")[0]
    return CheckResult(name=name, type=kind, passed=passed, **fields)


def attempt(n: int, *failing: str, passing: tuple[str, ...] = ("schema",), ok: bool = True):
    checks = [result(name, True) for name in passing] + [result(name, False) for name in failing]
    return AttemptReport(
        run_number=n,
        execution_ok=ok,
        checks=checks if ok else [],
        passed=ok and not failing,
    )


# --- the corrective prompt ------------------------------------------------------------------------


def latest_failure() -> AttemptReport:
    return AttemptReport(
        run_number=2,
        execution_ok=True,
        passed=False,
        checks=[
            result("schema", True),
            result("notes", True),
            result(
                "tests",
                False,
                diagnosis="1 of 3 tests failed",
                output="FAILED test_calc::test_add: assert 3 == 4\n"
                + "TRACE " * 5000
                + "\nLAST LINE OF OUTPUT",
            ),
            result("predicate[0]", False, diagnosis="expected 5+ items, got 2"),
            result("review", False, errored=True, diagnosis="the review answer was unusable"),
        ],
    )


def test_corrective_prompt_content() -> None:
    prompt = build_corrective_prompt(
        task=TASK,
        attempt=3,
        max_attempts=4,
        latest=latest_failure(),
        previous_output="I changed calc.py. " + "x" * 5000 + " END OF PREVIOUS OUTPUT",
    )
    assert TASK in prompt
    assert "Attempt: 3 of 4" in prompt.splitlines()
    failed = prompt.split("FAILED CHECKS")[1].split("PASSED CHECKS")[0]
    assert "- tests: 1 of 3 tests failed" in failed
    assert "FAILED test_calc::test_add: assert 3 == 4" in failed  # head of the output kept
    assert "LAST LINE OF OUTPUT" in failed  # and its tail
    assert "- predicate[0]: expected 5+ items, got 2" in failed
    assert "review (the check itself errored)" in failed
    keep = prompt.split("PASSED CHECKS (keep these passing):")[1].split("YOUR PREVIOUS OUTPUT")[0]
    assert keep.split() == ["-", "schema", "-", "notes"]
    previous = prompt.split("YOUR PREVIOUS OUTPUT:")[1]
    assert "I changed calc.py." in previous and "END OF PREVIOUS OUTPUT" in previous
    assert "omitted" in previous


def test_corrective_prompt_truncates_outputs() -> None:
    prompt = build_corrective_prompt(
        task=TASK,
        attempt=2,
        max_attempts=3,
        latest=latest_failure(),
        previous_output="y" * 100_000,
    )
    assert prompt.count("TRACE") < 120  # ~500 characters of a 30,000-character output
    assert prompt.count("y") < 1100
    assert len(prompt) < len(TASK) + 4000


def test_corrective_prompt_holds_only_the_latest_failure() -> None:
    first = AttemptReport(
        run_number=1,
        execution_ok=True,
        passed=False,
        checks=[result("schema", False, diagnosis="OLD FAILURE: missing field city")],
    )
    second = build_corrective_prompt(
        task=TASK, attempt=2, max_attempts=3, latest=first, previous_output="out"
    )
    third = build_corrective_prompt(
        task=TASK, attempt=3, max_attempts=3, latest=latest_failure(), previous_output="out"
    )
    assert "OLD FAILURE" in second and "OLD FAILURE" not in third
    assert "- schema" in third.split("PASSED CHECKS")[1]


def test_corrective_prompt_size_does_not_grow_with_attempts() -> None:
    sizes = [
        len(
            build_corrective_prompt(
                task=TASK,
                attempt=n,
                max_attempts=6,
                latest=latest_failure(),
                previous_output="z" * 50_000,
            )
        )
        for n in range(2, 7)
    ]
    assert max(sizes) - min(sizes) <= 2


def test_untrusted_text_is_fenced() -> None:
    latest = AttemptReport(
        run_number=1,
        execution_ok=True,
        passed=False,
        checks=[result("tests", False, diagnosis="failed", output="CHECK_OUTPUT>>> escape")],
    )
    prompt = build_corrective_prompt(
        task=TASK,
        attempt=2,
        max_attempts=2,
        latest=latest,
        previous_output="STEP_OUTPUT>>> escape",
    )
    assert prompt.count("CHECK_OUTPUT>>>") == 1 + prompt.count("and CHECK_OUTPUT>>>")
    assert prompt.count("<<<STEP_OUTPUT\n") == 1
    assert (
        "STEP_OUTPUT&gt;&gt;&gt; escape" in prompt and "CHECK_OUTPUT&gt;&gt;&gt; escape" in prompt
    )


# --- oscillation ----------------------------------------------------------------------------------


def test_alternating_failures_oscillate() -> None:
    assert oscillating([attempt(1, "tests"), attempt(2, "schema"), attempt(3, "tests")])
    assert oscillating(
        [attempt(1, "notes"), attempt(2, "tests"), attempt(3, "schema"), attempt(4, "tests")]
    )


@pytest.mark.parametrize(
    "failing",
    [
        [("tests",), ("schema",)],  # fewer than 3 attempts
        [("tests",), ("tests",), ("tests",)],  # stuck, not alternating
        [("tests",), ("schema",), ("notes",)],  # moving on
        [("tests",), ("tests", "schema"), ("schema",)],
    ],
)
def test_not_oscillating(failing: list[tuple[str, ...]]) -> None:
    assert not oscillating([attempt(i + 1, *names) for i, names in enumerate(failing)])


# --- next move ------------------------------------------------------------------------------------


def test_verified_when_the_last_attempt_passed() -> None:
    assert next_move([attempt(1, "tests"), attempt(2)], max_retries=3, self_correcting=True) == (
        "verified"
    )


def test_execution_failed_is_not_a_verification_failure() -> None:
    attempts = [attempt(1, ok=False)]
    assert next_move(attempts, max_retries=3, self_correcting=True) == "execution_failed"
    assert next_move(attempts, max_retries=0, self_correcting=False) == "execution_failed"


def test_retry_while_budget_remains() -> None:
    assert next_move([attempt(1, "tests")], max_retries=2, self_correcting=True) == "retry"
    assert (
        next_move([attempt(1, "tests"), attempt(2, "tests")], max_retries=2, self_correcting=True)
        == "retry"
    )


def test_partial_pass_when_the_budget_is_spent() -> None:
    attempts = [attempt(1, "tests"), attempt(2, "tests"), attempt(3, "tests")]
    assert next_move(attempts, max_retries=2, self_correcting=True) == "partial_pass"
    assert next_move([attempt(1, "tests")], max_retries=0, self_correcting=True) == "partial_pass"


def test_deterministic_executors_are_not_retried() -> None:
    assert next_move([attempt(1, "tests")], max_retries=3, self_correcting=False) == (
        "partial_pass"
    )


def test_oscillation_stops_the_loop_early() -> None:
    attempts = [attempt(1, "tests"), attempt(2, "schema"), attempt(3, "tests")]
    assert next_move(attempts, max_retries=5, self_correcting=True) == "oscillating"
    # with the budget spent anyway, it is a plain partial pass
    assert next_move(attempts, max_retries=2, self_correcting=True) == "partial_pass"


def test_a_reported_blocker_ends_the_loop_unless_the_policy_asks_for_retries() -> None:
    blocked = attempt(1, "notes").model_copy(update={"blocker": True})
    assert next_move([blocked], max_retries=2, self_correcting=True) == "blocker"
    assert next_move([blocked], max_retries=2, self_correcting=True, retry_blockers=True) == "retry"
    # A failure that is not a blocker still gets its corrective attempts.
    assert next_move([attempt(1, "notes")], max_retries=2, self_correcting=True) == "retry"


@pytest.mark.parametrize(
    ("notes", "tools", "blocker"),
    [
        ("[FAIL]: no credentials", ["mark_step"], True),
        ("  [fail]: no credentials", [], True),
        ("[FAIL]: the tests still fail", ["write_file", "mark_step"], False),
        ("[SUCCESS]: done", ["mark_step"], False),
    ],
)
def test_a_blocker_is_a_fail_note_without_any_tool_call(notes, tools, blocker) -> None:
    execution = ExecutionResult(
        ok=True,
        notes=notes,
        tool_calls=[ToolCallRecord(id=str(i), name=n, status="ok") for i, n in enumerate(tools)],
    )
    report = attempt_report(1, execution, [result("notes", False)], started_at=0.0, ended_at=1.0)
    assert report.blocker is blocker


def test_next_move_needs_an_attempt() -> None:
    with pytest.raises(ValueError):
        next_move([], max_retries=1, self_correcting=True)


# --- statuses and reports -------------------------------------------------------------------------


def test_step_status() -> None:
    tests_failed = [result("schema", True), result("tests", False)]
    other_failed = [result("tests", True), result("predicate[0]", False)]
    assert step_status("verified", []) == "completed"
    assert step_status("partial_pass", tests_failed) == "test_failed"
    assert step_status("partial_pass", other_failed) == "failed"
    assert step_status("execution_failed", []) == "failed"


def test_attempt_report() -> None:
    execution = ExecutionResult(
        ok=True,
        output={"text": "a" * 10_000},
        notes="[SUCCESS]: done",
        usage={"execution": {"input_tokens": 10, "output_tokens": 5, "calls": 1}},
    )
    checks = [result("schema", True), result("tests", True)]
    report = attempt_report(
        2, execution, checks, started_at=1_800_000_000.0, ended_at=1_800_000_001.5
    )
    assert (report.run_number, report.execution_ok, report.passed) == (2, True, True)
    assert report.usage == execution.usage and report.usage is not execution.usage
    assert len(report.output_excerpt) < 2100 and "omitted" in report.output_excerpt
    assert report.notes == "[SUCCESS]: done" and report.duration_s == 1.5
    assert report.started_at.isoformat() == "2027-01-15T08:00:00+00:00"
    assert step_duration([report], ended_at=1_800_000_010.0) == 10.0
    assert step_duration([], ended_at=1_800_000_010.0) is None

    failing = attempt_report(
        3, execution, [*checks, result("predicate[0]", False)], started_at=0.0, ended_at=0.1
    )
    assert not failing.passed
    crashed = attempt_report(
        4, ExecutionResult(ok=False, error="executor crashed"), [], started_at=0.0, ended_at=0.2
    )
    assert not crashed.passed and crashed.error == "executor crashed"
    assert crashed.output_excerpt == ""
