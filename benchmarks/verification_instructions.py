"""Instructions of one verification step next to a bare parse, on real pages: the figures of
:mod:`benchmarks.verification_overhead` counted by callgrind instead of timed.

On a shared, loaded machine wall-clock ratios move by a third from run to run; instruction
counts repeat. For every ``--every``-th corpus pair (``--every 8``: 15 pages), with the
``before_state`` prepared outside the count, a child Python under ``valgrind --tool=callgrind``
(instrumented only once its imports are done: they would cost most of the run) runs the step (``observe_page``, as the wall benchmark calls it) and ``lxml.html.fromstring`` of
the page after, each once untimed and then once counted, as the wall benchmark's median run
follows runs of its own kind. Each counted call sits between two calls of ``os.getpgrp``, at
which callgrind dumps its counters (``--dump-before=getpgrp``). Ratios per page, then the median
and p90 over the pages. Needs valgrind; a run takes minutes.

    python -m benchmarks.verification_instructions [CORPUS] [--every 8]
"""

from __future__ import annotations

import gc
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from benchmarks.verification_pairs import DEFAULT_CORPUS, PAGE_URL, load_pairs

ACTION = "click(5)"
_SEGMENTS = 4
"""Dumps a page adds: its counted step, the warm parse, the counted parse, the next warm step."""


def _count(pages_file: str) -> None:
    """The child under callgrind: the counted calls between markers (``os.getpgrp``)."""
    import lxml.html

    from veriloop.engines.verification import observe_page

    pages = pickle.loads(Path(pages_file).read_bytes())
    marker = os.getpgrp
    print("ready", flush=True)
    sys.stdin.readline()  # the parent has turned instrumentation on
    for _, stored, after in pages:
        gc.collect()
        observe_page(stored, after, PAGE_URL, None, None, ACTION)
        marker()
        observe_page(stored, after, PAGE_URL, None, None, ACTION)
        marker()
        lxml.html.fromstring(after)
        marker()
        lxml.html.fromstring(after)
        marker()


def _totals(out_dir: Path) -> list[int]:
    """Instructions of each numbered dump, in order (``cg.out.1`` is everything before the first
    marker; what follows the last one is ``cg.out``, left out)."""
    dumps = sorted(out_dir.glob("cg.out.*"), key=lambda path: int(path.suffix[1:]))
    totals = []
    for dump in dumps:
        with dump.open() as lines:
            total = next(line for line in lines if line.startswith(("summary:", "totals:")))
        totals.append(int(total.split()[1]))
    return totals


def main(
    corpus: Annotated[Path, typer.Argument(help="Folder of *.html pages.")] = DEFAULT_CORPUS,
    every: Annotated[int, typer.Option(min=1, help="Count every n-th corpus pair.")] = 8,
) -> None:
    from veriloop.engines.observation import capture_page_state

    pairs = load_pairs(corpus)[::every]
    pages = [(p.name, capture_page_state(PAGE_URL, p.before).stored(), p.after) for p in pairs]
    with tempfile.TemporaryDirectory() as folder:
        out_dir = Path(folder)
        pages_file = out_dir / "pages.pickle"
        pages_file.write_bytes(pickle.dumps(pages))
        child = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                "--dump-before=getpgrp",
                f"--callgrind-out-file={out_dir / 'cg.out'}",
                sys.executable,
                "-m",
                "benchmarks.verification_instructions",
                "--count",
                str(pages_file),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        with child:
            if child.stdout.readline().strip() != "ready":
                child.kill()
                raise SystemExit(
                    f"the counting child failed before its first page ({child.wait()})"
                )
            # valgrind runs in the child's own process, so its pid is the one to instrument.
            subprocess.run(
                ["callgrind_control", "--instr=on", str(child.pid)],
                check=True,
                capture_output=True,
            )
            child.stdin.write("go\n")
            child.stdin.close()
        if child.returncode != 0:
            raise SystemExit(f"the counting child exited {child.returncode}")
        totals = _totals(out_dir)
    if len(totals) != _SEGMENTS * len(pages):  # what runs after the last marker is not a dump
        raise SystemExit(f"{len(totals)} dumps for {len(pages)} pages: another getpgrp call?")
    ratios = []
    for n, (name, _, _) in enumerate(pages):
        # Dump 1 holds the start-up and the first warm step.
        step, _, parse = totals[1 + _SEGMENTS * n : _SEGMENTS * (n + 1)]
        ratios.append(step / parse)
        print(f"{name}: step {step:,} lxml {parse:,} instructions, {step / parse:.3f}")
    p90 = statistics.quantiles(ratios, n=100, method="inclusive")[89]
    print(
        f"RESULT median_vs_lxml={statistics.median(ratios):.3f} p90_vs_lxml={p90:.3f} "
        f"pages={len(ratios)}"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--count"]:
        _count(sys.argv[2])
    else:
        typer.run(main)
