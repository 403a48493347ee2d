"""Summary figures from episode records: the claim x verdict matrix, false/missed completions, loops, resume file."""

from __future__ import annotations

import json

import pytest

from veriloop.llm.endpoint import ModelEndpoint
from veriloop.runners.miniwob.report import plot_per_task, write_report
from veriloop.runners.miniwob.results import (
    EPISODES_FILE,
    EpisodeRecord,
    append_record,
    count_no_change_fast_fails,
    load_records,
    summarize,
)


def _record(
    task: str, episode: int, *, reward: float | None, status: str, repeats: int = 1, **extra
) -> EpisodeRecord:
    return EpisodeRecord(
        task=task,
        episode=episode,
        seed=f"0:{task}:{episode}",
        env_done=reward is not None,
        raw_reward=reward or 0.0,
        agent_status=status,
        max_repeats=repeats,
        **extra,
    )


def test_confusion_matrix_crosses_the_agents_claim_with_the_pages_reward() -> None:
    records = [
        _record("a", 0, reward=1.0, status="completed"),  # true completion
        _record("a", 1, reward=-1.0, status="completed"),  # false completion: said done, reward < 0
        _record(
            "b", 0, reward=None, status="completed"
        ),  # false completion: said done, episode not over
        _record("b", 1, reward=1.0, status="executing"),  # missed completion
        _record("b", 2, reward=-1.0, status="failed", repeats=3),  # honest failure, looped
        _record("b", 3, reward=0.0, status="executing"),  # reward 0 is not success
    ]
    summary = summarize(records)
    assert summary.confusion == {
        "done": {"success": 1, "failure": 2},
        "not_done": {"success": 1, "failure": 2},
    }
    assert summary.successes == 2 and summary.success_rate == pytest.approx(2 / 6)
    assert summary.false_completions == 2 and summary.false_completion_rate == pytest.approx(2 / 3)
    assert summary.missed_completions == 1 and summary.missed_completion_rate == pytest.approx(
        1 / 2
    )
    assert summary.loops == 1 and summary.loop_rate == pytest.approx(1 / 6)
    per_task = {t.task: t for t in summary.per_task}
    assert (per_task["a"].successes, per_task["a"].false_completions) == (1, 1)
    assert (per_task["b"].claimed, per_task["b"].missed_completions, per_task["b"].loops) == (
        1,
        1,
        1,
    )


def test_rates_without_claims_or_successes_are_not_applicable() -> None:
    summary = summarize([_record("a", 0, reward=-1.0, status="failed", repeats=2)])
    assert summary.false_completion_rate is None and summary.missed_completion_rate is None
    assert summary.loops == 0  # two repeats are not a loop


def test_only_model_free_no_effect_failures_count_as_fast_fails() -> None:
    history = [
        {"success": False, "failure_category": "no_effect", "model_called": False},
        {"success": False, "failure_category": "no_effect", "model_called": True},
        {"success": False, "failure_category": "element_missing", "model_called": False},
        {"success": True, "model_called": True},
    ]
    assert count_no_change_fast_fails(history) == 1


def test_records_survive_a_torn_last_line_and_the_latest_record_wins(tmp_path) -> None:
    append_record(tmp_path, _record("a", 0, reward=None, status="executing", error="boom"))
    append_record(tmp_path, _record("a", 0, reward=1.0, status="completed"))
    append_record(tmp_path, _record("a", 1, reward=-1.0, status="failed"))
    with (tmp_path / EPISODES_FILE).open("a") as fh:
        fh.write('{"task": "a", "episode": 2, "se')  # a run killed mid-write
    records = {r.key: r for r in load_records(tmp_path)}
    assert set(records) == {("a", 0), ("a", 1)}
    assert records[("a", 0)].error is None and records[("a", 0)].success


def test_report_files_carry_the_figures(tmp_path) -> None:
    records = [
        _record(
            "click-link", 0, reward=-1.0, status="completed", utterance='Click on the link "x|y".'
        )
    ]
    paths = write_report(
        tmp_path, summarize(records), records, model=ModelEndpoint(model="m", endpoint="openai")
    )
    assert json.loads(paths["summary"].read_text())["false_completions"] == 1
    assert paths["plot"].read_bytes().startswith(b"\x89PNG")
    markdown = paths["markdown"].read_text()
    assert "| agent said done | 0 | 1 |" in markdown
    assert "x\\|y" in markdown  # a pipe in page text does not break the table
    html = paths["html"].read_text()
    assert (
        "data:image/png;base64," in html and "<td>agent said done</td><td>0</td><td>1</td>" in html
    )


def test_the_plot_has_no_legend_entry_for_a_series_it_does_not_draw(tmp_path, monkeypatch) -> None:
    legends: list[list[str]] = []
    monkeypatch.setattr(
        "matplotlib.axes.Axes.legend",
        lambda ax, *a, **k: legends.append(ax.get_legend_handles_labels()[1]),
    )
    honest = [_record("a", 0, reward=1.0, status="completed")]
    plot_per_task(summarize(honest), tmp_path / "honest.png")
    lying = [*honest, _record("a", 1, reward=-1.0, status="completed")]
    plot_per_task(summarize(lying), tmp_path / "lying.png")
    assert legends == [["success rate"], ["success rate", "false completions / episodes"]]
