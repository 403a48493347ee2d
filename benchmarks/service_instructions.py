"""The serving process's instructions a step, counted by callgrind, beside a baseline checkout.

CPU time a step moves by 10% or more between runs of the same code on a shared 2-core machine;
instructions do not (runs of the same code agree within 0.5%). ``veriloop serve`` runs under
``valgrind --tool=callgrind`` with counting off; after a warm-up round it is switched on
(``callgrind_control``) for one round of ``--tasks`` concurrent tasks of ``--steps`` steps on the
scripted model (``--latency`` seconds a call), as :mod:`benchmarks.service_concurrency` runs them
(its page, its answers), then dumped. Counted: every thread of the serving process (the event
loop, aiosqlite's thread, the page pool's pipes); the page processes run uncounted, outside
valgrind. ``--baseline-repo PATH`` counts another checkout (with its own ``.venv``) the same way,
runs interleaved. Needs valgrind; a round takes one to three minutes.

    python -m benchmarks.service_instructions [--baseline-repo PATH] [--tasks 10] [--steps 5]
        [--latency 0.3] [--repeat 2] [--databases sqlite,postgres] [--postgres-url URL]

Last line: ``RESULT minstr_per_step_<database>=<median, millions> ...`` for this checkout, then
``baseline_minstr_per_step_<database>=...`` for the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from benchmarks.service_concurrency import answer, database_url, mid_size_page, run_tasks
from benchmarks.service_overhead import ServiceProcess
from veriloop.llm.scripted import ANY_PURPOSE, Delay, ScriptedModelServer

START_TIMEOUT_S = 900.0
"""valgrind runs the service's imports ten times slower or more."""


def count(
    checkout: Path | None, url: str, model: ScriptedModelServer, html: str, args, out: Path
) -> float:
    """Millions of instructions a step of the serving process of ``checkout`` (None: this one)."""
    service = ServiceProcess(
        url,
        model.base_url,
        checkout=checkout,
        env={"VERILOOP_STEP_DEADLINE_S": "3600", "VERILOOP_LOCK_TIMEOUT_S": "3600"},
        prefix=[
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
        ],
        start_timeout_s=START_TIMEOUT_S,
    )
    pid = str(service.process.pid)
    try:
        asyncio.run(run_tasks(service.url, html, 3, 3))  # warm-up: imports, connections
        control("-i", "on", pid)
        asyncio.run(run_tasks(service.url, html, args.tasks, args.steps))
        control("--dump", pid)  # written beside ``out``, as out.1
        control("-i", "off", pid)
    finally:
        service.stop()
    dumps = sorted(out.parent.glob(out.name + ".*"))
    if not dumps:
        raise SystemExit(f"callgrind wrote no dump for the round ({out})")
    return summary(dumps[0]) / (args.tasks * args.steps) / 1e6


def control(*arguments: str) -> None:
    subprocess.run(["callgrind_control", *arguments], check=True, capture_output=True, timeout=600)


def summary(dump: Path) -> int:
    """The instructions a callgrind dump counted (its ``summary:`` or ``totals:`` line)."""
    with dump.open(errors="replace") as lines:
        for line in lines:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise SystemExit(f"no summary line in {dump}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-repo", type=Path, help="another checkout with its own .venv")
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per model call")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of each checkout (median)")
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "VERILOOP_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/veriloop_test"
        ),
    )
    args = parser.parse_args()
    checkouts = [None] + ([args.baseline_repo.resolve()] if args.baseline_repo else [])
    name, html = mid_size_page()
    print(
        f"page: {name}; {args.tasks} tasks x {args.steps} steps, model {args.latency:g} s a call; "
        f"{args.repeat} round(s) of each checkout, interleaved"
    )
    model = ScriptedModelServer().start()
    model.on(ANY_PURPOSE, lambda request: Delay(args.latency, answer(request)))
    counts: dict[tuple[str, str], list[float]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for run in range(args.repeat):
                order = checkouts[run % len(checkouts) :] + checkouts[: run % len(checkouts)]
                for checkout in order:
                    label = "this" if checkout is None else "baseline"
                    for database in args.databases.split(","):
                        out = Path(tmp) / f"{label}.{database}.{run}.out"
                        with database_url(database, args.postgres_url) as url:
                            millions = count(checkout, url, model, html, args, out)
                        counts.setdefault((label, database), []).append(millions)
                        print(
                            f"{label} {database} round {run}: {millions:.1f} M instructions a step"
                        )
    finally:
        model.stop()
    print(
        "RESULT "
        + " ".join(
            f"{'' if label == 'this' else 'baseline_'}minstr_per_step_{database}="
            f"{statistics.median(values):.2f}"
            for (label, database), values in counts.items()
        )
    )


if __name__ == "__main__":
    main()
