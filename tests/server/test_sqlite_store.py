"""The service's SQLite store runs a batch again when SQLite refused its write at once (WAL snapshot)."""

from __future__ import annotations

import sqlite3

import pytest
from langgraph.store.base import GetOp, PutOp
from langgraph.store.sqlite.aio import AsyncSqliteStore

from veriloop.server.persistence import SQLITE_SNAPSHOT_RETRIES, SqliteStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def _batch_with_a_commit_between_read_and_write(store_class, path) -> list:
    """A get and a put in one batch, with another connection committing after the get (as the
    checkpointer's connection does under load)."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA journal_mode=WAL")  # as the checkpointer's setup leaves the file
    other.execute("CREATE TABLE other (n INTEGER)")
    async with store_class.from_conn_string(str(path)) as store:
        await store.setup()
        reads = store._batch_get_ops
        commits = []

        async def read_then_let_the_other_commit(*args, **kwargs):
            await reads(*args, **kwargs)
            if not commits:  # once: the retry reads a fresh snapshot
                other.execute("INSERT INTO other VALUES (1)")
                commits.append(1)

        store._batch_get_ops = read_then_let_the_other_commit
        try:
            results = await store.abatch(
                [GetOp(("runs",), "a"), PutOp(("runs",), "b", {"status": "done"})]
            )
            item = await store.aget(("runs",), "b")
        finally:
            other.close()
        assert item is not None and item.value == {"status": "done"}
        return results


async def test_a_write_refused_after_another_connections_commit_is_run_again(tmp_path):
    results = await _batch_with_a_commit_between_read_and_write(SqliteStore, tmp_path / "s.sqlite")
    assert results == [None, None]


async def test_langgraphs_store_alone_fails_there(tmp_path):
    with pytest.raises(sqlite3.OperationalError, match="database is locked") as failed:
        await _batch_with_a_commit_between_read_and_write(AsyncSqliteStore, tmp_path / "s.sqlite")
    assert any(frame.name == "_batch_put_ops" for frame in failed.traceback)  # the write, at once


async def test_other_errors_and_a_lock_that_stays_are_not_retried_forever(tmp_path, monkeypatch):
    calls = []

    async def refuse(self, ops, message="database is locked"):
        calls.append(1)
        raise sqlite3.OperationalError(message)

    async with SqliteStore.from_conn_string(str(tmp_path / "s.sqlite")) as store:
        await store.setup()
        monkeypatch.setattr(AsyncSqliteStore, "abatch", refuse)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            await store.abatch([GetOp(("runs",), "a")])
        assert len(calls) == SQLITE_SNAPSHOT_RETRIES
        calls.clear()
        monkeypatch.setattr(
            AsyncSqliteStore, "abatch", lambda self, ops: refuse(self, ops, "no such table: x")
        )
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            await store.abatch([GetOp(("runs",), "a")])
        assert len(calls) == 1
