"""A real small model through llama-cpp-python's server: one browser task on the demo app, one plan
run, a short MiniWoB++ eval. Plumbing, not skill: every structured call is valid JSON for its
schema (after the server's one dialect rejection), usage and cost are counted, nothing crashes,
and no status contradicts the page's (or the project's) own truth."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from veriloop.context import PlanContext
from veriloop.plans import PlanRunner
from veriloop.runners.demo.run import ADD_PATIENT, run_demo
from veriloop.runners.miniwob.harness import EvalConfig, run_miniwob
from veriloop.schemas.usage import total_usage

pytestmark = pytest.mark.browser


def test_a_demo_task_through_the_local_model(tmp_path, proxy, plumbing, monkeypatch) -> None:
    monkeypatch.setenv("VERILOOP_MAX_STEPS_PER_TASK", "2")
    result = run_demo(tmp_path / "report", goals=[ADD_PATIENT])

    assert not result.scripted
    [run] = result.runs
    assert run.error is None, run.error
    assert run.status in ("completed", "failed", "budget_exhausted"), run.status
    [check] = result.checks
    if run.status == "completed":  # the agent may only finish what the app confirms
        assert check.passed, check.detail
    plumbing.check(proxy)
    usage = total_usage(run.usage)
    assert usage.calls == sum(1 for e in proxy.exchanges if e.status == 200)
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.cost_usd == pytest.approx(plumbing.priced(usage), rel=1e-6)
    # Usage per purpose is what the server answered, the finish audit counted as verification.
    answered = {e.purpose for e in proxy.exchanges if e.status == 200}
    assert set(run.usage) == {"verification" if p == "audit" else p for p in answered}
    assert {"planning", "action"} <= set(run.usage)


def test_a_miniwob_eval_through_the_local_model(tmp_path, proxy, plumbing) -> None:
    config = EvalConfig(tasks=["click-button"], episodes=1, out_dir=tmp_path, max_steps=2)
    result = run_miniwob(config, scripted=False)

    assert result.summary.errors == 0, [r.error for r in result.records]
    assert result.summary.episodes == 1
    # Statuses agree with the page: no episode the agent closed as done that MiniWoB scored as failed.
    assert result.summary.false_completions == 0, [
        (r.task, r.reward, r.actions) for r in result.records
    ]
    plumbing.check(proxy)
    assert result.summary.model_calls == sum(1 for e in proxy.exchanges if e.status == 200)
    assert result.summary.cost_usd > 0


MANIFEST = {
    "goal": "Write hello.txt containing the word hello.",
    "agents": {
        "writer": {
            "prompt": "You work in a small workspace. Use write_file, then report with mark_step.",
            "tools": ["write_file", "list_files"],
        }
    },
    "steps": [
        {
            "id": "hello",
            "agent": "writer",
            "input": "Write the file hello.txt with the content: hello",
            "max_retries": 0,
            "checks": [{"kind": "command", "command": "grep -qx hello hello.txt"}],
        }
    ],
}


def test_a_plan_run_through_the_local_model(tmp_path, proxy, monkeypatch) -> None:
    monkeypatch.setenv("VERILOOP_MAX_TURNS", "2")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    runner = PlanRunner(
        checkpointer=InMemorySaver(),
        context=PlanContext(workspace=str(workspace), max_replans_per_run=0),
    )
    report = runner.run(manifest=MANIFEST, run_id="local")

    step = report.steps["hello"]
    assert report.status in ("completed", "failed"), report.status
    written = (workspace / "hello.txt").read_text() if (workspace / "hello.txt").exists() else None
    if step.status == "completed":  # only with the file really there
        assert written is not None and written.strip() == "hello"
    else:
        assert report.status == "failed"
    assert step.attempts and step.attempts[-1].checks
    turns = [e for e in proxy.exchanges if e.dialect is None]
    assert turns and all(e.status == 200 for e in turns), turns
    assert report.usage["execution"]["calls"] == len(turns)
    assert report.usage["execution"]["cost_usd"] > 0


def test_the_local_model_benchmark_prints_its_result_line(
    tmp_path, local_model, model_bounds
) -> None:
    """``benchmarks.local_model_eval`` in its smallest run, against the same local server, with the
    same bounds on the model as the other tests."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.local_model_eval",
            "--upstream",
            local_model.base_url,
            "--model",
            local_model.model,
            "--tasks",
            "click-button",
            "--episodes",
            "1",
            "--max-steps",
            "1",
            "--out",
            str(tmp_path / "eval"),
        ],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].startswith("RESULT episodes=1 "), done.stdout[
        -3000:
    ]
