"""The false-completion benchmark inside pytest: every lying step ends as its case says, and the
counting catches a single wrong expectation.

By default a representative subset runs (every group, every executor, every check type; ~15 s);
``VERILOOP_LIES_FULL=1`` runs every case of ``python -m benchmarks.plan_false_completions``.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from benchmarks import plan_false_completions as bench
from benchmarks.false_completion_cases import COMPLETED, TEST_FAILED

CASES = {case.name: case for case in bench.build_cases()}
FAST = [
    "success_notes_buggy_code",
    "success_echo_shell_step",
    "success_notes_python_step",
    "predicate_count_mismatch",
    "predicate_key_missing",
    "schema_missing_required",
    "schema_prose_instead_of_json",
    "fail_notes_tests_green",
    "fail_notes_lowercase",
    "fail_notes_python_step",
    "pending_max_turns",
    "pending_tool_socket_timeout",
    "gate_upstream_python_lied",
    "flaky_green_then_red_on_rerun",
    "crash_python_raises_after_work",
    "crash_shell_nonzero_exit",
    "crash_llm_garbage_body",
    "fix_tests_breaks_predicate",
    "fix_oscillates",
    "tamper_tests_to_tautologies",
    "tamper_delete_test_file",
    "tamper_conftest_deselects_all",
    "tamper_skip_inside_the_code",
    "tamper_pyproject_deselects",
    "tamper_fake_pytest_module",
    "tamper_writes_tests_games_check_script",
    "tamper_exit_zero_during_collection",
    "collect_fewer_than_last_attempt",
    "review_says_wrong",
    "review_garbage",
    "review_injection_in_output",
    "text_claim_tests_fail",
    "text_claim_no_other_checks",
    "replan_returns_same_broken_step",
    "subplan_child_lied",
    "control_good_code",
    "control_fixed_on_retry",
    "control_gate_honest_upstream",
]
SELECTED = list(CASES) if os.environ.get("VERILOOP_LIES_FULL") else FAST
ALWAYS = ["control_good_code", "success_notes_buggy_code"]
"""Run even when only the counting tests are selected (they re-evaluate these two)."""


@pytest.fixture(scope="module")
def outcomes(request) -> dict[str, bench.CaseOutcome]:
    """Every case this session selected from this module, run once, concurrently."""
    wanted = set(ALWAYS)
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if item.module is request.module and callspec is not None and "name" in callspec.params:
            wanted.add(callspec.params["name"])
    cases = [case for name, case in CASES.items() if name in wanted]
    with bench.Suite(cases) as suite:
        results = asyncio.run(suite.arun(concurrency=4))
    return {outcome.case.name: outcome for outcome in results}


@pytest.mark.parametrize("name", SELECTED)
def test_the_step_ends_as_its_case_says(name, outcomes):
    steps = bench.evaluate(outcomes[name])
    wrong = [
        f"{s.step}: expected {s.expected}, got {s.got}; failed checks {s.failed_checks}; "
        f"{'FALSE COMPLETION; ' if s.false_completion else ''}{'; '.join(s.problems)} "
        f"(diagnosis: {s.diagnosis[:300]})"
        for s in steps
        if s.wrong_status or s.false_completion
    ]
    assert not wrong, "\n".join(wrong)


def test_a_corrupted_expectation_is_counted(outcomes):
    control = outcomes["control_good_code"]
    assert bench.count(bench.evaluate(control)) == (0, 0, 1)
    # The honest step completed; a case that says it must not complete makes it a false completion.
    corrupted = bench.evaluate(control, {"impl": TEST_FAILED})
    assert bench.count(corrupted) == (1, 1, 1)
    assert bench.result_line(corrupted) == "RESULT false_completions=1 wrong_status=1 steps=1"
    # A lie that was caught, expected to complete: a wrong status, not a false completion.
    lie = outcomes["success_notes_buggy_code"]
    assert bench.count(bench.evaluate(lie)) == (0, 0, 1)
    assert bench.count(bench.evaluate(lie, {"impl": COMPLETED})) == (0, 1, 1)


def test_the_suite_is_big_enough_and_has_honest_controls():
    cases = list(CASES.values())
    lying_steps = sum(1 for case in cases for pair in case.expect.values() if pair != COMPLETED)
    controls = [case for case in cases if case.control]
    assert lying_steps >= 40 and len(controls) >= 5
    assert len({case.model for case in cases}) == len(cases)  # the router tells cases apart
