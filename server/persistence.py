"""Opening the service's storage: a LangGraph checkpointer (task state), a LangGraph store (task index), task locks.

SQLite (default): one file holds both, locks are in-process (one process).
PostgreSQL (``postgresql://...``): both on one connection pool, locks are
advisory locks on a second pool, so any number of processes can serve.
Schema set-up runs on every start (idempotent).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.store.base import BaseStore
from langgraph.store.postgres.aio import AsyncPostgresStore
from langgraph.store.sqlite.aio import AsyncSqliteStore
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from veriloop.server.locks import LocalLocks, PostgresLocks, advisory_key
from veriloop.server.settings import Settings

SETUP_LOCK = "veriloop:schema-setup"
"""Advisory lock that keeps processes starting together from racing through the migrations."""
SETUP_POLL_S = 0.1


@dataclass(frozen=True)
class Persistence:
    """What the service keeps tasks in."""

    checkpointer: BaseCheckpointSaver
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
    async with (
        AsyncSqliteSaver.from_conn_string(path) as saver,
        AsyncSqliteStore.from_conn_string(path) as store,
    ):
        await saver.setup()
        await store.setup()
        yield Persistence(saver, store, LocalLocks(settings.lock_timeout_s))


@asynccontextmanager
async def _postgres(settings: Settings) -> AsyncIterator[Persistence]:
    url = settings.database_url
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with (
        AsyncConnectionPool(
            url, min_size=1, max_size=settings.pg_pool_size, kwargs=kwargs, open=False
        ) as pool,
        AsyncConnectionPool(
            url,
            min_size=1,
            max_size=settings.pg_lock_connections,
            kwargs={"autocommit": True},
            open=False,
        ) as lock_pool,
    ):
        await pool.wait(timeout=30)
        saver = AsyncPostgresSaver(pool)
        store = AsyncPostgresStore(pool)
        async with lock_pool.connection() as conn:
            await _take_setup_lock(conn)
            try:
                await saver.setup()
                await store.setup()
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (advisory_key(SETUP_LOCK),))
        yield Persistence(saver, store, PostgresLocks(lock_pool, settings.lock_timeout_s))


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
