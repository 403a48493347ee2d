"""The console latency benchmark's quick mode runs end to end (the run page, then a browser task's
page, in Chromium) and prints its RESULT line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.browser
def test_the_quick_benchmark_prints_its_result():
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.console_latency", "--quick"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("RESULT median_ms=") and "page_kb=" in last and "steps=3" in last
    figures = dict(part.split("=") for part in last.split()[1:])
    assert float(figures["task_ms"]) > 0 and float(figures["task_ratio"]) > 0
