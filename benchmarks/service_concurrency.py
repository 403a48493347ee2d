"""How many tasks a service keeps in flight when the model, not the service, is the wait.

``veriloop serve`` (uvicorn on loopback) on SQLite, then on PostgreSQL; the model
is the scripted loopback server answering every call after ``--latency`` seconds
(default 1 s). 100, then 200, tasks of ``--steps`` steps each run at once over
HTTP (one async client, one connection per task); the model server counts the
calls it is answering at the same time. The page is the median-size page of the
shared HTML corpus with a counter button, so every step is a real verification
plus a real next action, and a line naming the task's tab, so no two tasks send
the same page.

The time the model alone needs is the model waits of one task: the longest
chain of its calls that ran one after another (calls made side by side, like a
verdict and the lookahead beside it, count once), measured on one task run
alone, times the latency. A service that holds every task in flight finishes
in about that time; one that queues tasks (behind a thread pool, or for the
CPU) takes a multiple of it.

Modes are measured side by side, ``--repeat`` runs each (default 3), interleaved
and each run starting with another mode, every round on a new database:
``--workers 2,1`` serves this checkout with two serving processes, then with one
(``N:P``: and ``P`` page processes beside each); ``--baseline-repo PATH`` adds
another checkout (a clone of main with its own ``.venv``: ``git clone`` it, then
``scripts/setup.sh`` there) served by one process. The medians of each mode
follow the rounds.

    python -m benchmarks.service_concurrency [--latency 1.0] [--steps 5] [--quick] [--workers 2,1]
        [--baseline-repo PATH] [--repeat 3] [--tasks 100,200] [--databases sqlite,postgres]
        [--postgres-url URL] [--plot PATH]

Every quarter second of a round it also reads the service's CPU and the model's calls in flight:
each round's line says for how long the serving processes used most of a core each (they are the
bottleneck then, not the model), and ``--plot`` draws those timelines.

Last line: ``RESULT peak_inflight_ratio_100=<peak/100> wall_over_model_bound_100=<..>
wall_over_model_bound_200=<..> service_cpu_ms_per_step_100=<..> serving_cpu_ms_per_step_100=<..>``
for the first mode of ``--workers`` (medians of the runs, the worse of SQLite and PostgreSQL for
each figure; the service's CPU a step is its serving and page processes together, the serving
CPU the serving processes' part of it), then the same figures of the baseline checkout prefixed
``baseline_``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import re
import ssl
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import psycopg
from matplotlib.figure import Figure

from benchmarks.page_handover import yardstick_ms
from benchmarks.service_overhead import ServiceProcess, answer, mid_size_page, observation
from veriloop.llm.scripted import (
    ANY_PURPOSE,
    Delay,
    ScriptedModelServer,
    Span,
    critical_path_calls,
)

DEFAULT_WORKERS = "2,1"
"""The modes measured without ``--workers``: two serving processes (docs/service.md's way to serve
a 2-core machine), then one."""
SAMPLE_EVERY_S = 0.25
SATURATED = 0.8
"""A serving process using this much of a core is the bottleneck: its steps queue for the CPU."""


@dataclass(frozen=True)
class Sample:
    """One quarter second of a round: the cores the service used and the model's calls in flight."""

    at_s: float
    serving: float
    """Cores the serving process(es) used over the interval."""
    page: float
    """Cores its page processes used."""
    in_flight: int


@dataclass(frozen=True)
class StepTime:
    """One step of one task, as its client saw it (monotonic seconds, as the model server's spans)."""

    tab: int
    step: int
    sent: float
    replied: float


@dataclass(frozen=True)
class StepWaits:
    """Medians over a round's first steps, or over the steps after them: where a step's time went,
    seen from outside."""

    latency_s: float
    model_s: float
    """The model's own time within the step (side-by-side calls count once)."""
    before_model_s: float
    """From the request to the step's first model call: the service's work and its queue."""
    after_model_s: float
    """From the step's last model answer to the reply."""
    slowest_s: float
    """The longest of these steps."""

    def line(self, which: str) -> str:
        return (
            f"{which} (median): {self.latency_s:.2f} s, model {self.model_s:.2f} s, request to "
            f"first model call {self.before_model_s:.2f} s, last answer to reply "
            f"{self.after_model_s:.2f} s; slowest {self.slowest_s:.2f} s"
        )


_TAB = re.compile(r"\(tab (\d+)\)")


def step_waits(step_times: list[StepTime], spans: list[Span], *, first: bool) -> StepWaits:
    """Each first (or later) step's model spans, matched by the task's tab in the prompt and by
    time, in medians."""
    by_tab: dict[int, list[Span]] = {}
    for span in spans:
        if found := _TAB.search(span.request.text):
            by_tab.setdefault(int(found[1]), []).append(span)
    rows = []
    for step in step_times:
        inside = sorted(
            (span.start, span.end)
            for span in by_tab.get(step.tab, [])
            if step.sent <= span.start and span.end <= step.replied
        )
        if (step.step == 0) != first or not inside:
            continue
        model, (start, end) = 0.0, inside[0]
        for a, b in inside[1:]:
            if a > end:
                model, start = model + end - start, a
            end = max(end, b)
        model += end - start
        last = max(b for _, b in inside)
        rows.append(
            (step.replied - step.sent, model, inside[0][0] - step.sent, step.replied - last)
        )
    if not rows:  # one-step tasks have no later steps
        return StepWaits(math.nan, math.nan, math.nan, math.nan, math.nan)
    medians = (statistics.median(column) for column in zip(*rows, strict=True))
    return StepWaits(*medians, max(row[0] for row in rows))


@dataclass(frozen=True)
class Round:
    """One burst of concurrent tasks against one service."""

    database: str
    tasks: int
    wall_s: float
    model_calls: int
    peak_in_flight: int
    latency_s: float
    critical_path_calls: int
    """Model waits of one task run alone (side-by-side calls count once)."""
    cpu_s: float
    """CPU time the service's processes used in the round (its page processes too)."""
    page_cpu_s: float
    """The part of ``cpu_s`` its page processes used."""
    steps: int
    """Steps of every task."""
    generator_cpu_s: float
    """CPU time this process (the clients and the scripted model) used in the round: the share
    of the machine the service did not have."""
    timeline: tuple[Sample, ...]
    """The round, a ``Sample`` every ``SAMPLE_EVERY_S``."""
    first_steps: StepWaits
    """Where the tasks' first steps spent their time."""
    later_steps: StepWaits
    """Where the steps after the first spent their time."""
    workers: int
    """Serving processes of the service."""

    @property
    def saturated_s(self) -> float:
        """How long the serving process used most of a core (``SATURATED``)."""
        return SAMPLE_EVERY_S * sum(
            sample.serving >= SATURATED * self.workers for sample in self.timeline
        )

    @property
    def model_bound_s(self) -> float:
        """The model's own time for one task: its waits one after another."""
        return self.critical_path_calls * self.latency_s

    @property
    def wall_over_model_bound(self) -> float:
        return self.wall_s / self.model_bound_s

    @property
    def cpu_ms_per_step(self) -> float:
        """The service's CPU a step: its serving and page processes together."""
        return self.cpu_s * 1000 / (self.tasks * self.steps)

    @property
    def serving_cpu_ms_per_step(self) -> float:
        """The serving processes' part of :attr:`cpu_ms_per_step`."""
        return (self.cpu_s - self.page_cpu_s) * 1000 / (self.tasks * self.steps)

    def line(self) -> str:
        return (
            f"{self.database:11s} {self.tasks:3d} tasks: wall {self.wall_s:6.2f} s, model bound "
            f"{self.model_bound_s:5.2f} s ({self.model_calls / self.tasks:.1f} calls/task, "
            f"{self.critical_path_calls} waits) -> "
            f"x{self.wall_over_model_bound:.2f}; peak in flight {self.peak_in_flight} "
            f"({self.peak_in_flight / self.tasks:.2f} per task); service CPU "
            f"{self.cpu_ms_per_step:.0f} ms per step (page processes "
            f"{self.page_cpu_s * 1000 / (self.tasks * self.steps):.0f}), busy "
            f"{self.cpu_s / self.wall_s:.0%} of the wall time; load generator busy "
            f"{self.generator_cpu_s / self.wall_s:.0%}; serving process at >= {SATURATED:.0%} of a "
            f"core for {self.saturated_s:.1f} s\n{'':12s} {self.first_steps.line('first steps')}"
            f"\n{'':12s} {self.later_steps.line('later steps')}"
        )


async def sample(
    service: ServiceProcess, model: ScriptedModelServer, timeline: list[Sample]
) -> None:
    """Append a ``Sample`` to ``timeline`` every ``SAMPLE_EVERY_S`` until cancelled."""
    started = last_at = time.perf_counter()
    last_serving, last_page = service.cpu_split()
    while True:
        await asyncio.sleep(SAMPLE_EVERY_S)
        at, (serving, page) = time.perf_counter(), service.cpu_split()
        interval = at - last_at
        timeline.append(
            Sample(
                at - started,
                (serving - last_serving) / interval,
                (page - last_page) / interval,
                model.in_flight,
            )
        )
        last_at, last_serving, last_page = at, serving, page


async def run_tasks(
    base_url: str,
    html: str,
    tasks: int,
    steps: int,
    watch=None,
    step_times: list[StepTime] | None = None,
) -> float:
    """Wall time of ``tasks`` concurrent tasks of ``steps`` steps each (``watch``: a coroutine run
    beside them; ``step_times``: filled with each step's request and reply times)."""
    # One client per task, as every tab is its own client. One httpx pool of hundreds of
    # connections scans them all on every request and response: at 200 tasks that took 59% of
    # this process's CPU, in bursts of a whole core that starved the scripted model beside it.
    tls = ssl.create_default_context()  # made once: each client would load the CA bundle again
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=base_url, timeout=600, verify=tls)
            )
            for _ in range(tasks)
        ]

        async def task(tab: int) -> None:
            # Each tab its own page, as real tabs are: no cache keyed by the page serves two tasks.
            page = html.replace("</body>", f"<p>Tab {tab}</p></body>", 1)
            task_id = None
            for n in range(steps):
                body = observation(page, task_id, n)
                if task_id is None:  # every prompt shows the goal: the model's spans name the task
                    body["query"] += f" (tab {tab})"
                sent = time.monotonic()
                reply = await clients[tab].post("/api/agent/interact", json=body)
                reply.raise_for_status()
                task_id = reply.json()["taskId"]
                if step_times is not None:
                    step_times.append(StepTime(tab, n, sent, time.monotonic()))

        watcher = asyncio.create_task(watch) if watch is not None else None
        started = time.perf_counter()
        await asyncio.gather(*(task(tab) for tab in range(tasks)))
        wall = time.perf_counter() - started
        if watcher is not None:
            watcher.cancel()
        return wall


def _own_cpu_seconds() -> float:
    times = psutil.Process().cpu_times()
    return times.user + times.system


@dataclass(frozen=True)
class Mode:
    """One way to serve, measured side by side with the others: worker processes, page processes
    per worker (None: the service's default), and the checkout that serves (None: this one)."""

    workers: int
    page_processes: int | None = None
    checkout: Path | None = None

    @classmethod
    def parse(cls, text: str) -> Mode:
        """``N`` (workers) or ``N:P`` (workers, page processes of each)."""
        workers, _, pages = text.partition(":")
        return cls(int(workers), int(pages) if pages else None)

    @property
    def label(self) -> str:
        name = "main" if self.checkout is not None else f"x{self.workers}"
        return name if self.page_processes is None else f"{name}:{self.page_processes}"


def measure(
    database: str,
    url: str,
    model: ScriptedModelServer,
    html: str,
    sizes: list[int],
    args,
    mode: Mode,
    waits: dict[str, int],
) -> list[Round]:
    """One round per size against a new service in ``mode`` on ``url`` (``waits``: the critical
    path of each mode, measured on its first call)."""
    # No step deadline: on a loaded machine a step of the 200-task round took over the default
    # 60 s, and its 503 ended the run; the rounds measure the wall time, whatever it is.
    env = {"VERILOOP_STEP_DEADLINE_S": "3600", "VERILOOP_LOCK_TIMEOUT_S": "3600"}
    if mode.page_processes is not None:
        env["VERILOOP_PAGE_PROCESSES"] = str(mode.page_processes)
    service = ServiceProcess(url, model.base_url, mode.workers, checkout=mode.checkout, env=env)
    rounds = []
    model.on(ANY_PURPOSE, lambda request: Delay(args.latency, answer(request)))
    try:
        asyncio.run(run_tasks(service.url, html, 2, 2))  # warm-up: imports, connections
        if mode.label not in waits:
            model.reset()
            model.on(ANY_PURPOSE, lambda request: Delay(args.latency, answer(request)))
            asyncio.run(run_tasks(service.url, html, 1, args.steps))
            waits[mode.label] = critical_path_calls(model.spans)
        for tasks in sizes:
            model.reset()
            model.on(ANY_PURPOSE, lambda request: Delay(args.latency, answer(request)))
            (serving, page), generator_cpu = service.cpu_split(), _own_cpu_seconds()
            timeline: list[Sample] = []
            step_times: list[StepTime] = []
            watch = sample(service, model, timeline)
            wall = asyncio.run(run_tasks(service.url, html, tasks, args.steps, watch, step_times))
            serving_after, page_after = service.cpu_split()
            result = Round(
                f"{database} {mode.label}",
                tasks,
                wall,
                model.calls(),
                model.peak_in_flight,
                args.latency,
                waits[mode.label],
                serving_after + page_after - serving - page,
                page_after - page,
                args.steps,
                _own_cpu_seconds() - generator_cpu,
                tuple(timeline),
                step_waits(step_times, model.spans, first=True),
                step_waits(step_times, model.spans, first=False),
                mode.workers,
            )
            print(result.line(), flush=True)
            rounds.append(result)
    finally:
        service.stop()
    return rounds


@contextlib.contextmanager
def database_url(database: str, postgres_url: str):
    """A new, empty database of the kind named: a SQLite file, or a PostgreSQL schema (dropped after)."""
    if database == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/bench.sqlite"
        return
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{postgres_url}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per model call")
    parser.add_argument("--steps", type=int, default=5, help="steps per task")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="20 and 40 tasks of 3 steps, 0.5 s model, SQLite only, one run",
    )
    parser.add_argument(
        "--databases", default="sqlite,postgres", help="comma-separated: sqlite, postgres"
    )
    parser.add_argument(
        "--workers",
        default=DEFAULT_WORKERS,
        help="comma-separated modes of this checkout, each N (serving processes) or N:P (and P "
        "page processes beside each); the first is the one RESULT reports",
    )
    parser.add_argument(
        "--baseline-repo",
        type=Path,
        help="another checkout with its own .venv (say a clone of main): served by one process "
        "beside the modes above, reported as baseline_* in RESULT",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of every mode (medians)")
    parser.add_argument(
        "--tasks",
        default="100,200",
        help="the two round sizes (fewer on a loaded machine: its share of the CPU is smaller)",
    )
    parser.add_argument("--plot", type=Path, help="draw each round's timeline into this PNG")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "VERILOOP_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/veriloop_test"
        ),
    )
    args = parser.parse_args()
    sizes = [int(tasks) for tasks in args.tasks.split(",")]
    if args.quick:
        sizes, args.steps, args.latency, args.databases, args.repeat = [20, 40], 3, 0.5, "sqlite", 1
    databases = args.databases.split(",")
    modes = [Mode.parse(text) for text in args.workers.split(",")]
    if args.baseline_repo is not None:
        modes.append(Mode(1, checkout=args.baseline_repo.resolve()))

    name, html = mid_size_page()
    print(
        f"page: {name} ({len(html.encode()) / 1024:.0f} kB); {os.cpu_count()} CPU(s); "
        f"model: scripted, {args.latency:g} s per call; {args.steps} steps per task; modes "
        f"{', '.join(m.label for m in modes)} (xN: N serving processes; :P page processes each; "
        f"main: --baseline-repo), {args.repeat} run(s) each, interleaved"
    )
    # The CPU figures below scale with the machine, and a shared machine's speed drifts (the same
    # work took 11-22 ms within minutes on one): print its speed before the rounds and after them.
    speed_before = yardstick_ms(html)
    model = ScriptedModelServer().start()
    rounds: list[Round] = []
    waits: dict[str, int] = {}
    try:
        for run in range(args.repeat):
            # Each run starts with another mode, so the machine's drift falls on each alike.
            for mode in modes[run % len(modes) :] + modes[: run % len(modes)]:
                for database in databases:
                    with database_url(database, args.postgres_url) as url:
                        rounds += measure(database, url, model, html, sizes, args, mode, waits)
    finally:
        model.stop()
    print(
        f"machine: one step's page work took {speed_before:.1f} ms before the rounds and "
        f"{yardstick_ms(html):.1f} ms after them (page_handover.yardstick_ms)"
    )
    if args.plot:
        print(f"plot: {plot(rounds, args.plot)}")
    small, large = sizes
    figures = {
        "peak_inflight_ratio": (small, lambda r: r.peak_in_flight / r.tasks, min),
        "wall_over_model_bound": (small, lambda r: r.wall_over_model_bound, max),
        "wall_over_model_bound_large": (large, lambda r: r.wall_over_model_bound, max),
        "service_cpu_ms_per_step": (small, lambda r: r.cpu_ms_per_step, max),
        "serving_cpu_ms_per_step": (small, lambda r: r.serving_cpu_ms_per_step, max),
    }

    def median_of(mode: Mode, database: str, tasks: int, figure) -> float:
        label = f"{database} {mode.label}"
        return statistics.median(
            figure(r) for r in rounds if r.database == label and r.tasks == tasks
        )

    print(f"medians of {args.repeat} run(s): wall over the model bound (peak in flight per task)")
    for mode in modes:
        for database in databases:
            cells = "  ".join(
                f"{tasks} tasks x{median_of(mode, database, tasks, lambda r: r.wall_over_model_bound):.2f} "
                f"({median_of(mode, database, tasks, lambda r: r.peak_in_flight / r.tasks):.2f})"
                for tasks in sizes
            )
            print(f"  {database:8s} {mode.label:8s} {cells}")

    def result(mode: Mode, prefix: str = "") -> str:
        # Each figure's median over the runs, then the worse of the databases.
        parts = []
        for key, (tasks, figure, worse) in figures.items():
            value = worse(median_of(mode, database, tasks, figure) for database in databases)
            name = key.removesuffix("_large")
            parts.append(f"{prefix}{name}_{tasks}={value:.2f}")
        return " ".join(parts)

    baseline = [m for m in modes if m.checkout is not None]
    print(f"RESULT {result(modes[0])}" + "".join(f" {result(m, 'baseline_')}" for m in baseline))


def plot(rounds: list[Round], path: Path) -> Path:
    """One panel per round: the cores the service used, and the model's calls in flight per task."""
    figure = Figure(figsize=(10, 2.2 * len(rounds)))
    for axes, result in zip(
        figure.subplots(len(rounds), 1, squeeze=False)[:, 0], rounds, strict=True
    ):
        at = [s.at_s for s in result.timeline]
        axes.plot(at, [s.serving for s in result.timeline], label="serving process (cores)")
        axes.plot(at, [s.page for s in result.timeline], label="page processes (cores)")
        axes.plot(
            at,
            [s.in_flight / result.tasks for s in result.timeline],
            label="model calls in flight per task",
            color="grey",
            linestyle=":",
        )
        axes.axvline(result.model_bound_s, color="black", linewidth=0.8, label="model bound")
        axes.set_title(
            f"{result.database}, {result.tasks} tasks: x{result.wall_over_model_bound:.2f}",
            fontsize=9,
        )
        axes.set_ylim(0, max(2.0, *(s.in_flight / result.tasks for s in result.timeline)))
    axes.set_xlabel("seconds into the round")
    axes.legend(fontsize=7, loc="upper right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path


if __name__ == "__main__":
    main()
