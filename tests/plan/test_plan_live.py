"""The plan demo with a real model; runs only when OPENAI_API_KEY is set in the environment
pytest started with. A real model may or may not finish the project; what must hold is that the
run never says completed while the project's own test suite fails."""

from __future__ import annotations

import pytest

from veriloop.runners.plan.demo import run_plan_demo


@pytest.mark.live
def test_a_real_model_never_completes_the_demo_with_a_failing_suite(tmp_path) -> None:
    result = run_plan_demo(tmp_path / "report")
    assert not result.scripted and result.report.model == result.model
    if result.report.status == "completed":
        assert result.suite_exit_code == 0, result.suite_output
    for step in result.report.steps.values():
        if step.status == "completed":
            assert all(check.passed for check in step.attempts[-1].checks)
    assert result.report.usage["execution"]["calls"] > 0
    assert (tmp_path / "report" / "report.html").is_file()
