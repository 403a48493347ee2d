"""Opening the service's storage: a LangGraph checkpointer (task state), a LangGraph store (task index), task locks.

SQLite (default): one file holds both, locks are record locks on a file beside it, so the
processes of one host can serve it. PostgreSQL (``postgresql://...``): both on one connection
pool, locks are advisory locks on one more connection, so any number of processes and hosts can
serve.
Schema set-up runs on every start (idempotent).

The checkpointer is fenced: a checkpoint the service saves is refused when its parent already has
a child the service saved (see :class:`Fenced`), so two runs that started from one checkpoint
(a lock lost mid-step, the step resent to another process) can never both commit.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointTuple,
    empty_checkpoint,
)
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.store.base import BaseStore, Op, Result
from langgraph.store.postgres.aio import AsyncPostgresStore
from langgraph.store.sqlite.aio import AsyncSqliteStore
from psycopg import AsyncConnection
from psycopg import errors as pg_errors
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from veriloop.server.locks import FileLocks, LocalLocks, PostgresLocks, advisory_key
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
FENCE = "fenced"
"""Metadata key that marks a checkpoint the service saved (the fence covers only those)."""
FENCE_NAME = "checkpoints_one_fenced_child_or_root"
"""The PostgreSQL unique index and the SQLite trigger that refuse a second fenced child of one
checkpoint, or a second fenced first checkpoint of one thread (two starts of one new task; a
subgraph's first checkpoints are left out: each task of a superstep has its own namespace)."""
FENCE_BEFORE_ROOTS = "checkpoints_one_fenced_child"
"""The earlier fence, which left first checkpoints out: replaced where a database still has it."""
FENCE_PG_SQL = (
    f"DROP INDEX IF EXISTS {FENCE_BEFORE_ROOTS}; "
    f"CREATE UNIQUE INDEX IF NOT EXISTS {FENCE_NAME} ON checkpoints "
    "(thread_id, checkpoint_ns, COALESCE(parent_checkpoint_id, '')) "
    f"WHERE (metadata ->> '{FENCE}') IS NOT NULL "
    "AND (parent_checkpoint_id IS NOT NULL OR checkpoint_ns = '')"
)
FENCE_SQLITE_SQL = f"""
DROP TRIGGER IF EXISTS {FENCE_BEFORE_ROOTS};
CREATE TRIGGER IF NOT EXISTS {FENCE_NAME} BEFORE INSERT ON checkpoints
WHEN json_extract(CAST(NEW.metadata AS TEXT), '$.{FENCE}') IS NOT NULL
  AND (NEW.parent_checkpoint_id IS NOT NULL OR NEW.checkpoint_ns = '')
  AND EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = NEW.thread_id
    AND checkpoint_ns = NEW.checkpoint_ns AND parent_checkpoint_id IS NEW.parent_checkpoint_id
    AND checkpoint_id <> NEW.checkpoint_id
    AND json_extract(CAST(metadata AS TEXT), '$.{FENCE}') IS NOT NULL)
BEGIN SELECT RAISE(ABORT, '{FENCE_NAME}: the parent checkpoint has a child already'); END;
"""
CHILDREN_SQL = (
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = {0} AND checkpoint_ns = '' "
    "AND parent_checkpoint_id = {0} ORDER BY checkpoint_id"
)
ROOTS_SQL = (
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = {0} AND checkpoint_ns = '' "
    "AND parent_checkpoint_id IS NULL ORDER BY checkpoint_id"
)
DISCARD_SQL = (
    "DELETE FROM {table} WHERE thread_id = {0} AND checkpoint_ns = '' AND checkpoint_id = {0}"
)


@dataclass
class _Head:
    """A run's start checkpoint, known to be its thread's latest, once the run has loaded it."""

    thread_id: str
    checkpoint_id: str
    loaded: CheckpointTuple | None = None


_RUN_AT_HEAD: ContextVar[_Head | None] = ContextVar("veriloop_run_at_head", default=None)


def fenced_out(exc: BaseException) -> bool:
    """True when ``exc`` (or what caused it) is the fence refusing a second child of one checkpoint."""
    while exc is not None:
        if (
            isinstance(exc, psycopg.errors.UniqueViolation)
            and exc.diag.constraint_name == FENCE_NAME
        ):
            return True
        if isinstance(exc, sqlite3.IntegrityError) and FENCE_NAME in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class Fenced:
    """A checkpointer whose checkpoints carry the fence mark, plus the reads and deletes the
    service's commit protocol needs (``ahead``, ``achildren``, ``adiscard``).

    Why a database rule and not a check in ``aput``: two processes check at the same moment and
    both see no child. PostgreSQL enforces a partial unique index on (thread_id, checkpoint_ns,
    parent_checkpoint_id, '' for a thread's first) atomically (the saver's upsert names only
    its primary key, so the index raises UniqueViolation). In SQLite a unique index would not do:
    the saver writes with INSERT OR REPLACE, which would delete the first child to make room for
    the second; a BEFORE INSERT trigger that RAISEs aborts the statement instead, and SQLite runs
    one writer at a time, so its check and the insert are atomic. Both cover only checkpoints with
    the mark, so rows written before the fence (or by other tools: a fork in Studio) are left be.
    """

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: dict,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        if (head := _RUN_AT_HEAD.get()) is not None:
            head.loaded = None  # the thread has moved on: its latest is no longer the start
        return await super().aput(config, checkpoint, {**metadata, FENCE: True}, new_versions)

    @contextmanager
    def at_head(self, thread_id: str, checkpoint_id: str) -> Iterator[None]:
        """Within: a run pinned to ``checkpoint_id``, which the caller knows (under the task's
        lock) is the thread's latest.

        LangGraph loads a pinned checkpoint, then the thread's latest only to compare their ids
        (is the run replaying an older one?): a second read and decoding of the whole state each
        step. Here the latest is the checkpoint just loaded, given back once, unless a checkpoint
        was saved since.
        """
        token = _RUN_AT_HEAD.set(_Head(thread_id, checkpoint_id))
        try:
            yield
        finally:
            _RUN_AT_HEAD.reset(token)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        head, wanted = _RUN_AT_HEAD.get(), config["configurable"]
        if (
            head is None
            or wanted.get("thread_id") != head.thread_id
            or wanted.get("checkpoint_ns", "") != ""
        ):
            return await super().aget_tuple(config)
        if wanted.get("checkpoint_id") is None and head.loaded is not None:
            loaded, head.loaded = head.loaded, None
            return loaded
        found = await super().aget_tuple(config)
        if wanted.get("checkpoint_id") == head.checkpoint_id:
            head.loaded = found
        return found

    async def ahead(self, thread_id: str) -> str | None:
        """The id of the thread's latest checkpoint (None for a new thread): one indexed row."""
        rows = await self._rows(HEAD_SQL, thread_id)
        return rows[0] if rows else None

    async def achildren(self, thread_id: str, parent_id: str) -> list[str]:
        """The ids of the checkpoints saved on ``parent_id`` (at most one fenced; oldest first)."""
        return await self._rows(CHILDREN_SQL, thread_id, parent_id)

    async def aroot(self, thread_id: str) -> str:
        """The id of the thread's first checkpoint, an empty one saved now if it has none.

        Every start of a task runs pinned to it. A run from no checkpoint would load the
        thread's latest instead, which a failed start on another process may have saved in the
        meantime, and keep its history as writes on that checkpoint, discarded with it.
        """
        if not (roots := await self._rows(ROOTS_SQL, thread_id)):
            root = empty_checkpoint()
            config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
            try:
                await self.aput(config, root, {"step": -2}, {})
                return root["id"]
            except Exception as exc:
                if not fenced_out(exc):
                    raise
            roots = await self._rows(ROOTS_SQL, thread_id)  # another start saved it first
        return roots[0]

    async def adiscard(self, thread_id: str, checkpoint_id: str) -> None:
        """Delete one checkpoint and its writes (an unfinished run's leftovers)."""
        for table in (self.WRITES_TABLE, "checkpoints"):
            await self._rows(DISCARD_SQL.replace("{table}", table), thread_id, checkpoint_id)


class FencedSqliteSaver(Fenced, AsyncSqliteSaver):
    """LangGraph's SQLite checkpointer, fenced."""

    WRITES_TABLE = "writes"

    async def _rows(self, sql: str, *params: str) -> list[str]:
        # One trip to aiosqlite's thread (execute, fetch and close together), and a commit only
        # when the statement opened a transaction (a DELETE; a SELECT opens none): each trip
        # costs ~25 us of CPU in thread wake-ups, and ``ahead`` runs every step.
        async with self.lock:
            rows = await self.conn.execute_fetchall(sql.format("?"), params)
            if self.conn.in_transaction:
                await self.conn.commit()
        return [row[0] for row in rows]


class FencedPostgresSaver(Fenced, AsyncPostgresSaver):
    """LangGraph's PostgreSQL checkpointer, fenced."""

    WRITES_TABLE = "checkpoint_writes"

    async def _rows(self, sql: str, *params: str) -> list[str]:
        async with self._cursor() as cur:
            await cur.execute(sql.format("%s"), params)
            return (
                [next(iter(row.values())) for row in await cur.fetchall()]
                if cur.description
                else []
            )


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

    checkpointer: FencedSqliteSaver | FencedPostgresSaver
    store: BaseStore
    locks: LocalLocks


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
    # A file's processes (``--workers``) share locks through a file beside it; a memory
    # database lives in one process.
    locks = (
        LocalLocks(settings.lock_timeout_s)
        if path == ":memory:"
        else FileLocks(f"{path}.locks", settings.lock_timeout_s)
    )
    async with (
        FencedSqliteSaver.from_conn_string(path) as saver,
        SqliteStore.from_conn_string(path) as store,
    ):
        # Two connections (per process) write one file: under a burst, one waits for another's
        # write. SQLite's default 5 s wait ended in "database is locked" (a 500) in the fuzz run;
        # wait longer.
        for conn in (saver.conn, store.conn):
            await conn.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        # Processes starting together take turns through the migrations.
        async with locks.hold(SETUP_LOCK):
            await saver.setup()
            await store.setup()
            await saver.conn.executescript(FENCE_SQLITE_SQL)
            await saver.conn.commit()
        try:
            yield Persistence(saver, store, locks)
        finally:
            if isinstance(locks, FileLocks):
                locks.close()


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
        saver = FencedPostgresSaver(pool)
        store = AsyncPostgresStore(pool)
        async with await AsyncConnection.connect(url, autocommit=True) as conn:
            await _take_setup_lock(conn)
            try:
                await saver.setup()
                await store.setup()
                await conn.execute(FENCE_PG_SQL)
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (advisory_key(SETUP_LOCK),))

        locks = PostgresLocks(url, settings.lock_timeout_s)
        try:
            yield Persistence(saver, store, locks)
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
