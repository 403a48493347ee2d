"""What the HTTP service costs per step on top of the bare graph, measured side by side in one run.

(a) bare ``graph.invoke`` with InMemorySaver, doing the service's work (durability
"exit": one checkpoint per run; the answer from the run's values; page work where
the service does it, ``VERILOOP_PAGE_PROCESSES``), (b) the service
on SQLite, (c) the service on PostgreSQL; each with 1 and 20 concurrent clients
(with one client the three take turns task by task). The model is the scripted
loopback server answering instantly; the page is the median-size page of the
shared HTML corpus (read at run time) with a counter button added, so every step
is a real verification plus a real next action.

    python -m benchmarks.service_overhead [--steps-per-task 10] [--tasks-1c 6] [--postgres-url URL]

Last line: ``RESULT p50_overhead_ms_sqlite=.. p50_overhead_ms_postgres=.. steps_per_s_sqlite_20c=.. steps_per_s_postgres_20c=..``
(overhead = service p50 minus bare p50, one client).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import psycopg
from langgraph.checkpoint.memory import InMemorySaver

from benchmarks.serving import START_TIMEOUT_S
from veriloop.context import Context
from veriloop.graph.builder import build_graph
from veriloop.graph.io import observation_to_input, state_to_response
from veriloop.llm.scripted import ANY_PURPOSE, ScriptedModelServer, ScriptedRequest
from veriloop.schemas.api import InteractRequest
from veriloop.schemas.outputs import (
    ActionChoice,
    PlannedStep,
    PlanOutput,
    RefinedStep,
    SemanticVerdict,
)
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR
from veriloop.server.settings import Settings

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("VERILOOP_CORPUS_HTML", REPO.parent / "shared" / "corpus" / "html"))
BUTTON = 1

# One step = (task id or None, step number) -> the answer's task id; timed by the caller.
Step = Callable[[str | None, int], str]


def mid_size_page() -> tuple[str, str]:
    """(name, html) of the median-size corpus page."""
    pages = sorted(CORPUS.glob("*.html"), key=lambda p: p.stat().st_size)
    if not pages:
        raise SystemExit(f"no corpus pages in {CORPUS} (set VERILOOP_CORPUS_HTML)")
    chosen = pages[len(pages) // 2]
    return chosen.name, chosen.read_text(errors="replace")


def with_counter(html: str, presses: int) -> str:
    """The page with a numbered button whose label counts the presses (a real skeleton change per step)."""
    button = f'<button {ELEMENT_ID_ATTR}="{BUTTON}">Next ({presses})</button>'
    at = html.lower().find("<body")
    at = html.find(">", at) + 1 if at >= 0 else 0
    return html[:at] + button + html[at:]


def answer(request: ScriptedRequest) -> object:
    """Instant answers for every purpose: press the button, never finished."""
    return {
        "planning": PlanOutput(steps=[PlannedStep(description="Press Next")] * 50),
        "refinement": RefinedStep(instruction="Click Next", target_element_id=BUTTON),
        "action": ActionChoice(thought="next", action=f"click({BUTTON})"),
        "verification": SemanticVerdict(
            action_succeeded=True, task_completed=False, confidence=0.9, reason="ok"
        ),
    }[request.purpose]


def observation(html: str, task_id: str | None, n: int) -> dict:
    body = {
        "url": f"http://bench.test/page?n={n}",
        "dom": with_counter(html, n),
        "clientObservations": {"didDomMutate": n > 0},
    }
    if task_id is None:
        body["query"] = "Press Next ten times"
    else:
        body["taskId"] = task_id
    return body


def bare_step(html: str) -> Step:
    graph = build_graph().compile(checkpointer=InMemorySaver())
    context = Context(page_processes=Settings.from_env().page_processes)

    def step(task_id: str | None, n: int) -> str:
        request = InteractRequest.model_validate(observation(html, task_id, n))
        tid = task_id or uuid.uuid4().hex
        # The service's own work: one checkpoint at the end of the run, the answer from its values.
        values = graph.invoke(
            observation_to_input(request, tid, new_task=task_id is None),
            {"configurable": {"thread_id": tid}},
            context=context,
            durability="exit",
        )
        return state_to_response(values).task_id

    return step


def http_step(html: str, base_url: str) -> Step:
    local = threading.local()

    def step(task_id: str | None, n: int) -> str:
        if not hasattr(local, "client"):
            local.client = httpx.Client(base_url=base_url, timeout=120)
        response = local.client.post("/api/agent/interact", json=observation(html, task_id, n))
        response.raise_for_status()
        return response.json()["taskId"]

    return step


def run(
    step: Step, clients: int, tasks_per_client: int, steps_per_task: int
) -> tuple[list[float], float]:
    """Per-step latencies (ms) and steps per second with ``clients`` concurrent clients."""

    def client(_: int) -> list[float]:
        latencies = []
        for _task in range(tasks_per_client):
            task_id = None
            for n in range(steps_per_task):
                start = time.perf_counter()
                task_id = step(task_id, n)
                latencies.append((time.perf_counter() - start) * 1000)
        return latencies

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        latencies = [ms for per_client in pool.map(client, range(clients)) for ms in per_client]
    return latencies, len(latencies) / (time.perf_counter() - start)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServiceProcess:
    """``veriloop.server.main.serve`` in a subprocess, pointed at the scripted model: this
    checkout's, or another's (``checkout``: a clone with its own ``.venv``, say today's main)."""

    def __init__(
        self,
        database_url: str,
        model_url: str,
        workers: int = 1,
        *,
        checkout: Path | None = None,
        env: dict[str, str] | None = None,
        prefix: Sequence[str] = (),
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        """``prefix``: a command the service runs under (say valgrind), ``start_timeout_s`` the
        time it may take to answer its health check."""
        self.port = free_port()
        env = {
            **os.environ,
            "OPENAI_BASE_URL": model_url,
            "OPENAI_API_KEY": "bench",
            "LANGSMITH_TRACING": "false",
            **(env or {}),
        }
        env.pop("VERILOOP_API_KEYS", None)
        code = f"from veriloop.server.main import serve; serve('127.0.0.1', {self.port}, {workers}, {database_url!r})"
        python = sys.executable if checkout is None else str(checkout / ".venv" / "bin" / "python")
        self.process = subprocess.Popen(
            [*prefix, python, "-c", code],
            cwd=checkout,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + start_timeout_s
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"the service on {database_url} exited at start-up")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise SystemExit("the service did not start")
            time.sleep(0.1)

    def cpu_split(self) -> tuple[float, float]:
        """CPU time (user and system) used so far by the serving processes (the workers too), and
        by the page processes beside them (multiprocessing's fork server and the pools it starts;
        uvicorn's workers are multiprocessing processes too, but spawned)."""
        process = psutil.Process(self.process.pid)
        serving = page = 0.0
        for p in [process, *process.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                used = p.cpu_times().user + p.cpu_times().system
                if "multiprocessing.forkserver" in " ".join(p.cmdline()):
                    page += used
                else:
                    serving += used
        return serving, page

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps-per-task", type=int, default=10)
    parser.add_argument("--tasks-1c", type=int, default=6, help="tasks run by the single client")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "VERILOOP_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/veriloop_test"
        ),
    )
    args = parser.parse_args()

    name, html = mid_size_page()
    print(
        f"page: {name} ({len(html.encode()) / 1024:.0f} kB); {os.cpu_count()} CPU(s); model: scripted, instant"
    )
    model = ScriptedModelServer().start()
    model.on(ANY_PURPOSE, answer)
    os.environ.update(OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="bench")
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    results: dict[tuple[str, int], tuple[float, float, float]] = {}
    try:
        with psycopg.connect(args.postgres_url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        with tempfile.TemporaryDirectory() as tmp:
            targets = {
                "bare": lambda: (bare_step(html), None),
                "sqlite": lambda: _service(html, f"sqlite:///{tmp}/bench.sqlite", model.base_url),
                "postgres": lambda: _service(
                    html, f"{args.postgres_url}?options=-csearch_path%3D{schema}", model.base_url
                ),
            }
            steps: dict[str, Step] = {}
            with contextlib.ExitStack() as services:
                for target, open_target in targets.items():
                    step, service = open_target()
                    if service is not None:
                        services.callback(service.stop)
                    run(step, 1, 1, 3)  # warm-up: imports, connections, first plan
                    steps[target] = step
                # One client: the targets take turns task by task, so a load change on the
                # (shared) machine hits all of them alike instead of whichever ran then.
                single: dict[str, tuple[list[float], float]] = {t: ([], 0.0) for t in steps}
                for task in range(args.tasks_1c):
                    order = list(steps)[task % len(steps) :] + list(steps)[: task % len(steps)]
                    for target in order:
                        latencies, rate = run(steps[target], 1, 1, args.steps_per_task)
                        done, seconds = single[target]
                        single[target] = (done + latencies, seconds + len(latencies) / rate)
                for target, (latencies, seconds) in single.items():
                    _record(results, target, 1, latencies, len(latencies) / seconds)
                for target, step in steps.items():
                    latencies, rate = run(step, args.clients, 1, args.steps_per_task)
                    _record(results, target, args.clients, latencies, rate)
    finally:
        model.stop()
        with psycopg.connect(args.postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    bare = results["bare", 1][0]
    print(
        f"RESULT p50_overhead_ms_sqlite={results['sqlite', 1][0] - bare:.1f} "
        f"p50_overhead_ms_postgres={results['postgres', 1][0] - bare:.1f} "
        f"steps_per_s_sqlite_20c={results['sqlite', args.clients][2]:.1f} "
        f"steps_per_s_postgres_20c={results['postgres', args.clients][2]:.1f}"
    )


def _record(
    results: dict[tuple[str, int], tuple[float, float, float]],
    target: str,
    clients: int,
    latencies: list[float],
    rate: float,
) -> None:
    p50, p99 = statistics.median(latencies), _percentile(latencies, 99)
    results[target, clients] = (p50, p99, rate)
    print(
        f"{target:9s} {clients:2d} client(s): p50 {p50:7.1f} ms  p99 {p99:7.1f} ms  {rate:6.1f} steps/s  ({len(latencies)} steps)"
    )


def _service(html: str, database_url: str, model_url: str) -> tuple[Step, ServiceProcess]:
    service = ServiceProcess(database_url, model_url)
    return http_step(html, service.url), service


def _percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


if __name__ == "__main__":
    main()
