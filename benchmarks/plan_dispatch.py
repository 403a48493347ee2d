"""How busy a plan's ``concurrency`` slots stay when its steps take uneven times: the plan graph's
batch dispatch, before and after ready-set batches, against the ideal, side by side in one run.

Plans of python steps that sleep for seeded, uneven durations run through the real plan graph
(checks, events, SQLite checkpointer) at concurrency 4 and 8. Shapes:

- ``slow_chain``: one chain of 4 slow steps (0.8-1.2 s) beside 6 deeper chains of 12 fast ones
  (0.05-0.15 s);
- ``straggler``: 8 lanes of 4 steps (each step needs the lane's previous one), every level has one
  straggler (0.8-1.2 s, on a different lane each level) among fast steps (0.05-0.15 s);
- ``wide``: 40 independent fast steps, each with one fast dependent: wider than a batch (4 steps a
  slot), so the level is split;
- ``mesh``: 4 levels of 8 steps, each step needing two of the level before (joins: no chains),
  one straggler a level.

Three dispatch rules are measured, each on every shape and concurrency in turn:

- ``levels``: a batch holds ready steps of the lowest unfinished level only (the first rule);
- ``ready``: a batch holds every step whose dependencies finished, lowest levels first;
- ``lanes`` (now): ``ready``, each step sent with its lane, the chain after it that needs only
  the step before (``PlanContext.lane_steps``): a lane's next step starts once the one before it
  completed, not when the batch ended.

All are batches: a LangGraph superstep ends when its slowest lane does. What dispatching each
step as soon as a slot frees would give (``capacity``) is computed, not measured: greedy list
scheduling of the same durations with no framework time, the best any dispatcher could do with
these priorities. ``ideal`` is the lower bound max(critical path, work / slots); utilisation is
work / (slots x wall). Each rule's batches are also simulated with no framework time, so the
table separates what the barrier costs from what the framework costs (its CPU a step is printed:
on a busy machine it, not the barrier, can be most of the wall time).

    python -m benchmarks.plan_dispatch [--repeats 2] [--seed 7]
    python -m benchmarks.plan_dispatch --quick  # tests: sleeps a fifth, concurrency 4, 32-step shapes

Last line: ``RESULT levels_over_ideal=L ready_over_ideal=R lanes_over_ideal=N
capacity_over_ideal=C speedup=S lanes_utilisation=U``: geometric means over shapes and
concurrencies of the median wall time over the ideal (capacity: simulated), S of ready's wall
over lanes', U of lanes' utilisation. JSON
results and a plot go to ``--out`` (``benchmarks/results/plan_dispatch.json`` / ``.png``).
"""

from __future__ import annotations

import asyncio
import heapq
import json
import math
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from unittest import mock

import typer
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from matplotlib.figure import Figure

from benchmarks.plan_steps import nap
from benchmarks.verification_pairs import RESULTS_DIR
from veriloop.context import PlanContext
from veriloop.engines.plan.manifest import dependency_levels, dependents_of, load_manifest
from veriloop.engines.plan.policy import Batch, lanes, next_batch, window
from veriloop.nodes.plan.dispatch import BATCH_PER_SLOT
from veriloop.nodes.plan.lane import OpenBatch
from veriloop.plans import PlanRunner
from veriloop.schemas.manifest import Manifest

DEFAULT_OUT = RESULTS_DIR / "plan_dispatch.json"
FAST, SLOW = (0.05, 0.15), (0.8, 1.2)
RULES = ("levels", "ready", "lanes")
LANE_STEPS = {"levels": 1, "ready": 1, "lanes": PlanContext().lane_steps}
"""Each rule's ``PlanContext.lane_steps``: a lane of one step is a batch's step alone."""


def step(step_id: str, seconds: float, *depends_on: str) -> dict[str, Any]:
    return {
        "id": step_id,
        "function": "nap",
        "input": {"s": round(seconds, 3)},
        "depends_on": list(depends_on),
        "writes": [],  # it changes no file: the lanes run side by side
    }


def chains(lanes: Sequence[Sequence[float]]) -> list[dict[str, Any]]:
    """One chain of steps per lane, ``c<lane>_<i>``."""
    return [
        step(f"c{lane}_{i}", seconds, *([f"c{lane}_{i - 1}"] if i else []))
        for lane, durations in enumerate(lanes)
        for i, seconds in enumerate(durations)
    ]


QUICK_SHAPES = ("straggler", "mesh")
"""The shapes ``--quick`` runs: 32 steps each, against 76 and 80 for the other two."""


def shapes(rng: random.Random, scale: float) -> dict[str, list[dict[str, Any]]]:
    """The benchmark's plans, durations drawn from ``rng`` and multiplied by ``scale``."""

    def fast() -> float:
        return scale * rng.uniform(*FAST)

    def slow() -> float:
        return scale * rng.uniform(*SLOW)

    slow_chain = chains(
        [[slow() for _ in range(4)], *([fast() for _ in range(12)] for _ in range(6))]
    )
    straggler = chains(
        [[slow() if level == lane else fast() for level in range(4)] for lane in range(8)]
    )
    wide = [step(f"p{i}", fast()) for i in range(40)] + [
        step(f"d{i}", fast(), f"p{i}") for i in range(40)
    ]
    mesh = [
        step(
            f"m{level}_{i}",
            slow() if i == level else fast(),
            *([f"m{level - 1}_{i}", f"m{level - 1}_{(i + 1) % 8}"] if level else []),
        )
        for level in range(4)
        for i in range(8)
    ]
    return {"slow_chain": slow_chain, "straggler": straggler, "wide": wide, "mesh": mesh}


def levels_rule(
    manifest: Manifest,
    results: Mapping[str, Mapping[str, Any]],
    levels: Sequence[Sequence[str]] | None = None,
    limit: int | None = None,
) -> Batch:
    """The dispatch rule before ready-set batches: the ready steps of the lowest level only."""
    batch = next_batch(manifest, results, levels)
    ready = set(batch.ready)
    for level in levels if levels is not None else dependency_levels(manifest):
        lowest = [step_id for step_id in level if step_id in ready]
        if lowest:
            return Batch(ready=lowest[:limit], blocked=batch.blocked)
    return batch


RULE_FUNCTIONS: dict[str, Callable[..., Batch]] = {
    "levels": levels_rule,
    "ready": next_batch,
    "lanes": next_batch,
}


# -- the schedules, with no framework time ----------------------------------------------------


def list_makespan(
    order: Sequence[str],
    seconds: Mapping[str, float],
    deps: Mapping[str, Sequence[str]],
    slots: int,
) -> float:
    """Greedy list scheduling: whenever a slot is free, the first step of ``order`` whose
    dependencies have finished starts on it. Every step in ``order`` runs; its dependencies
    outside ``order`` count as finished at 0."""
    finish: dict[str, float] = {}
    pending = list(order)
    running: list[tuple[float, str]] = []
    now = 0.0
    while pending or running:
        ready = [s for s in pending if all(d in finish or d not in order for d in deps[s])]
        while ready and len(running) < slots:
            started = ready.pop(0)
            pending.remove(started)
            heapq.heappush(running, (now + seconds[started], started))
        now, done = heapq.heappop(running)
        finish[done] = now
    return now


def batch_makespan(
    manifest: Manifest, seconds: Mapping[str, float], slots: int, rule: str
) -> float:
    """``rule``'s batches one after the other with no framework time, as the plan graph runs them:
    at most ``slots`` lanes at a time in batch order (LangGraph's runner), each lane running its
    steps one after the other and then taking window steps whose dependencies completed, each
    batch ending with its last lane."""
    levels, dependents = dependency_levels(manifest), dependents_of(manifest)
    results: dict[str, dict[str, str]] = {}
    total = 0.0
    while ready := RULE_FUNCTIONS[rule](manifest, results, levels, slots * BATCH_PER_SLOT).ready:
        sent = lanes(manifest, ready, results, dependents, LANE_STEPS[rule])
        in_lanes = {s for lane in sent for s in lane}
        extra = (
            window(manifest, results, levels, in_lanes, slots * BATCH_PER_SLOT)
            if LANE_STEPS[rule] > 1
            else []
        )
        wall, ran = _one_batch(manifest, seconds, slots, sent, extra, LANE_STEPS[rule])
        total += wall
        results.update({s: {"status": "completed"} for s in ran})
    return total


def _one_batch(
    manifest: Manifest,
    seconds: Mapping[str, float],
    slots: int,
    sent: Sequence[Sequence[str]],
    extra: Sequence[str],
    lane_steps: int,
) -> tuple[float, set[str]]:
    """When the batch's last lane ends (nodes/plan/lane.next_step's choices, no framework time),
    and the steps it ran (window steps no lane took are the next batch's)."""
    window = OpenBatch({s: {"id": s, "depends_on": manifest.step(s).depends_on} for s in extra})
    queue = [list(lane) for lane in sent]  # lanes waiting for a slot, in batch order
    done: set[str] = set()
    running: list[tuple[float, int, str, list[str], int]] = []  # end, lane no, step, rest, ran
    now, number = 0.0, 0
    while queue or running:
        while queue and len(running) < slots:
            head, *rest = queue.pop(0)
            heapq.heappush(running, (now + seconds[head], number, head, rest, 1))
            number += 1
        now, lane, step_id, rest, ran = heapq.heappop(running)
        done.add(step_id)
        window.completed[step_id] = None
        following = None
        if ran < lane_steps:
            following = rest.pop(0) if rest else (window.take(step_id) or {}).get("id")
        if following is not None:
            heapq.heappush(running, (now + seconds[following], lane, following, rest, ran + 1))
    return now, done


@dataclass
class Plan:
    """A shape's steps, read the way the run reads them."""

    steps: list[dict[str, Any]]

    @property
    def seconds(self) -> dict[str, float]:
        return {s["id"]: s["input"]["s"] for s in self.steps}

    @property
    def deps(self) -> dict[str, list[str]]:
        return {s["id"]: s["depends_on"] for s in self.steps}

    @property
    def work(self) -> float:
        return sum(self.seconds.values())

    def critical_path(self) -> float:
        longest: dict[str, float] = {}
        for s in self.steps:  # every shape lists a step after its dependencies
            longest[s["id"]] = s["input"]["s"] + max(
                (longest[d] for d in s["depends_on"]), default=0.0
            )
        return max(longest.values())

    def ideal(self, slots: int) -> float:
        return max(self.critical_path(), self.work / slots)

    def manifest(self) -> Manifest:
        return load_manifest({"goal": "dispatch benchmark", "steps": self.steps}, tools={"nap"})

    def capacity(self, slots: int) -> float:
        order = [s for level in dependency_levels(self.manifest()) for s in level]
        return list_makespan(order, self.seconds, self.deps, slots)


# -- measuring --------------------------------------------------------------------------------


async def timed_run(
    plan: Plan, rule: str, slots: int, db: Path, workspace: str
) -> tuple[float, float]:
    """The run's wall time and the CPU time this process spent on it (the framework's: the
    steps only sleep)."""
    async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
        runner = PlanRunner(
            checkpointer=saver,
            context=PlanContext(
                workspace=workspace, review_critical_steps=False, lane_steps=LANE_STEPS[rule]
            ),
            tools={"nap": nap},
        )
        with mock.patch("veriloop.nodes.plan.dispatch.next_batch", RULE_FUNCTIONS[rule]):
            started, cpu = time.perf_counter(), time.process_time()
            report = await runner.arun(
                manifest={"goal": "dispatch benchmark", "steps": plan.steps}, concurrency=slots
            )
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    if report.status != "completed":
        raise SystemExit(f"{rule} at concurrency {slots} ended {report.status}")
    return wall, cpu


def geomean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def main(
    repeats: Annotated[int, typer.Option(help="Runs of each rule on each shape.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the step durations.")] = 7,
    quick: Annotated[
        bool,
        typer.Option(help="Sleeps a fifth as long, concurrency 4 only, the 32-step shapes only."),
    ] = False,
    out: Annotated[str, typer.Option(help="Where to write the JSON results.")] = str(DEFAULT_OUT),
) -> None:
    plans = {
        name: Plan(steps)
        for name, steps in shapes(random.Random(seed), 0.2 if quick else 1).items()
        if not quick or name in QUICK_SHAPES
    }
    concurrencies = (4,) if quick else (4, 8)
    rows = []
    # The databases stay out of the workspace: every step snapshots the workspace first.
    with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory() as workspace:
        for name, plan in plans.items():
            manifest = plan.manifest()
            for slots in concurrencies:
                walls: dict[str, list[float]] = {rule: [] for rule in RULES}
                cpus: list[float] = []
                for repeat in range(repeats):
                    for rule in RULES:  # side by side in each repeat: drift hits both
                        db = Path(scratch) / f"{name}-{slots}-{rule}-{repeat}.sqlite"
                        wall, cpu = asyncio.run(timed_run(plan, rule, slots, db, workspace))
                        walls[rule].append(wall)
                        cpus.append(cpu)
                row = {
                    "shape": name,
                    "slots": slots,
                    "steps": len(plan.steps),
                    "work_s": plan.work,
                    "ideal_s": plan.ideal(slots),
                    "capacity_s": plan.capacity(slots),
                    "cpu_ms_per_step": 1000 * statistics.median(cpus) / len(plan.steps),
                    **{f"{rule}_s": statistics.median(walls[rule]) for rule in RULES},
                    **{f"{rule}_runs_s": walls[rule] for rule in RULES},
                    **{
                        f"{rule}_batches_s": batch_makespan(manifest, plan.seconds, slots, rule)
                        for rule in RULES
                    },
                }
                rows.append(row)
                print(describe(row), flush=True)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(f"plot: {plot(rows, path.with_suffix('.png'))}")

    def over_ideal(key: str) -> float:
        return geomean([row[key] / row["ideal_s"] for row in rows])

    speedup = geomean([row["ready_s"] / row["lanes_s"] for row in rows])
    utilisation = geomean([row["work_s"] / (row["slots"] * row["lanes_s"]) for row in rows])
    print(
        f"RESULT levels_over_ideal={over_ideal('levels_s'):.2f} "
        f"ready_over_ideal={over_ideal('ready_s'):.2f} "
        f"lanes_over_ideal={over_ideal('lanes_s'):.2f} "
        f"capacity_over_ideal={over_ideal('capacity_s'):.2f} speedup={speedup:.2f} "
        f"lanes_utilisation={utilisation:.2f}"
    )


def describe(row: dict[str, Any]) -> str:
    """One line per shape and concurrency: each rule's wall (and its batches with no framework
    time), over the ideal, and the slots' utilisation."""
    slots, work, ideal = row["slots"], row["work_s"], row["ideal_s"]
    parts = [f"{row['shape']:>10} x{slots}: ideal {ideal:5.2f} s"]
    for rule in RULES:
        wall = row[f"{rule}_s"]
        parts.append(
            f"{rule} {wall:5.2f} s ({wall / ideal:4.2f}x, no framework time {row[f'{rule}_batches_s']:5.2f} s, "
            f"utilisation {work / (slots * wall):4.0%})"
        )
    capacity = row["capacity_s"]
    parts.append(f"capacity (simulated) {capacity:5.2f} s ({capacity / ideal:4.2f}x)")
    parts.append(f"framework CPU {row['cpu_ms_per_step']:.0f} ms a step")
    return "; ".join(parts)


def plot(rows: list[dict[str, Any]], path: Path) -> Path:
    """Wall time over the ideal per shape and concurrency: each rule, capacity (simulated)."""
    figure = Figure(figsize=(9.5, 3.6))
    axes = figure.subplots()
    labels = [f"{row['shape']}\nx{row['slots']}" for row in rows]
    series = [*((rule, f"{rule}_s") for rule in RULES), ("capacity (simulated)", "capacity_s")]
    width = 0.8 / len(series)
    for i, (label, key) in enumerate(series):
        offsets = [j + (i - (len(series) - 1) / 2) * width for j in range(len(rows))]
        axes.bar(offsets, [row[key] / row["ideal_s"] for row in rows], width, label=label)
    axes.axhline(1, color="grey", linewidth=0.8, linestyle=":")
    axes.set_xticks(range(len(rows)), labels)
    axes.set_ylabel("wall time / ideal")
    axes.set_title("Uneven steps: dispatch rules against the ideal (median of repeats)")
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return path


if __name__ == "__main__":
    typer.run(main)
