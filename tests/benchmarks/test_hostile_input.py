"""A smoke run of ``benchmarks.hostile_input --quick``: a real service process fed the manifest
bombs; the benchmark itself fails on a 5xx or a stuck run, and says where it looked for the corpus."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_quick_run_answers_every_manifest_case_and_names_the_missing_corpus(tmp_path):
    empty = tmp_path / "no-corpus"
    env = {**os.environ, "VERILOOP_CORPUS_HTML": str(empty)}
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.hostile_input", "--quick"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    answers = {line.split()[0]: line.split()[1] for line in lines if line.startswith("manifest_")}
    assert answers == {
        "manifest_alias_bomb": "413",
        "manifest_lists_10k_text": "413",
        "manifest_lists_10k_json": "400",
        "manifest_yaml_block_1500": "413",
        "manifest_object_900": "413",
        "manifest_1000_shell_steps": "413",
        "manifest_step_output_200mb": "202",
    }
    assert f"skipped, no *.html in {empty}" in run.stdout
    assert re.fullmatch(
        r"RESULT worst_case_seconds=[\d.]+ rss_peak_mb=\d+ beyond_brief_worst_seconds=[\d.]+",
        lines[-1],
    )
