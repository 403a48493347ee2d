"""The verify-fix loop through the plan graph: a scripted llm agent writes real code into the
workspace, real pytest runs judge it, the corrective prompt carries the latest failure only."""

from __future__ import annotations

from pathlib import Path

import pytest
from plan_testkit import manifest

from veriloop.llm.scripted import ToolCalls
from veriloop.schemas.plan_outputs import StepReviewVerdict

TEST_FILE = """from adder import add


def test_adds():
    assert add(2, 3) == 5


def test_adds_negatives():
    assert add(-2, -3) == -5
"""
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_adder.py").write_text(TEST_FILE)
    (tmp_path / "tests" / "conftest.py").write_text(
        "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent.parent))\n"
    )
    return tmp_path


def write_and_mark(code: str, notes: str = "[SUCCESS]: add implemented") -> ToolCalls:
    return ToolCalls(
        [
            ("write_file", {"path": "adder.py", "content": code}),
            ("mark_step", {"notes": notes, "output": "adder.py"}),
        ]
    )


def coder(fix_on_attempt: int | None):
    """An agent that writes the bug first and the fix from attempt ``fix_on_attempt`` on."""

    def answer(request):
        attempt = next((n for n in range(2, 7) if f"Attempt: {n} of" in request.text), 1)
        fixed = fix_on_attempt is not None and attempt >= fix_on_attempt
        return write_and_mark(FIXED if fixed else BUGGY)

    return answer


ADDER = {
    "id": "adder",
    "agent": "coder",
    "input": "Write adder.py with add(a, b).",
    "max_retries": 2,
}
AGENTS = {"coder": {"prompt": "You write Python.", "tools": ["write_file", "read_file"]}}


def test_a_bug_caught_by_the_tests_is_fixed_by_the_corrective_prompt(
    runner, scripted_model, project
):
    scripted_model.on("execution", coder(fix_on_attempt=2))
    report = runner().run({**manifest(ADDER), "agents": AGENTS})
    step = report.steps["adder"]
    assert report.status == "completed" and step.verification_status == "verified"
    assert [a.run_number for a in step.attempts] == [1, 2]
    first_tests = next(c for c in step.attempts[0].checks if c.type == "tests")
    assert not first_tests.passed and first_tests.details["failed"] == 2
    assert (project / "adder.py").read_text() == FIXED
    corrective = [r for r in scripted_model.requests if "Attempt: 2 of 3" in r.text][0].text
    assert "Write adder.py with add(a, b)." in corrective  # the original task is kept
    assert "test_adds" in corrective  # ...with the latest failure from the JUnit report
    # The report keeps what the retry was told, for the people who read it (the console).
    assert step.attempts[0].corrective_prompt is None
    assert "Attempt: 2 of 3" in step.attempts[1].corrective_prompt
    assert "test_adds" in step.attempts[1].corrective_prompt
    # Tokens of both attempts add up on the step and the run.
    assert step.usage["execution"]["calls"] == 2 == report.usage["execution"]["calls"]


def test_success_notes_never_complete_a_step_whose_tests_fail(runner, scripted_model, project):
    scripted_model.on("execution", coder(fix_on_attempt=None))
    report = runner().run({**manifest({**ADDER, "max_retries": 1}), "agents": AGENTS})
    step = report.steps["adder"]
    assert step.verification_status == "partial_pass" and len(step.attempts) == 2
    assert step.notes.startswith("[SUCCESS]") and step.status == "test_failed"
    assert step.disposition == "skip"  # non-critical halt_if_critical: the run goes on
    assert report.status == "failed"


def test_fail_notes_fail_the_step_even_when_the_tests_pass(runner, scripted_model, project):
    scripted_model.on(
        "execution", lambda request: write_and_mark(FIXED, "[FAIL]: could not finish")
    )
    report = runner().run({**manifest({**ADDER, "max_retries": 0}), "agents": AGENTS})
    checks = {c.name: c.passed for c in report.steps["adder"].attempts[0].checks}
    assert checks["notes"] is False and checks["tests"] is True
    assert report.steps["adder"].verification_status == "partial_pass"


def test_a_critical_step_needs_the_llm_review_too(runner, scripted_model, project):
    scripted_model.on("execution", coder(fix_on_attempt=1))
    scripted_model.script(
        "review", StepReviewVerdict(passed=False, diagnosis="add ignores floats", confidence=0.9)
    )
    report = runner(review_critical_steps=True).run(
        {**manifest({**ADDER, "critical": True, "max_retries": 0}), "agents": AGENTS}
    )
    step = report.steps["adder"]
    review = next(c for c in step.attempts[0].checks if c.type == "review")
    assert not review.passed and "add ignores floats" in review.diagnosis
    assert step.status == "failed" and report.halted
    assert step.usage["review"]["calls"] == 1
    # The step's output reached the reviewer as fenced data.
    assert "STEP_OUTPUT" in [r for r in scripted_model.requests if r.purpose == "review"][0].text


def test_a_provider_outage_mid_attempt_resumes_at_that_attempt(runner, scripted_model, project):
    from veriloop.llm.base import LLMUnavailable
    from veriloop.llm.scripted import Fail

    outage = {"on": True}

    def answer(request):
        if "Attempt: 2 of" not in request.text:
            return write_and_mark(BUGGY)
        return Fail(503, "provider down") if outage["on"] else write_and_mark(FIXED)

    scripted_model.on("execution", answer)
    plan = runner(llm_max_retries=0)
    with pytest.raises(LLMUnavailable):
        plan.run({**manifest(ADDER), "agents": AGENTS}, run_id="outage")
    paused = plan.report("outage")
    # An error never completes a step: it is still in flight, and resumes where it was.
    assert paused.status == "running" and paused.steps["adder"].status == "running"
    outage["on"] = False
    done = plan.resume("outage")
    step = done.steps["adder"]
    assert done.status == "completed" and [a.run_number for a in step.attempts] == [1, 2]
    first_attempts = [
        r
        for r in scripted_model.requests
        if r.purpose == "execution" and "Attempt: 2 of" not in r.text
    ]
    assert len(first_attempts) == 1  # attempt 1 was not executed again


@pytest.mark.parametrize(("on_failure", "attempts"), [("halt_if_critical", 1), ("retry", 3)])
def test_a_reported_blocker_ends_the_loop_unless_the_policy_asks_for_retries(
    runner, scripted_model, project, on_failure, attempts
):
    scripted_model.on(
        "execution", lambda request: ToolCalls([("mark_step", {"notes": "[FAIL]: no credentials"})])
    )
    step = {**ADDER, "on_failure": on_failure}
    report = runner().run({**manifest(step), "agents": AGENTS})
    adder = report.steps["adder"]
    assert len(adder.attempts) == attempts and adder.status == "test_failed"
    # The checks still ran on the one attempt, for the report.
    assert {c.type for c in adder.attempts[0].checks} >= {"notes", "tests"}
    assert adder.attempts[0].blocker
    if attempts == 1:
        assert adder.diagnosis.startswith("stopped: the executor reported that it cannot go on")
