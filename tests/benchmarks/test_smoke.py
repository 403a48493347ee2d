"""Every benchmark runs in CI in a quick mode, so none rots unnoticed: each must exit 0 and print its
``RESULT k=v ...`` line last. The figures themselves are not asserted here (timing targets stay out of
tests); the benchmarks' docs quote them from full runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.verification_pairs import DEFAULT_CORPUS

QUICK_PAGES = 2
"""Corpus pages the page benchmarks read in quick mode (the first ones in name order)."""

RESULT_LINE = re.compile(r"^RESULT( [A-Za-z0-9_]+=\S+)+$")

# (module, arguments); "{corpus}" is a folder of QUICK_PAGES corpus pages, "{tmp}" a scratch folder.
BENCHMARKS = [
    ("verification_overhead", ["{corpus}", "--repeat", "1", "--out", "{tmp}/out.json"]),
    ("verification_instructions", ["{corpus}", "--every", "1"]),  # runs valgrind
    ("verification_stages", ["{corpus}", "--every", "1", "--rounds", "1"]),
    ("verification_prompt_size", ["{corpus}", "--out", "{tmp}/out.json"]),
    ("observation_mutations", ["{corpus}", "--per-class", "1"]),
    ("page_handover", ["--calls", "2"]),
    ("state_growth", ["--steps", "12"]),
    ("no_change_detection", ["--tasks", "click-button", "--episodes", "1"]),
    ("corrective_prompt_growth", []),
    ("plan_parallelism", ["--repeats", "1", "--out", "{tmp}/out.json"]),
    ("plan_dispatch", ["--quick", "--repeats", "1", "--out", "{tmp}/out.json"]),
    ("plan_false_completions", ["--only", "control_good_code", "--out", "{tmp}/out.json"]),
    ("service_overhead", ["--steps-per-task", "2", "--tasks-1c", "1", "--clients", "2"]),
    ("service_concurrency", ["--quick", "--workers", "2"]),  # one mode: the multi-process one
    (
        "service_instructions",
        ["--tasks", "2", "--steps", "2", "--repeat", "1", "--databases", "sqlite"],
    ),  # valgrind
    ("critic_scaling", ["--sizes", "20,40", "--repeats", "1"]),
    ("sandbox_overhead", ["--repeats", "1", "--tests", "3"]),
]


def test_every_benchmark_module_is_smoke_tested():
    """A new benchmark without a quick run here (or a smoke test of its own) fails this test."""
    tests = Path(__file__).parents[1]
    others = " ".join(
        p.read_text() for p in tests.rglob("test_*.py") if p.resolve() != Path(__file__).resolve()
    )
    listed = {name for name, _ in BENCHMARKS}
    modules = {
        p.stem for p in (tests.parent / "benchmarks").glob("*.py") if "__main__" in p.read_text()
    }
    untested = sorted(
        m
        for m in modules - listed
        if f"benchmarks.{m}" not in others and f"from benchmarks import {m}" not in others
    )
    assert not untested, f"benchmarks with no quick run in tests: {untested}"


@pytest.fixture(scope="module")
def quick_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first corpus pages, copied into a folder of their own (read from the shared corpus)."""
    corpus = DEFAULT_CORPUS
    pages = sorted(corpus.glob("*.html"))[:QUICK_PAGES]
    assert pages, f"the benchmark corpus is missing: no *.html pages in {corpus}"
    folder = tmp_path_factory.mktemp("corpus")
    for page in pages:
        shutil.copy(page, folder / page.name)
    return folder


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("module", "arguments"), BENCHMARKS, ids=[m for m, _ in BENCHMARKS])
def test_benchmark_prints_its_result_line(
    module: str, arguments: list[str], quick_corpus: Path, tmp_path: Path
):
    argv = [a.format(corpus=quick_corpus, tmp=tmp_path) for a in arguments]
    env = {**os.environ, "VERILOOP_CORPUS_HTML": str(quick_corpus)}
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *argv],
        cwd=Path(__file__).parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0, (
        f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    assert lines and RESULT_LINE.match(lines[-1]), f"no RESULT line last:\n{done.stdout[-3000:]}"
