"""Opening the service's storage: a LangGraph checkpointer (task state), a LangGraph store (task index), task locks.

SQLite (default): one file holds both, locks are in-process (one process).
PostgreSQL (``postgresql://...``): both on one connection pool, locks are
advisory locks on one more connection, so any number of processes can serve.
Schema set-up runs on every start (idempotent).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.store.base import BaseStore, Op, Result
from langgraph.store.postgres.aio import AsyncPostgresStore
from langgraph.store.sqlite.aio import AsyncSqliteStore
from psycopg import AsyncConnection
from psycopg import errors as pg_errors
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from veriloop.server.locks import LocalLocks, PostgresLocks, advisory_key
from veriloop.server.settings import Settings

DATABASE_UNAVAILABLE: tuple[type[Exception], ...] = (psycopg.OperationalError,)
"""The database is gone or busy for now (a lost connection, a terminated backend, PoolTimeout):
answered 503, never 500. Pools check each connection before lending it (:class:`HealthCheck`),
so the next request gets a live one."""
SQLITE_BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite write waits for the other connection's write before failing."""
SETUP_LOCK = "veriloop:schema-setup"
"""Advisory lock that keeps processes starting together from racing through the migrations."""
SETUP_POLL_S = 0.1
HEAD_SQL = (
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = {} AND checkpoint_ns = '' "
    "ORDER BY checkpoint_id DESC LIMIT 1"
)
"""The id of a thread's latest checkpoint, chosen as both checkpointers choose it, without loading it."""


SQLITE_SNAPSHOT_RETRIES = 8
"""How often a store batch is run again after SQLite refused its write at once (see below)."""


class SqliteStore(AsyncSqliteStore):
    """LangGraph's SQLite store, running a batch again when its write was refused at once.

    A batch reads, then writes, in one deferred transaction. In WAL mode, when the checkpointer's
    connection committed in between, SQLite refuses the write at once with "database is locked"
    (``SQLITE_BUSY_SNAPSHOT``: waiting could not help, so the busy timeout does not apply). The
    fuzz run hit it as a 500 on ``POST /api/plans``, and a plan run could not record its end. A
    batch's reads and upserts can run again: it is retried, after a short pause, with a fresh
    snapshot.
    """

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        attempt = 0
        while True:
            try:
                return await super().abatch(ops)
            except sqlite3.OperationalError as exc:
                attempt += 1
                if "database is locked" not in str(exc) or attempt == SQLITE_SNAPSHOT_RETRIES:
                    raise
            await asyncio.sleep(0.005 * 2**attempt)


@dataclass(frozen=True)
class Persistence:
    """What the service keeps tasks in."""

    checkpointer: BaseCheckpointSaver
    store: BaseStore
    locks: LocalLocks
    head: Callable[[str], Awaitable[str | None]]
    """The id of a thread's latest checkpoint (None for a new thread): one indexed row, no values."""


@asynccontextmanager
async def open_persistence(settings: Settings) -> AsyncIterator[Persistence]:
    """Open, set up, and on exit close the storage named by ``settings.database_url``."""
    opener = _postgres if settings.is_postgres else _sqlite
    async with opener(settings) as persistence:
        yield persistence


@asynccontextmanager
async def _sqlite(settings: Settings) -> AsyncIterator[Persistence]:
    path = settings.sqlite_path
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    async with (
        AsyncSqliteSaver.from_conn_string(path) as saver,
        SqliteStore.from_conn_string(path) as store,
    ):
        await saver.setup()
        await store.setup()
        # Two connections write one file: under a burst, one waits for the other's write. SQLite's
        # default 5 s wait ended in "database is locked" (a 500) in the fuzz run; wait longer.
        for conn in (saver.conn, store.conn):
            await conn.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")

        async def head(thread_id: str) -> str | None:
            async with saver.lock, saver.conn.execute(HEAD_SQL.format("?"), (thread_id,)) as cur:
                row = await cur.fetchone()
            return row[0] if row else None

        yield Persistence(saver, store, LocalLocks(settings.lock_timeout_s), head)


@asynccontextmanager
async def _postgres(settings: Settings) -> AsyncIterator[Persistence]:
    url = settings.database_url
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    check = HealthCheck()
    async with AsyncConnectionPool(
        url,
        min_size=1,
        max_size=settings.pg_pool_size,
        kwargs=kwargs,
        configure=_fast_toast_compression,
        check=check,
        open=False,
    ) as pool:
        check.pool = pool
        await pool.wait(timeout=30)
        saver = AsyncPostgresSaver(pool)
        store = AsyncPostgresStore(pool)
        async with await AsyncConnection.connect(url, autocommit=True) as conn:
            await _take_setup_lock(conn)
            try:
                await saver.setup()
                await store.setup()
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (advisory_key(SETUP_LOCK),))

        async def head(thread_id: str) -> str | None:
            async with pool.connection() as conn:
                row = await (await conn.execute(HEAD_SQL.format("%s"), (thread_id,))).fetchone()
            return row["checkpoint_id"] if row else None

        locks = PostgresLocks(url, settings.lock_timeout_s)
        try:
            yield Persistence(saver, store, locks, head)
        finally:
            await locks.aclose()


class HealthCheck:
    """A pool's check of each connection before it lends it; a dead one sweeps the whole pool.

    ``AsyncConnectionPool.check_connection`` alone finds dead connections one by one, and
    the pool waits longer before each next try (1, 2, 4, 8 s...): after a restart, a failover
    or ``pg_terminate_backend`` every idle connection is dead, and a request took about 30 s.
    One dead connection usually means they all are, so the first one found also starts
    ``pool.check()``, which drops every dead idle connection at once (the pool opens new
    ones); the request that found it gets a live connection after the pool's first wait (1 s).
    """

    def __init__(self) -> None:
        self.pool: AsyncConnectionPool | None = None
        self._sweep: asyncio.Task | None = None

    async def __call__(self, conn: AsyncConnection) -> None:
        try:
            await AsyncConnectionPool.check_connection(conn)
        except Exception:
            if self.pool is not None and (self._sweep is None or self._sweep.done()):
                self._sweep = asyncio.create_task(self.pool.check())
            raise


async def _fast_toast_compression(conn: AsyncConnection) -> None:
    """Compress this connection's large values (the state's page and history) with lz4, not pglz.

    pglz takes several ms per step on a few hundred kB; lz4 a tenth of that.
    Readers decompress either. Servers built without lz4 keep their default.
    """
    try:
        await conn.execute("SET default_toast_compression = lz4")
    except (pg_errors.InvalidParameterValue, pg_errors.UndefinedObject):
        pass


async def _take_setup_lock(conn: AsyncConnection) -> None:
    """Poll a session advisory lock instead of blocking on it.

    The checkpointer's migrations run CREATE INDEX CONCURRENTLY, which waits for
    every transaction in progress; a process blocked in pg_advisory_lock is one,
    and it waits for the process running the migration: a deadlock. Short polls
    leave no transaction waiting.
    """
    while not (
        await (
            await conn.execute("SELECT pg_try_advisory_lock(%s)", (advisory_key(SETUP_LOCK),))
        ).fetchone()
    )[0]:
        await asyncio.sleep(SETUP_POLL_S)
