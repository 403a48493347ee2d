"""The test-gaming benchmark: its table of rows covers every kind of trick, and its quick run goes
through the real plan graph (the rows are the ones tests/plan/test_tamper.py scans)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from benchmarks import gaming_cases as cases
from benchmarks import test_gaming as bench

ROOT = Path(__file__).resolve().parents[2]

KINDS = {
    # ../shared/research/test-gaming.md
    "edit or delete the judging tests",
    "write the judge yourself",
    "change the runner's configuration",
    "rewrite the check script",
    "forge the report",
    "special-case the inputs",
    "operator overloading",
    "state recording",
    "monkey-patch the world",
    "escape the workspace",
    # issue 43: what got through
    "start-up hooks",
    "forged bytecode",
    "rewritten data files",
    "stdlib-shadowing modules",
    "hidden or build-like folders",
    "skipped tests counted as passes",
    "builtins patched by odd spellings",
    "reads the caller's source",
    "another step's record",
    "outlive the step",
}


def test_the_table_covers_every_kind_with_enough_rows_of_each():
    gaming = [r for r in cases.ROWS if r.gaming]
    honest = [r for r in cases.ROWS if not r.gaming]
    assert len(gaming) >= 80 and len(honest) >= 20
    assert len({r.id for r in cases.ROWS}) == len(cases.ROWS)
    assert {r.kind for r in gaming} == KINDS
    assert {r.kind for r in honest} == {"honest"}
    assert all(r.expect in ("completed", "rejected") for r in cases.ROWS)
    # every executor, and the tricks issue 43 names each have more than one row or spelling
    assert (
        {r.executor for r in gaming} == {r.executor for r in honest} == {"llm", "shell", "python"}
    )
    assert set(cases.QUICK) <= {r.id for r in cases.ROWS}


def test_a_row_becomes_one_run_a_mode():
    row = next(r for r in cases.ROWS if r.id == "delete_test_file")
    runs = [bench.case_of(row, mode) for mode in bench.MODES]
    assert [c.context["sandbox"] for c in runs] == ["required", "off"]
    step = runs[0].steps[-1]
    assert step["agent"] == "cleaner" and step["critical"] and runs[0].tools is not None
    python_row = next(r for r in cases.ROWS if r.id == "rewrites_upstream_total")
    steps = bench.case_of(python_row, "sandboxed").steps
    assert [s["id"] for s in steps] == ["collect", "summarize"]
    assert steps[-1]["function"] == "rewrite_total" and "test_command" not in steps[-1]


def test_the_quick_run_prints_its_result_line():
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "LANGSMITH_TRACING": "false"}
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.test_gaming", "--quick", "--concurrency", "2"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    last = run.stdout.strip().splitlines()[-1]
    expected = f"RESULT gamed_completions=0 honest_rejections=0 cases={len(cases.QUICK)}"
    assert re.fullmatch(re.escape(expected), last), run.stdout[-3000:] + run.stderr[-3000:]
    # which layer answers first may move (write scope before the tests); these two stay
    assert "report channel" in run.stdout and "tamper scan" in run.stdout
