"""How a plan run's checkpoint bytes and time grow with its length: chains and fans of 100 and 1,000
trivial python steps, through the real plan graph, on SQLite and PostgreSQL, side by side in one run.

Each step returns a 200-byte result and has one predicate check. A chain runs one step after the
other (concurrency 8, as a user would leave it); a fan runs every step in one level (concurrency 32).
"Bytes" are what the run left in the saver's tables for its thread: checkpoints (and, on
PostgreSQL, their channel blobs) plus the pending writes.

    python -m benchmarks.plan_scaling [--sizes 100,1000] [--databases sqlite,postgres]
    python -m benchmarks.plan_scaling --quick            # 10 and 40 steps, SQLite only (tests)

PostgreSQL is read from ``--postgres-url`` or ``VERILOOP_TEST_POSTGRES_URL``.

Last line: ``RESULT bytes_ratio_1000_over_100=R ms_per_step_ratio_1000_over_100=T
ms_per_step_100=M fan_1000_status=S judge_tree_ratio_100=J``: R and T the largest ratio over
shapes and databases of the large size over the small one (bytes of the whole run; wall time per
step), M a 100-step chain's milliseconds per step on SQLite, S the large fan's status on every
database (``completed`` when every one completed), J what the judge's tree costs: the wall time
per step of a 100-step chain whose steps each have a command check, in a workspace of
:data:`PROJECT_FILES` Python files, with the check run in a judge's tree built for it, over the
same chain with the check run in the workspace itself (as before the judge had its own tree). Each small size runs before and after its large one (the mean counts), so
that a shared machine's drift over the long run does not land on one side of the ratio only. The plot of bytes and time against N goes to ``--plot``
(``benchmarks/results/plan_scaling.png`` by default).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from unittest.mock import patch

import typer
from langgraph.checkpoint.base import BaseCheckpointSaver
from matplotlib.figure import Figure

from benchmarks.plan_steps import RESULT_BYTES, work
from benchmarks.verification_pairs import RESULTS_DIR
from veriloop.context import PlanContext
from veriloop.engines.plan.judge import checks
from veriloop.engines.plan.judge.tree import JudgeTree, build_tree
from veriloop.plans import PlanRunner

Shape = Literal["chain", "fan"]
CONCURRENCY: dict[Shape, int] = {"chain": 8, "fan": 32}
PROJECT_FILES = 200
"""Python files in the workspace of the judge's-tree measurement."""
DEFAULT_PLOT = RESULTS_DIR / "plan_scaling.png"


def plan_manifest(shape: Shape, n: int) -> dict[str, Any]:
    """``n`` python steps, each checked by one predicate; a chain depends step by step."""
    steps = []
    for i in range(n):
        step: dict[str, Any] = {
            "id": f"s{i}",
            "function": "work",
            "input": f"step {i}",
            "checks": [f"len(result.text) == {RESULT_BYTES}"],
            "writes": [],  # it changes no file: a fan's steps run side by side
        }
        if shape == "chain" and i:
            step["depends_on"] = [f"s{i - 1}"]
            step["input"] = f"step {i} after {{{{s{i - 1}}}}}"
        steps.append(step)
    return {"goal": f"a {shape} of {n} steps", "steps": steps}


def judged_manifest(n: int) -> dict[str, Any]:
    """A chain of ``n`` python steps, each with a command check (run in the judge's tree)."""
    manifest = plan_manifest("chain", n)
    for step in manifest["steps"]:
        step["checks"].append({"kind": "command", "command": "test -f pkg/m0.py"})
    return manifest


@dataclass
class Run:
    """One measured run."""

    database: str
    shape: Shape
    n: int
    status: str
    wall_s: float
    cpu_s: float
    """CPU time of the whole process (the saver's thread included) during the run."""
    read_s: float
    """Reading the finished run's report back (the delta channels replayed)."""
    bytes: int

    @property
    def ms_per_step(self) -> float:
        return 1000 * self.wall_s / self.n


async def measure(
    saver: BaseCheckpointSaver,
    count_bytes,
    database: str,
    shape: Shape,
    n: int,
    workspace: str,
    manifest: dict[str, Any] | None = None,
) -> Run:
    runner = PlanRunner(
        checkpointer=saver,
        context=PlanContext(workspace=workspace, review_critical_steps=False),
        tools={"work": work},
    )
    run_id = f"{shape}-{n}-{time.time_ns()}"
    started, cpu = time.perf_counter(), time.process_time()
    report = await runner.arun(
        manifest=manifest or plan_manifest(shape, n),
        run_id=run_id,
        concurrency=CONCURRENCY[shape],
    )
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    for result in [r for r in report.steps.values() if r.status != "completed"][:3]:
        print(f"  {result.step_id} {result.status}: {result.diagnosis[:200]}", file=sys.stderr)
    read = time.perf_counter()
    if await runner.areport(run_id) != report:
        raise SystemExit(f"{shape} {n} on {database}: the report read back differs")
    read = time.perf_counter() - read
    return Run(database, shape, n, report.status, wall, cpu, read, await count_bytes(run_id))


async def sqlite_bytes(conn: Any, run_id: str) -> int:
    """What a run left in a SQLite saver's tables: its checkpoints and their pending writes."""
    total = 0
    for sql in (
        "SELECT sum(length(checkpoint) + length(metadata)) FROM checkpoints WHERE thread_id = ?",
        "SELECT sum(length(value)) FROM writes WHERE thread_id = ?",
    ):
        async with conn.execute(sql, (run_id,)) as cursor:
            total += (await cursor.fetchone())[0] or 0
    return total


async def sqlite_run(
    shape: Shape, n: int, workspace: str, manifest: dict[str, Any] | None = None
) -> Run:
    """One run on a fresh SQLite file."""
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    with tempfile.TemporaryDirectory() as folder:
        async with aiosqlite.connect(Path(folder) / "plans.sqlite") as conn:

            async def count_bytes(run_id: str) -> int:
                return await sqlite_bytes(conn, run_id)

            return await measure(
                AsyncSqliteSaver(conn), count_bytes, "sqlite", shape, n, workspace, manifest
            )


async def on_sqlite(sizes: list[int], shapes: list[Shape], workspace: str) -> list[Run]:
    runs = []
    for shape in shapes:
        for n in sandwich(sizes):
            runs.append(await sqlite_run(shape, n, workspace))
            print(_line(runs[-1]), flush=True)
    return runs


async def on_postgres(sizes: list[int], shapes: list[Shape], workspace: str, url: str) -> list[Run]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    runs = []
    async with AsyncPostgresSaver.from_conn_string(url) as saver:
        await saver.setup()

        async def count_bytes(run_id: str) -> int:
            total = 0
            async with saver.conn.cursor() as cursor:
                for sql in (
                    "SELECT sum(pg_column_size(checkpoint) + pg_column_size(metadata)) "
                    "FROM checkpoints WHERE thread_id = %s",
                    "SELECT sum(pg_column_size(blob)) FROM checkpoint_blobs WHERE thread_id = %s",
                    "SELECT sum(pg_column_size(blob)) FROM checkpoint_writes WHERE thread_id = %s",
                ):
                    await cursor.execute(sql, (run_id,))
                    row = await cursor.fetchone()
                    total += (row["sum"] if isinstance(row, dict) else row[0]) or 0
            await saver.adelete_thread(run_id)
            return total

        for shape in shapes:
            for n in sandwich(sizes):
                runs.append(await measure(saver, count_bytes, "postgres", shape, n, workspace))
                print(_line(runs[-1]), flush=True)
    return runs


def in_place(files: Any, *, workspace: Path, **_: Any) -> JudgeTree:
    """A stand-in for :func:`~veriloop.engines.plan.judge.tree.build_tree` that judges the
    workspace itself, as checks did before the judge had its own tree (the baseline of the
    measurement; never used by veriloop)."""
    base = Path(tempfile.mkdtemp(prefix="veriloop-in-place-"))
    for folder in ("home", "tmp", "pycache"):
        (base / folder).mkdir()
    (base / "pytest.ini").write_text("[pytest]\n")
    return JudgeTree(base, Path(workspace), base, base / "pytest.ini", dict(files), [])


async def judge_tree_cost(n: int) -> float:
    """Wall time per step of a chain of ``n`` steps with a command check: judged in a tree built
    for each check over judged in place (each arm run twice, interleaved, means compared)."""
    with tempfile.TemporaryDirectory() as workspace:
        for i in range(PROJECT_FILES):
            path = Path(workspace) / "pkg" / f"m{i}.py"
            path.parent.mkdir(exist_ok=True)
            path.write_text(f"VALUE = {i}\n" + "# padding\n" * 40)
        times: dict[bool, list[float]] = {True: [], False: []}
        for tree in (True, False, False, True):
            with patch.object(checks, "build_tree", build_tree if tree else in_place):
                run = await sqlite_run("chain", n, workspace, judged_manifest(n))
            if run.status != "completed":
                raise SystemExit(f"the judged chain did not complete: {run.status}")
            times[tree].append(run.ms_per_step)
            print(f"judged chain {n}, {'tree' if tree else 'in place'}: {_line(run)}", flush=True)
    return (sum(times[True]) / 2) / (sum(times[False]) / 2)


def _line(run: Run) -> str:
    return (
        f"{run.database:>8} {run.shape:>5} {run.n:>5}: {run.status:<9} {run.wall_s:7.2f} s "
        f"{run.ms_per_step:6.2f} ms/step ({1000 * run.cpu_s / run.n:5.2f} ms CPU) "
        f"{run.bytes / 1e6:9.2f} MB, read back in {run.read_s:5.2f} s"
    )


def sandwich(sizes: list[int]) -> list[int]:
    """The sizes up and back down (100, 1000, 100): the machine's drift over the long run hits
    the small size on both sides of it."""
    return [*sizes, *reversed(sizes[:-1])]


def mean_runs(runs: list[Run]) -> dict[tuple[str, str, int], Run]:
    """One run per database, shape and size: repeats averaged."""
    grouped: dict[tuple[str, str, int], list[Run]] = {}
    for run in runs:
        grouped.setdefault((run.database, run.shape, run.n), []).append(run)
    return {
        key: Run(
            *key,
            status=",".join(sorted({r.status for r in group})),
            **{
                name: sum(getattr(r, name) for r in group) / len(group)
                for name in ("wall_s", "cpu_s", "read_s", "bytes")
            },
        )
        for key, group in grouped.items()
    }


def summary(runs: list[Run], small: int, large: int, judge_ratio: float) -> str:
    """The RESULT line (see the module docstring)."""
    by = mean_runs(runs)
    pairs = [
        (by[(db, shape, small)], by[(db, shape, large)])
        for (db, shape, n) in by
        if n == small and (db, shape, large) in by
    ]
    bytes_ratio = max(b.bytes / a.bytes for a, b in pairs)
    time_ratio = max(b.ms_per_step / a.ms_per_step for a, b in pairs)
    cpu_ratio = max(b.cpu_s / b.n / (a.cpu_s / a.n) for a, b in pairs)
    print(f"largest CPU-a-step ratio {large}/{small}: {cpu_ratio:.2f}")
    chain_small = by[("sqlite", "chain", small)].ms_per_step
    fans = [r.status for r in runs if r.shape == "fan" and r.n == large]
    fan_status = "completed" if fans and all(s == "completed" for s in fans) else ",".join(fans)
    return (
        f"RESULT bytes_ratio_{large}_over_{small}={bytes_ratio:.2f} "
        f"ms_per_step_ratio_{large}_over_{small}={time_ratio:.2f} "
        f"ms_per_step_{small}={chain_small:.2f} fan_{large}_status={fan_status or 'not_run'} "
        f"judge_tree_ratio_{small}={judge_ratio:.2f}"
    )


def plot(runs: list[Run], path: Path) -> Path:
    """Bytes and milliseconds per step against N, one line per database and shape."""
    figure = Figure(figsize=(9, 3.6))
    bytes_axes, time_axes = figure.subplots(1, 2)
    averaged = list(mean_runs(runs).values())
    for key in sorted({(r.database, r.shape) for r in averaged}):
        line = sorted((r for r in averaged if (r.database, r.shape) == key), key=lambda r: r.n)
        label = f"{key[1]} ({key[0]})"
        bytes_axes.plot([r.n for r in line], [r.bytes / 1e6 for r in line], "o-", label=label)
        time_axes.plot([r.n for r in line], [r.ms_per_step for r in line], "o-", label=label)
    for axes, label in ((bytes_axes, "MB stored by the run"), (time_axes, "ms per step (wall)")):
        axes.set_xscale("log")
        axes.set_xlabel("steps in the plan (N)")
        axes.set_ylabel(label)
        axes.grid(True, alpha=0.3)
    bytes_axes.set_yscale("log")
    time_axes.set_ylim(bottom=0)
    bytes_axes.legend(fontsize=8)
    figure.suptitle("Plan runs: checkpoint bytes and time per step against the plan's length")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path


def main(
    sizes: Annotated[str, typer.Option(help="Plan lengths, comma-separated.")] = "100,1000",
    databases: Annotated[str, typer.Option(help="sqlite, postgres, or both.")] = "sqlite,postgres",
    shapes: Annotated[str, typer.Option(help="chain, fan, or both.")] = "chain,fan",
    quick: Annotated[bool, typer.Option(help="10 and 40 steps on SQLite (a smoke run).")] = False,
    postgres_url: Annotated[str, typer.Option(help="PostgreSQL URL.")] = "",
    plot_path: Annotated[str, typer.Option("--plot", help="Where the plot goes.")] = str(
        DEFAULT_PLOT
    ),
) -> None:
    lengths = [10, 40] if quick else [int(s) for s in sizes.split(",")]
    wanted = ["sqlite"] if quick else [d.strip() for d in databases.split(",")]
    kinds: list[Shape] = [s.strip() for s in shapes.split(",")]  # type: ignore[misc]
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as workspace:
        if "sqlite" in wanted:
            runs += asyncio.run(on_sqlite(lengths, kinds, workspace))
        if "postgres" in wanted:
            url = postgres_url or os.environ.get("VERILOOP_TEST_POSTGRES_URL", "")
            if not url:
                raise typer.BadParameter("no --postgres-url and no VERILOOP_TEST_POSTGRES_URL")
            runs += asyncio.run(on_postgres(lengths, kinds, workspace, url))
    path = plot(runs, Path(plot_path))
    path.with_suffix(".json").write_text(json.dumps([asdict(r) for r in runs], indent=1))
    print(f"plot: {path}")
    judge_ratio = asyncio.run(judge_tree_cost(min(lengths)))
    print(summary(runs, min(lengths), max(lengths), judge_ratio))


if __name__ == "__main__":
    typer.run(main)
