"""The lock-loss benchmark's quick mode: two service processes, backends terminated mid-step,
every step (a task's start too) sent to both at once; nothing lost, duplicated, forked, started
twice or answered out of step."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import uuid

import psycopg

from benchmarks import lock_loss

RESULT = re.compile(
    r"^RESULT lost=(?P<lost>\d+) duplicated=(?P<dup>\d+) siblings=(?P<sib>\d+) "
    r"split_starts=(?P<split>\d+) wrong_step_index=(?P<wrong>\d+) tasks=(?P<tasks>\d+) terminations=(?P<terms>\d+)$"
)
PG_URL = os.environ.get(
    "VERILOOP_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/veriloop_test"
)


def test_quick_mode_loses_duplicates_and_forks_nothing(capsys):
    lock_loss.main(["--quick", "--postgres-url", PG_URL])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    match = RESULT.match(last)
    assert match, last
    assert (match["tasks"], match["terms"]) == ("6", "1"), last
    figures = (match["lost"], match["dup"], match["sib"], match["split"], match["wrong"])
    assert figures == ("0",) * 5, last


REOPEN_S = 0.3
"""How long the stand-in service takes to reopen its lock session: longer than a round's wait."""


async def lock_session(application_name: str, stop: asyncio.Event) -> None:
    """A service's lock session: reopened REOPEN_S after it dies, holding a lock while it lives."""
    while not stop.is_set():
        await asyncio.sleep(REOPEN_S)
        async with await psycopg.AsyncConnection.connect(
            PG_URL, autocommit=True, application_name=application_name
        ) as conn:
            with contextlib.suppress(psycopg.OperationalError):  # terminated
                await conn.execute("SELECT pg_advisory_lock(1)")
                while not stop.is_set():
                    await conn.execute("SELECT 1")
                    await asyncio.sleep(0.02)


def test_every_round_ends_a_lock_session_even_when_it_comes_back_late():
    # Rounds used to end whatever was connected half a model call after a step was sent: nothing
    # while the lock session was still being reopened (2 of 4 rounds in some runs).
    application_name = f"veriloop-lockloss-test-{uuid.uuid4().hex[:8]}"
    args = argparse.Namespace(terminations=3, every=0.0, latency=0.1)

    async def rounds(tally: lock_loss.Tally) -> list[tuple[int, int]]:
        stop, done = asyncio.Event(), []
        session = asyncio.create_task(lock_session(application_name, stop))
        try:
            await asyncio.wait_for(
                lock_loss.terminator(PG_URL, application_name, args, tally, done), 30
            )
        finally:
            stop.set()
            await session
        return done

    assert asyncio.run(rounds(lock_loss.Tally())) == [(1, 1)] * 3
    # Once the tasks are done it stops waiting (it used to wait for a step forever).
    assert asyncio.run(rounds(lock_loss.Tally(finished=True))) == []
