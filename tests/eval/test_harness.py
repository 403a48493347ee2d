"""The MiniWoB++ harness end to end: real task pages in headless Chromium, the real graph, the scripted model.

Rewards come from the pages, claims from the agent's task status; the scripted
model is told to claim one episode falsely, and the confusion matrix must show it.
"""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from veriloop.llm.endpoint import SCRIPTED_MODEL
from veriloop.runners.miniwob.cli import eval_app
from veriloop.runners.miniwob.results import EPISODES_FILE, load_records

pytestmark = pytest.mark.browser
TASKS = "click-button,click-link,enter-text"


def _eval(out, *extra: str):
    args = [
        "miniwob",
        "--tasks",
        TASKS,
        "--episodes",
        "2",
        "--out",
        str(out),
        "--parallel",
        "2",
        *extra,
    ]
    return CliRunner().invoke(eval_app, args, catch_exceptions=False)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("miniwob-eval")
    result = _eval(out, "--false-claim", "click-link:1")
    return out, result


def test_every_episode_is_judged_by_its_page(first_run) -> None:
    out, result = first_run
    assert result.exit_code == 0, result.output
    records = {r.key: r for r in load_records(out)}
    assert set(records) == {(t, e) for t in TASKS.split(",") for e in (0, 1)}
    for key, record in records.items():
        assert record.error is None, record.error
        assert record.env_done, key  # the page itself ended each episode
        assert (
            record.model == SCRIPTED_MODEL
            and record.model_calls > 0
            and record.verification_history
        )
    honest = [r for k, r in records.items() if k != ("click-link", 1)]
    assert all(r.success and r.claimed_done and r.raw_reward > 0 for r in honest)
    # enter-text takes two verified actions: type, then submit
    assert [r.steps for r in honest if r.task == "enter-text"] == [2, 2]


def test_the_false_claim_shows_up_as_a_false_completion(first_run) -> None:
    out, result = first_run
    liar = {r.key: r for r in load_records(out)}[("click-link", 1)]
    assert liar.claimed_done and liar.raw_reward <= 0 and not liar.success
    assert liar.verification_history[-1]["goal_achieved"] is True
    summary = json.loads((out / "summary.json").read_text())
    assert summary["confusion"] == {
        "done": {"success": 5, "failure": 1},
        "not_done": {"success": 0, "failure": 0},
    }
    assert summary["false_completions"] == 1 and summary["false_completion_rate"] == pytest.approx(
        1 / 6
    )
    assert "false completions" in result.output and "said done" in result.output


def test_the_report_is_written(first_run) -> None:
    out, result = first_run
    html = (out / "report.html").read_text()
    assert "click-link" in html and "data:image/png;base64," in html
    assert (out / "per_task.png").read_bytes().startswith(b"\x89PNG")
    assert "| click-link | 2 | 50.0% | 2 | 1 | 0 | 0 |" in (out / "report.md").read_text()
    assert str((out / "report.html").resolve()) in result.output.replace("\n", "")


def test_resume_skips_finished_episodes_and_reruns_failed_ones(first_run, tmp_path) -> None:
    out, _ = first_run
    lines = (out / EPISODES_FILE).read_text().splitlines()
    # A copy where one episode ended in a harness error: resume must run exactly that one again.
    broken = json.loads(lines[0])
    broken["error"] = "RuntimeError: browser crashed"
    (tmp_path / EPISODES_FILE).write_text("\n".join([*lines[1:], json.dumps(broken)]) + "\n")
    result = _eval(tmp_path, "--resume", "--false-claim", "click-link:1")
    assert result.exit_code == 0, result.output
    assert "resumed: 5 finished episodes kept" in result.output
    rerun = (broken["task"], broken["episode"])
    assert result.output.count(" #") == 1 and f"{rerun[0]} #{rerun[1]}:" in result.output
    records = {r.key: r for r in load_records(tmp_path)}
    assert len(records) == 6 and records[rerun].error is None
    assert json.loads((tmp_path / "summary.json").read_text())["episodes"] == 6


def test_bad_arguments_are_refused_before_anything_runs(tmp_path) -> None:
    runner = CliRunner()
    unknown = runner.invoke(
        eval_app, ["miniwob", "--tasks", "click-nothing", "--out", str(tmp_path)]
    )
    assert unknown.exit_code == 2 and "click-nothing" in unknown.output
    neither = runner.invoke(eval_app, ["miniwob", "--out", str(tmp_path)])
    assert neither.exit_code == 2
    claim = runner.invoke(
        eval_app, ["miniwob", "--tasks", "click-button", "--false-claim", "click-button"]
    )
    assert claim.exit_code == 2 and "TASK:EPISODE" in claim.output
    assert not (tmp_path / EPISODES_FILE).exists()


def test_without_the_miniwob_package_the_command_says_how_to_get_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "miniwob", None)  # as in a runtime-only install
    result = CliRunner().invoke(
        eval_app, ["miniwob", "--tasks", "click-button", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2, result.output
    assert "'miniwob' package" in result.output and "make setup-dev" in result.output
    assert not (tmp_path / EPISODES_FILE).exists()


def test_a_real_model_is_never_started_by_accident(tmp_path) -> None:
    result = CliRunner().invoke(
        eval_app, ["miniwob", "--tasks", "click-button", "--no-scripted", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2 and "OPENAI_API_KEY" in result.output
    assert not (tmp_path / EPISODES_FILE).exists()


@pytest.mark.live
def test_a_real_model_runs_unchanged(tmp_path) -> None:
    result = CliRunner().invoke(
        eval_app, ["miniwob", "--tasks", "click-button", "--no-scripted", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    (record,) = load_records(tmp_path)
    assert record.error is None and record.model != SCRIPTED_MODEL and record.model_calls > 0
