"""The no-change benchmark on a small task subset: real pages, the real snapshot script, the real engine."""

from __future__ import annotations

import re

import pytest

from benchmarks import no_change_detection as bench

pytestmark = pytest.mark.browser
RESULT = re.compile(
    r"^RESULT engine_precision=(?P<ep>[\d.]+) engine_recall=(?P<er>[\d.]+) "
    r"hash_precision=(?P<hp>[\d.]+) hash_recall=(?P<hr>[\d.]+) transitions=(?P<n>\d+)$"
)


def test_benchmark_scores_engine_and_hash_rule_on_the_same_transitions(capsys) -> None:
    code = bench.main(["--tasks", "enter-text,click-checkboxes,click-button", "--episodes", "1"])
    out = capsys.readouterr().out
    assert code == 0
    last = out.strip().splitlines()[-1]
    match = RESULT.match(last)
    assert match, last
    figures = {k: float(v) for k, v in match.groupdict().items()}
    assert figures["n"] == 9  # 3 tasks x (static click, timer wait, effective action)
    # Every no-op still changes the DOM (the page tags the clicked text; the timer ticks): hash-only flags them all.
    assert figures["hp"] == pytest.approx(1 / 3, abs=1e-3) and figures["hr"] == 1.0
    # The engine ignores those changes: no false alarm, and typing / checking a box is seen.
    assert figures["ep"] == 1.0
    assert figures["er"] >= 2 / 3
    assert "timer_wait" in out and "click-checkboxes" in out


def test_transitions_are_labelled_by_the_action_not_by_what_the_engine_saw() -> None:
    noop = bench.Transition(
        "t",
        "s",
        "timer_wait",
        "wait",
        effective=False,
        engine=True,
        hash_changed=True,
        witness=True,
    )
    hit = bench.Transition(
        "t",
        "s",
        "effective",
        "click(1)",
        effective=True,
        engine=True,
        hash_changed=True,
        witness=False,
    )
    miss = bench.Transition(
        "t",
        "s",
        "effective",
        "click(2)",
        effective=True,
        engine=False,
        hash_changed=True,
        witness=True,
    )
    engine = bench.score([noop, hit, miss], "engine")
    assert (engine.tp, engine.fp, engine.fn) == (1, 1, 1)
    assert engine.precision == 0.5 and engine.recall == 0.5
    report = bench.report([noop, hit, miss]).splitlines()
    assert report[-1].startswith("RESULT engine_precision=0.500 engine_recall=0.500")
    assert any("missed effective: t [effective] click(2)" in line for line in report)


def test_unknown_tasks_are_refused(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        bench.main(["--tasks", "click-nothing"])
    assert exc.value.code == 2
    assert "click-nothing" in capsys.readouterr().err
