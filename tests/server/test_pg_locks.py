"""PostgreSQL task locks: session advisory locks on one shared connection per process."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from veriloop.server.locks import PostgresLocks, TaskBusy, advisory_key

pytestmark = pytest.mark.anyio


def key() -> str:
    return f"task:{uuid.uuid4().hex}"


async def free_elsewhere(pg_url: str, lock_key: str) -> bool:
    """Whether a third session can take (and at once give back) ``lock_key``."""
    other = PostgresLocks(pg_url, timeout_s=0)
    try:
        async with other.holding(lock_key, wait=False):
            return True
    except TaskBusy:
        return False
    finally:
        await other.aclose()


async def test_a_second_process_waits_then_gets_busy_then_the_lock(postgres_ready):
    first, second = PostgresLocks(postgres_ready, 5), PostgresLocks(postgres_ready, 0.3)
    lock_key = key()
    try:
        async with first.hold(lock_key):
            assert await second.held(lock_key)
            with pytest.raises(TaskBusy):
                async with second.hold(lock_key):
                    pass
        async with second.hold(lock_key):
            assert not await free_elsewhere(postgres_ready, lock_key)
        assert await free_elsewhere(postgres_ready, lock_key)
    finally:
        await first.aclose()
        await second.aclose()


async def test_many_tasks_hold_their_locks_on_one_connection(postgres_ready):
    locks = PostgresLocks(postgres_ready, 5)
    keys = [key() for _ in range(40)]
    everyone_inside = asyncio.Event()
    holders: list[str] = []

    async def step(lock_key: str) -> None:
        async with locks.hold(lock_key):
            holders.append(lock_key)
            if len(holders) == len(keys):
                everyone_inside.set()
            await asyncio.wait_for(everyone_inside.wait(), 10)  # all 40 hold their lock at once

    async def sessions_holding() -> list[tuple[int, int]]:
        await everyone_inside.wait()
        ids = [advisory_key(k) for k in keys]
        with psycopg.connect(postgres_ready) as conn:
            return conn.execute(
                "SELECT pid, count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND (classid::bigint << 32 | objid::bigint) = ANY(%s) GROUP BY pid",
                (ids,),
            ).fetchall()

    try:
        *_, sessions = await asyncio.gather(*(step(k) for k in keys), sessions_holding())
        assert len(sessions) == 1 and sessions[0][1] == len(keys)
        assert all([await free_elsewhere(postgres_ready, k) for k in keys[:3]])
    finally:
        await locks.aclose()


async def test_a_cancelled_body_gives_the_lock_back(postgres_ready):
    locks = PostgresLocks(postgres_ready, 5)
    lock_key = key()
    held = asyncio.Event()

    async def step() -> None:
        async with locks.hold(lock_key):
            held.set()
            await asyncio.sleep(60)

    try:
        running = asyncio.create_task(step())
        await held.wait()
        assert not await free_elsewhere(postgres_ready, lock_key)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert await free_elsewhere(postgres_ready, lock_key)
    finally:
        await locks.aclose()


async def test_a_request_cancelled_while_locking_leaves_no_lock(postgres_ready, monkeypatch):
    locks = PostgresLocks(postgres_ready, 5)
    lock_key = key()
    taken = asyncio.Event()
    fetch = locks._fetch

    async def slow_fetch(sql, *params):
        answer = await fetch(sql, *params)
        if "try_advisory_lock" in sql:
            taken.set()
            await asyncio.sleep(0.2)  # the request is cancelled here, after the lock was taken
        return answer

    monkeypatch.setattr(locks, "_fetch", slow_fetch)
    try:
        request = asyncio.create_task(locks.hold(lock_key).__aenter__())
        await taken.wait()
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        await asyncio.sleep(0.5)
        assert await free_elsewhere(postgres_ready, lock_key)
    finally:
        await locks.aclose()


async def test_a_lost_lock_connection_is_replaced(postgres_ready):
    locks = PostgresLocks(postgres_ready, 5)
    lock_key = key()
    try:
        async with locks.hold(lock_key):
            pid = locks._conn.info.backend_pid
        with psycopg.connect(postgres_ready, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(psycopg.OperationalError):
            async with locks.hold(key()):
                pass  # the first statement on the dead session fails: a 503 for that request
        async with locks.hold(lock_key):  # the next one opens a new session
            assert locks._conn.info.backend_pid != pid
    finally:
        await locks.aclose()
