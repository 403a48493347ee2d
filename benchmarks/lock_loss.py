"""Lost locks under load: two service processes on one PostgreSQL, their backends terminated mid-run.

Two ``veriloop serve`` processes (``benchmarks.service_overhead.ServiceProcess``) share one fresh
schema; the scripted model answers every call after ``--latency`` seconds. ``--tasks`` tasks run
at once, ``--steps`` steps each; every step, the first (which starts the task) included, is sent
to both processes at the same moment with the identical body (same ``requestId``, the
``stepIndex`` it answers), and sent again after a 503 or a dropped connection. Meanwhile every
service connection (both processes' pools and lock sessions, found by their ``application_name``)
is terminated ``--terminations`` times with ``pg_terminate_backend``, the first time while the
tasks start: a lock dies while its step runs, and the resend on the other process takes the task.
Each round waits for steps holding locks (after a round the services reopen connections only as
resent requests need them, which can take longer than ``--every``), so every round ends lock
sessions; ``terminations`` counts the rounds, fewer than asked only when the tasks finish first.

Then it counts, from the service's own answers and tables:

- ``lost``: steps a client was answered for that the task's history lacks;
- ``duplicated``: history records beyond one per step index;
- ``siblings``: checkpoints sharing a parent in one thread and namespace;
- ``split_starts``: tasks whose start the two processes answered with different task ids (two
  tasks for one request);
- ``wrong_step_index``: 200 answers whose ``stepIndex`` is not the one the request expected
  (503s during the outage are expected and only counted).

    python -m benchmarks.lock_loss [--tasks 100] [--steps 5] [--latency 1.0] [--terminations 3] [--quick]

Last line: ``RESULT lost=.. duplicated=.. siblings=.. split_starts=.. wrong_step_index=.. tasks=..
terminations=..``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import httpx
import psycopg

from benchmarks.service_overhead import ServiceProcess, answer, observation
from veriloop.llm.scripted import ANY_PURPOSE, Delay, ScriptedModelServer

PAGE = "<html><body><h1>Lock loss</h1><p>{tab}</p></body></html>"
RESEND_PAUSE_S = 0.1
POLL_S = 0.02
LOCKING_SQL = (
    "SELECT DISTINCT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid "
    "WHERE a.application_name = %s AND l.locktype = 'advisory' AND l.granted"
)
# One statement, so the sessions holding locks when it looks are the ones it ends.
TERMINATE_SQL = """
WITH service AS (
    SELECT a.pid, coalesce(bool_or(l.locktype = 'advisory' AND l.granted), false) AS locking
    FROM pg_stat_activity a LEFT JOIN pg_locks l ON l.pid = a.pid
    WHERE a.application_name = %s GROUP BY a.pid
)
SELECT pg_terminate_backend(pid), locking FROM service WHERE (SELECT bool_or(locking) FROM service)
"""
SIBLINGS_SQL = (
    "SELECT count(*) FROM (SELECT 1 FROM checkpoints WHERE parent_checkpoint_id IS NOT NULL "
    "GROUP BY thread_id, checkpoint_ns, parent_checkpoint_id HAVING count(*) > 1) AS s"
)


@dataclass
class Tally:
    """What the clients saw."""

    statuses: Counter = field(default_factory=Counter)
    wrong_step_index: int = 0
    answered: dict[str, int] = field(default_factory=dict)
    """Task id -> the steps its client was answered for."""
    finished: bool = False
    """Every task is done (the terminator stops waiting for locks)."""
    split_starts: int = 0
    """Starts answered with two different task ids."""


async def send(client: httpx.AsyncClient, body: dict, expected: int, tally: Tally) -> dict:
    """Send ``body`` until it is answered 200 (503s and dropped connections are sent again)."""
    while True:
        try:
            response = await client.post("/api/agent/interact", json=body)
        except httpx.TransportError:
            tally.statuses["dropped"] += 1
            await asyncio.sleep(RESEND_PAUSE_S)
            continue
        tally.statuses[response.status_code] += 1
        if response.status_code == 200:
            reply = response.json()
            if reply["stepIndex"] != expected:
                tally.wrong_step_index += 1
            return reply
        if response.status_code != 503:
            raise SystemExit(f"unexpected {response.status_code}: {response.text[:300]}")
        await asyncio.sleep(RESEND_PAUSE_S)


async def run_task(tab: int, urls: list[str], steps: int, tally: Tally) -> None:
    """One task: every step on both processes at once."""
    page = PAGE.format(tab=tab)
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=120))
            for url in urls
        ]
        task_id = None
        for n in range(steps):
            body = observation(page, task_id, n) | {"requestId": f"{tab}-{n}"}
            if n:
                body["stepIndex"] = n - 1
            replies = await asyncio.gather(*(send(client, body, n, tally) for client in clients))
            started = {reply["taskId"] for reply in replies}
            tally.split_starts += len(started) - 1
            task_id = task_id or replies[0]["taskId"]
            tally.answered[task_id] = n + 1


def terminate(admin_url: str, application_name: str) -> int:
    """``pg_terminate_backend`` on every connection of the service; how many there were."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (application_name,),
        ).fetchall()
    return len(rows)


async def rows(admin: psycopg.AsyncConnection, sql: str, application_name: str) -> list[tuple]:
    return await (await admin.execute(sql, (application_name,))).fetchall()


async def terminate_locks(
    admin: psycopg.AsyncConnection, application_name: str, latency: float, tally: Tally
) -> list[tuple]:
    """Once steps hold locks and are half a model call in, terminate every connection of the
    service if a lock is still held (else wait for one again): (terminated, held a lock) per
    backend; none once the tasks are done."""
    while not tally.finished:
        if not await rows(admin, LOCKING_SQL, application_name):
            await asyncio.sleep(POLL_S)
            continue
        await asyncio.sleep(latency / 2)
        ended = await rows(admin, TERMINATE_SQL, application_name)
        if ended:
            return ended
    return []


async def terminator(
    admin_url: str, application_name: str, args, tally: Tally, done: list[tuple[int, int]]
) -> None:
    """At once (while the tasks start), then every ``args.every`` seconds, end the service's
    connections while steps hold locks; each round appends (backends, lock sessions) it ended."""
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
        for round_number in range(args.terminations):
            await asyncio.sleep(args.every if round_number else 0)
            ended = await terminate_locks(admin, application_name, args.latency, tally)
            if not ended:
                return  # the tasks are done
            done.append((len(ended), sum(1 for _, locking in ended if locking)))


async def measure(args, model: ScriptedModelServer, database_url: str, application_name: str):
    services = [ServiceProcess(database_url, model.base_url) for _ in range(2)]
    tally, killed = Tally(), []
    try:
        urls = [service.url for service in services]
        started = time.perf_counter()
        killer = asyncio.create_task(
            terminator(args.postgres_url, application_name, args, tally, killed)
        )
        await asyncio.gather(*(run_task(tab, urls, args.steps, tally) for tab in range(args.tasks)))
        wall = time.perf_counter() - started
        tally.finished = True
        await killer
        lost = duplicated = 0
        async with httpx.AsyncClient(base_url=urls[0], timeout=120) as reader:
            for task_id, answered in tally.answered.items():
                detail = (await reader.get(f"/api/tasks/{task_id}")).json()
                indexes = [action["stepIndex"] for action in detail["actions"]]
                lost += len(set(range(answered)) - set(indexes))
                duplicated += len(indexes) - len(set(indexes))
    finally:
        for service in services:
            service.stop()
    return tally, killed, lost, duplicated, wall


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--steps", type=int, default=5, help="steps per task")
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per model call")
    parser.add_argument("--terminations", type=int, default=3)
    parser.add_argument(
        "--every",
        type=float,
        default=4.0,
        help="seconds between terminations; each waits for a step in its model call",
    )
    parser.add_argument(
        "--quick", action="store_true", help="6 tasks of 3 steps, 0.3 s model, one termination"
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "VERILOOP_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/veriloop_test"
        ),
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.tasks, args.steps, args.latency, args.terminations, args.every = 6, 3, 0.3, 1, 1.0

    model = ScriptedModelServer().start()
    model.on(ANY_PURPOSE, lambda request: Delay(args.latency, answer(request)))
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    application_name = f"veriloop-lockloss-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    database_url = (
        f"{args.postgres_url}?options=-csearch_path%3D{schema}&application_name={application_name}"
    )
    print(
        f"{args.tasks} tasks x {args.steps} steps, each step sent to both processes at once; "
        f"model {args.latency:g} s a call; {args.terminations} terminations, every {args.every:g} s"
    )
    try:
        tally, killed, lost, duplicated, wall = asyncio.run(
            measure(args, model, database_url, application_name)
        )
        with psycopg.connect(database_url) as conn:
            siblings = conn.execute(SIBLINGS_SQL).fetchone()[0]
    finally:
        model.stop()
        with psycopg.connect(args.postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    print(
        f"wall {wall:.1f} s; answers {dict(tally.statuses)}; backends terminated per round "
        f"{[backends for backends, _ in killed]}, lock sessions among them {[s for _, s in killed]}"
    )
    print(
        f"RESULT lost={lost} duplicated={duplicated} siblings={siblings} "
        f"split_starts={tally.split_starts} "
        f"wrong_step_index={tally.wrong_step_index} tasks={len(tally.answered)} "
        f"terminations={len(killed)}"
    )


if __name__ == "__main__":
    main()
