"""Per-task serialisation: two requests for one task never run the graph at the same time.

A second request WAITS (up to ``timeout_s``) instead of failing: once it holds
the lock it sees what the first one stored, so a duplicate gets the stored
answer and a genuinely new observation runs as the next step. Only a wait past
the timeout answers 409 (``TaskBusy``).

In one process an asyncio lock per key is enough. Across processes the holder also takes a lock
the other processes see (:class:`SharedLocks`), which dies with a crashed process: on
PostgreSQL a session advisory lock on a hash of the key, on one connection the process shares for
all its locks, so the lock holds across hosts too; on SQLite a record lock on one byte of a file
beside the database (:class:`FileLocks`), so it holds across the processes of one host.

A lock is not a guarantee on its own: PostgreSQL drops a session's locks the moment its
connection dies (a terminated backend, a failover, a network cut), and another process may take
the task while this one still runs the step. So a holder's lease is watched: when the lock's
session is found dead (a statement on it fails; while any lock is held one is sent every
``watch_s``), every step holding a lock on it is cancelled and answers :class:`LockLost` (503).
What a late step could still write is refused by the checkpointer's fence
(``veriloop.server.persistence.Fenced``), not by the lock.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import psycopg
from psycopg import AsyncConnection

CONNECT_TIMEOUT_S = 10
"""How long opening the lock connection may take before the request is a 503."""


WATCH_S = 1.0
"""How often the lock session is checked while it holds locks: the longest a step runs on after
its lock died, when nothing else uses the session."""


class TaskBusy(Exception):
    """Another request held the task's lock for longer than the wait allows."""


class LockLost(Exception):
    """The session that held the lock died while the body ran; the body was cancelled."""


@dataclass(eq=False)
class Lease:
    """One holder of a cross-process lock: the task to cancel if the lock's session dies."""

    task: asyncio.Task
    session: AsyncConnection
    active: bool = True
    """True while the holder is inside the lock's body (only then is it cancelled)."""
    lost: bool = False


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


class SharedLocks(LocalLocks):
    """Locks that hold across processes: the local lock, then :meth:`holding`."""

    @asynccontextmanager
    async def _shared(self, key: str) -> AsyncIterator[None]:
        async with self.holding(key):
            yield

    def holding(self, key: str, *, wait: bool = True) -> AbstractAsyncContextManager[None]:
        """Hold ``key`` across processes for the body: wait up to ``timeout_s`` (or try once when
        not ``wait``); TaskBusy while another process holds it."""
        raise NotImplementedError

    async def held(self, key: str) -> bool:
        """True when some process (this one included) holds ``key`` right now."""
        raise NotImplementedError


class FileLocks(SharedLocks):
    """The local lock, then a POSIX record lock (``lockf``) on one byte of a lock file: the SQLite
    database's processes on one host (every process serving a file names the same lock file).

    The byte is the key's 64-bit hash (as PostgreSQL's advisory key), so two keys share a byte
    about never; if they do, they only wait for each other. The kernel drops a process's record
    locks when it exits, however it ends. Record locks belong to the process, not to a
    descriptor, and closing any descriptor of the file drops them all: the file is opened once and
    kept open, and a byte held for two keys of this process is counted, not locked twice. Another
    process's lock is polled (every ``poll_s``, never a blocking ``F_SETLKW`` on the event loop).
    """

    def __init__(self, path: str, timeout_s: float, poll_s: float = 0.05) -> None:
        super().__init__(timeout_s)
        self.path = path
        self.poll_s = poll_s
        self._fd: int | None = None
        self._held: dict[int, int] = {}  # byte -> holders in this process

    @asynccontextmanager
    async def holding(self, key: str, *, wait: bool = True) -> AsyncIterator[None]:
        byte = advisory_key(key) & _LOCK_BYTES
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.timeout_s if wait else 0)
        while not self._try_lock(byte):
            if loop.time() >= deadline:
                raise TaskBusy(key)
            await asyncio.sleep(self.poll_s)
        try:
            yield
        finally:
            self._unlock(byte)

    async def held(self, key: str) -> bool:
        byte = advisory_key(key) & _LOCK_BYTES
        if byte in self._held:
            return True
        if not self._try_lock(byte):
            return True
        self._unlock(byte)
        return False

    def _try_lock(self, byte: int) -> bool:
        if byte in self._held:
            self._held[byte] += 1
            return True
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, byte)
        except OSError:  # EAGAIN or EACCES: another process holds it
            return False
        self._held[byte] = 1
        return True

    def _unlock(self, byte: int) -> None:
        self._held[byte] -= 1
        if not self._held[byte]:
            del self._held[byte]
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, byte)

    def close(self) -> None:
        """Close the lock file (every lock this process holds on it is released)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._held.clear()


_LOCK_BYTES = 2**62 - 1
"""A lock byte is the key's hash within this mask: a non-negative offset that fits any ``off_t``."""


class PostgresLocks(SharedLocks):
    """The local lock, then a session-level PostgreSQL advisory lock on one shared connection.

    A session lock needs no transaction, so one connection holds the locks of every step this
    process runs and a step holds no connection while its graph runs. (A transaction-scoped lock
    kept a pooled connection per running step, which capped a process at that pool's size:
    24 steps at once, whatever the number of tasks waiting on the model.) When another process
    holds the task, ``pg_try_advisory_lock`` is polled until ``timeout_s``: a blocking
    ``pg_advisory_lock`` would stall the shared connection for every other task. PostgreSQL
    drops a session's locks when its connection dies; the next lock opens a new connection,
    and locks taken on the dead one are not released twice.
    """

    def __init__(
        self, conninfo: str, timeout_s: float, poll_s: float = 0.05, watch_s: float = WATCH_S
    ) -> None:
        super().__init__(timeout_s)
        self.conninfo = conninfo
        self.poll_s = poll_s
        self.watch_s = watch_s
        self._conn: AsyncConnection | None = None
        self._use = asyncio.Lock()  # one statement at a time on the shared connection
        self._releasing: set[asyncio.Future] = set()  # unlocks after a cancelled lock request
        self._leases: set[Lease] = set()
        self._watchdog: asyncio.Task | None = None

    @asynccontextmanager
    async def holding(self, key: str, *, wait: bool = True) -> AsyncIterator[None]:
        lock_id = advisory_key(key)
        deadline = asyncio.get_running_loop().time() + (self.timeout_s if wait else 0)
        while True:
            locked, holder = await self._try_lock(lock_id)
            if locked:
                break
            if asyncio.get_running_loop().time() >= deadline:
                raise TaskBusy(key)
            await asyncio.sleep(self.poll_s)
        lease = Lease(asyncio.current_task(), holder)
        self._leases.add(lease)
        if self._watchdog is None or self._watchdog.done():
            self._watchdog = asyncio.create_task(self._watch())
        try:
            yield
        except asyncio.CancelledError:
            lease.active = False
            # Our own cancel (the session died), and nobody else's: the body stopped because the
            # lock is gone, which the caller answers like a lost database (503).
            if lease.lost and lease.task.uncancel() == 0:
                raise LockLost(key) from None
            raise
        finally:
            lease.active = False
            self._leases.discard(lease)
            # Shielded: a lock left behind on the shared session would bar the task elsewhere.
            await asyncio.shield(self._release(holder, lock_id))

    async def _watch(self) -> None:
        """While locks are held, send a statement every ``watch_s``: a dead session fails it."""
        while self._leases:
            await asyncio.sleep(self.watch_s)
            try:
                await self._fetch("SELECT 1")
            except Exception:
                pass  # _fetch has cancelled the holders on the dead session

    def _session_died(self, session: AsyncConnection) -> None:
        """Cancel every body still holding a lock taken on ``session``."""
        for lease in list(self._leases):
            if lease.session is session and lease.active and not lease.lost:
                lease.lost = True
                lease.task.cancel()

    async def _try_lock(self, lock_id: int) -> tuple[Any, AsyncConnection]:
        attempt = asyncio.ensure_future(self._fetch("SELECT pg_try_advisory_lock(%s)", lock_id))
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            # The statement runs to its end anyway; a lock it took must not outlive the request.
            attempt.add_done_callback(partial(self._release_taken, lock_id))
            raise

    def _release_taken(self, lock_id: int, attempt: asyncio.Future) -> None:
        if not attempt.cancelled() and attempt.exception() is None and attempt.result()[0]:
            release = asyncio.ensure_future(self._release(attempt.result()[1], lock_id))
            self._releasing.add(release)
            release.add_done_callback(self._releasing.discard)

    async def held(self, key: str) -> bool:
        lock_id = advisory_key(key)
        held, _ = await self._fetch(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND objsubid = 1 AND classid::bigint = %s AND objid::bigint = %s "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))",
            (lock_id >> 32) & 0xFFFFFFFF,
            lock_id & 0xFFFFFFFF,
        )
        return bool(held)

    async def _fetch(self, sql: str, *params: int) -> tuple[Any, AsyncConnection]:
        """One value from the shared connection, and the connection (session) that answered."""
        async with self._use:
            if self._conn is None or self._conn.closed:
                self._conn = await AsyncConnection.connect(
                    self.conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
                )
            conn = self._conn
            try:
                row = await (await conn.execute(sql, params)).fetchone()
            except Exception:
                await conn.close()  # a broken session: the next call opens a new one
                self._session_died(conn)
                raise
            return (row[0] if row else None), conn

    async def _release(self, holder: AsyncConnection, lock_id: int) -> None:
        if holder is not self._conn or holder.closed:
            return  # the session that held it is gone, and its locks with it
        try:
            await self._fetch("SELECT pg_advisory_unlock(%s)", lock_id)
        except psycopg.OperationalError:
            pass  # the connection died: PostgreSQL released the lock with it

    async def aclose(self) -> None:
        """Close the shared connection (every lock it holds is released)."""
        if self._watchdog is not None:
            self._watchdog.cancel()
        async with self._use:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None


def advisory_key(key: str) -> int:
    """A stable signed 64-bit lock id for ``key`` (the same in every process)."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)
