"""``python -m benchmarks.plan_scaling --quick`` runs end to end: its RESULT line and its plot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_mode_prints_the_result_line_and_writes_the_plot(tmp_path):
    plot = tmp_path / "plan_scaling.png"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.plan_scaling", "--quick", "--plot", str(plot)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    match = re.fullmatch(
        r"RESULT bytes_ratio_40_over_10=([\d.]+) ms_per_step_ratio_40_over_10=([\d.]+) "
        r"ms_per_step_10=([\d.]+) fan_40_status=(\w+) judge_tree_ratio_10=([\d.]+)",
        last,
    )
    assert match, last
    assert match.group(4) == "completed"
    assert (
        1 < float(match.group(1)) < 8
    )  # 4 times the steps: bytes grow with them, not their square
    assert 0 < float(match.group(5)) < 3  # a tree of hard links costs little next to a step
    assert plot.stat().st_size > 0 and plot.with_suffix(".json").exists()
