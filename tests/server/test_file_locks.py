"""SQLite's task locks across processes: a record lock on one byte of a file beside the database."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from veriloop.server import locks as locks_module
from veriloop.server.locks import FileLocks, TaskBusy

pytestmark = pytest.mark.anyio

HOLDER = """
import asyncio, sys
from veriloop.server.locks import FileLocks

async def main():
    locks = FileLocks(sys.argv[1], 5)
    async with locks.hold(sys.argv[2]):
        print("held", flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, int(sys.argv[2]))
except OSError:
    print("busy")
else:
    print("free")
"""


def free_elsewhere(lock_file: str, byte: int) -> bool:
    """Whether another process can lock ``byte`` of the lock file right now."""
    probe = [sys.executable, "-c", PROBE, lock_file, str(byte)]
    return (
        subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip() == "free"
    )


@pytest.fixture
def lock_file(tmp_path: Path) -> str:
    return str(tmp_path / "veriloop.sqlite.locks")


@pytest.fixture
def other_process(lock_file: str):
    """``hold(key)``: another process that takes ``key`` and keeps it until it is killed."""
    started: list[subprocess.Popen] = []

    def hold(key: str) -> subprocess.Popen:
        process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, lock_file, key], stdout=subprocess.PIPE, text=True
        )
        started.append(process)
        assert process.stdout.readline().strip() == "held"
        return process

    yield hold
    for process in started:
        process.kill()
        process.wait()


async def test_a_key_another_process_holds_is_busy_and_dies_with_it(lock_file, other_process):
    holder = other_process("task:a")
    locks = FileLocks(lock_file, timeout_s=0.2, poll_s=0.02)
    assert await locks.held("task:a")
    assert not await locks.held("task:b")
    with pytest.raises(TaskBusy):
        async with locks.hold("task:a"):
            pass
    async with locks.hold("task:b"):  # other keys are free
        pass
    holder.kill()  # no clean-up: the kernel drops a dead process's locks
    holder.wait()
    async with locks.hold("task:a"):
        assert await locks.held("task:a")
    assert not await locks.held("task:a")
    locks.close()


async def test_a_waiting_request_gets_the_lock_when_the_other_process_lets_go(
    lock_file, other_process
):
    holder = other_process("task:a")
    locks = FileLocks(lock_file, timeout_s=30, poll_s=0.02)
    asyncio.get_running_loop().call_later(0.3, holder.kill)
    async with locks.hold("task:a"):
        assert holder.poll() is not None or holder.wait(timeout=5) is not None
    locks.close()


async def test_two_keys_on_one_byte_keep_it_until_both_are_released(lock_file, monkeypatch):
    monkeypatch.setattr(locks_module, "advisory_key", lambda key: 7)  # every key, one byte
    locks = FileLocks(lock_file, timeout_s=0.2, poll_s=0.02)
    async with locks.hold("task:a"):
        async with locks.hold("task:b"):
            assert not free_elsewhere(lock_file, 7)
        # Released for b, still held for a: another process must not get it yet.
        assert not free_elsewhere(lock_file, 7)
    assert free_elsewhere(lock_file, 7)
    locks.close()
