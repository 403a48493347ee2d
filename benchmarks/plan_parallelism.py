"""Parallel dependency levels vs running one step at a time, side by side in one run.

A plan of width 8 and depth 3 (24 steps; each step of a level depends on one step of the level
before) whose executors each wait 0.5 s, run through the real plan graph (checks, checkpointer,
events) with ``max_concurrency`` 1 and then 8. Two executor kinds: ``python`` steps that sleep,
and ``llm`` steps whose scripted model (a real OpenAI-compatible server on loopback, reached
through the real ``openai`` client) answers after 0.5 s with a ``mark_step`` tool call.

    python -m benchmarks.plan_parallelism [--repeats 3]

Last line: ``RESULT speedup=<sequential/parallel> width=8`` (the median over repeats of the llm
variant, the one whose waiting is a model call); the plot goes beside the JSON results
(``benchmarks/results/plan_parallelism.png``).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
from langgraph.checkpoint.memory import InMemorySaver
from matplotlib.figure import Figure

from benchmarks.plan_steps import WAIT_S, wait
from benchmarks.verification_pairs import RESULTS_DIR
from veriloop.context import PlanContext
from veriloop.llm import clear_llm_cache
from veriloop.llm.scripted import Delay, ScriptedModelServer, ToolCalls
from veriloop.plans import PlanRunner

WIDTH, DEPTH = 8, 3
DEFAULT_OUT = RESULTS_DIR / "plan_parallelism.json"


def manifest(executor: str) -> dict:
    steps = []
    for level in range(DEPTH):
        for lane in range(WIDTH):
            step = {"id": f"s{level}_{lane}", "input": f"level {level} lane {lane}"}
            if level:
                step["depends_on"] = [f"s{level - 1}_{lane}"]
            if executor == "python":
                step["function"] = "wait"
                step["writes"] = []  # it changes no file: its level runs side by side
            else:
                step["agent"] = "worker"
            steps.append(step)
    agents = {"worker": {"prompt": "Do the step.", "tools": []}}
    return {"goal": "parallelism benchmark", "agents": agents, "steps": steps}


def mark_done(request) -> Delay:
    return Delay(WAIT_S, ToolCalls([("mark_step", {"notes": "[SUCCESS]: done", "output": "ok"})]))


async def timed_run(executor: str, concurrency: int, workspace: str) -> float:
    runner = PlanRunner(
        checkpointer=InMemorySaver(),
        context=PlanContext(workspace=workspace, review_critical_steps=False),
        tools={"wait": wait},
    )
    started = time.perf_counter()
    report = await runner.arun(manifest(executor), concurrency=concurrency)
    elapsed = time.perf_counter() - started
    if report.status != "completed":
        raise SystemExit(f"{executor} run at concurrency {concurrency} ended {report.status}")
    return elapsed


def main(
    repeats: Annotated[int, typer.Option(help="Runs of each configuration.")] = 3,
    out: Annotated[str, typer.Option(help="Where to write the JSON results.")] = str(DEFAULT_OUT),
) -> None:
    results: dict[str, dict[str, list[float]]] = {}
    with ScriptedModelServer() as server, tempfile.TemporaryDirectory() as workspace:
        server.on("execution", mark_done)
        os.environ["OPENAI_BASE_URL"] = server.base_url
        os.environ.setdefault("OPENAI_API_KEY", "benchmark")
        clear_llm_cache()
        for executor in ("python", "llm"):
            runs = results.setdefault(executor, {"sequential": [], "parallel": []})
            for _ in range(repeats):
                # Side by side in each repeat, so drift on the machine hits both.
                runs["sequential"].append(asyncio.run(timed_run(executor, 1, workspace)))
                runs["parallel"].append(asyncio.run(timed_run(executor, WIDTH, workspace)))
            seq, par = statistics.median(runs["sequential"]), statistics.median(runs["parallel"])
            ideal = WIDTH * DEPTH * WAIT_S
            print(
                f"{executor:>6}: sequential {seq:6.2f} s (ideal {ideal:.1f}), parallel {par:5.2f} s "
                f"(ideal {DEPTH * WAIT_S:.1f}), speedup {seq / par:.2f}"
            )
    DEFAULT_OUT.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=1)
    print(f"plot: {plot(results, Path(out).with_suffix('.png'))}")
    llm = results["llm"]
    speedup = statistics.median(llm["sequential"]) / statistics.median(llm["parallel"])
    print(f"RESULT speedup={speedup:.2f} width={WIDTH}")


def plot(results: dict[str, dict[str, list[float]]], path: Path) -> Path:
    """Median wall time per executor kind, sequential beside parallel, with the ideal times."""
    figure = Figure(figsize=(6, 3.2))
    axes = figure.subplots()
    kinds = list(results)
    for offset, mode in ((-0.2, "sequential"), (0.2, "parallel")):
        medians = [statistics.median(results[kind][mode]) for kind in kinds]
        bars = axes.bar([i + offset for i in range(len(kinds))], medians, 0.38, label=mode)
        axes.bar_label(bars, fmt="%.2f s")
    for ideal in (WIDTH * DEPTH * WAIT_S, DEPTH * WAIT_S):
        axes.axhline(ideal, color="grey", linewidth=0.8, linestyle=":")
    axes.set_xticks(range(len(kinds)), [f"{kind} steps" for kind in kinds])
    axes.set_ylabel("seconds (median)")
    axes.margins(y=0.12)
    axes.set_title(f"{WIDTH} x {DEPTH} plan, {WAIT_S} s per step: concurrency 1 vs {WIDTH}")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return path


if __name__ == "__main__":
    typer.run(main)
