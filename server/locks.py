"""Per-task serialisation: two requests for one task never run the graph at the same time.

A second request WAITS (up to ``timeout_s``) instead of failing: once it holds
the lock it sees what the first one stored, so a duplicate gets the stored
answer and a genuinely new observation runs as the next step. Only a wait past
the timeout answers 409 (``TaskBusy``).

In one process an asyncio lock per key is enough (SQLite: one process). On
PostgreSQL the holder also takes ``pg_advisory_xact_lock`` on a hash of the
key, on a dedicated pooled connection whose transaction lasts as long as the
run, so the lock holds across processes and hosts and dies with a crashed one.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from psycopg import AsyncConnection
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool


class TaskBusy(Exception):
    """Another request held the task's lock for longer than the wait allows."""


class LocalLocks:
    """One asyncio lock per key, dropped when nobody holds or waits for it."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold ``key`` for the body; raise TaskBusy after waiting ``timeout_s``."""
        lock, users = self._locks.get(key, (None, 0))
        lock = lock or asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            try:
                await asyncio.wait_for(lock.acquire(), self.timeout_s)
            except TimeoutError as exc:
                raise TaskBusy(key) from exc
            try:
                async with self._shared(key):
                    yield
            finally:
                lock.release()
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    @asynccontextmanager
    async def _shared(self, key: str) -> AsyncIterator[None]:
        """The cross-process part of the lock (none in one process)."""
        yield


class PostgresLocks(LocalLocks):
    """The local lock, then a PostgreSQL advisory lock held for the body's duration."""

    def __init__(self, pool: AsyncConnectionPool, timeout_s: float) -> None:
        super().__init__(timeout_s)
        self.pool = pool

    @asynccontextmanager
    async def _shared(self, key: str) -> AsyncIterator[None]:
        try:
            # The pool's connections wait at most timeout_s for a lock (limit_lock_wait).
            async with self.pool.connection(timeout=self.timeout_s) as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key(key),))
                yield
        except pg_errors.LockNotAvailable as exc:
            raise TaskBusy(key) from exc


async def limit_lock_wait(timeout_s: float, conn: AsyncConnection) -> None:
    """Set up a lock-pool connection: a lock wait past ``timeout_s`` fails (LockNotAvailable)."""
    await conn.execute(f"SET lock_timeout = {int(timeout_s * 1000)}")


def advisory_key(key: str) -> int:
    """A stable signed 64-bit lock id for ``key`` (the same in every process)."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)
