"""A real small model through llama-cpp-python's server: one browser task on the demo app, one plan
run, a short MiniWoB++ eval. Plumbing, not skill: every structured call is valid JSON for its
schema (after the server's one dialect rejection), usage and cost are counted, nothing crashes,
and no status contradicts the page's (or the project's) own truth."""

from __future__ import annotations

import pytest
from conftest import PRICE, assert_plumbing

from veriloop.runners.demo import ADD_PATIENT, run_demo
from veriloop.runners.miniwob_eval import EvalConfig, run_miniwob
from veriloop.runners.plan_demo import run_plan_demo
from veriloop.schemas.usage import Usage

pytestmark = pytest.mark.browser


def _priced(usage: Usage) -> float:
    return (usage.input_tokens * PRICE[0] + usage.output_tokens * PRICE[1]) / 1e6


def test_a_demo_task_through_the_local_model(tmp_path, proxy, monkeypatch) -> None:
    monkeypatch.setenv("VERILOOP_MAX_STEPS_PER_TASK", "3")
    result = run_demo(tmp_path / "report", goals=[ADD_PATIENT])

    assert not result.scripted
    [run] = result.runs
    assert run.error is None, run.error
    assert run.status in ("completed", "failed", "budget_exhausted"), run.status
    [check] = result.checks
    if run.status == "completed":  # the agent may only finish what the app confirms
        assert check.passed, check.detail
    assert_plumbing(proxy)
    usage = Usage.model_validate(
        {k: sum(u.get(k, 0) for u in run.usage.values()) for k in Usage.model_fields}
    )
    assert usage.calls == sum(1 for e in proxy.exchanges if e.status == 200)
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.cost_usd == pytest.approx(_priced(usage), rel=1e-6)
    assert {"planning", "action", "verification"} <= set(run.usage)


def test_a_miniwob_eval_through_the_local_model(tmp_path, proxy) -> None:
    config = EvalConfig(
        tasks=["click-button", "click-link"], episodes=1, out_dir=tmp_path, max_steps=3
    )
    result = run_miniwob(config, scripted=False)

    assert result.summary.errors == 0, [r.error for r in result.records]
    assert result.summary.episodes == 2
    # Statuses agree with the page: no episode the agent closed as done that MiniWoB scored as failed.
    assert result.summary.false_completions == 0, [
        (r.task, r.reward, r.actions) for r in result.records
    ]
    assert_plumbing(proxy)
    assert result.summary.model_calls == sum(1 for e in proxy.exchanges if e.status == 200)
    assert result.summary.cost_usd > 0


def test_a_plan_run_through_the_local_model(tmp_path, proxy, monkeypatch) -> None:
    monkeypatch.setenv("VERILOOP_MAX_TURNS", "3")
    monkeypatch.setenv("VERILOOP_MAX_REPLANS_PER_RUN", "0")
    result = run_plan_demo(tmp_path / "report")

    assert not result.scripted
    if result.report.status == "completed":  # only with the project's own suite passing
        assert result.suite_exit_code == 0, result.suite_output
    for step in result.report.steps.values():
        if step.status == "completed":
            assert all(check.passed for check in step.attempts[-1].checks)
    structured = [e for e in proxy.exchanges if e.dialect is not None]
    assert structured and all(e.valid for e in structured if e.status == 200)
    assert sum(u["calls"] for u in result.report.usage.values()) == sum(
        1 for e in proxy.exchanges if e.status == 200
    )
