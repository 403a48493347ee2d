"""Where a step's page work runs: a worker thread of this process, or a pool of page processes.

Parsing a page, walking its skeleton, diffing it and compacting it for the next prompt cost
about 15 ms of CPU per step on a mid-size page, and all but the parse hold the GIL. In a
process serving a hundred tasks that was a third of its one busy core, while the machine's
other cores sat idle (py-spy under ``benchmarks.service_concurrency``). With
``Context.page_processes`` > 0 the nodes send that work to a pool of that many processes, so it
runs beside the event loop instead of taking turns with it. The work is pure (page text in,
plain data out), so it runs the same in either place.

A page process that dies (killed, out of memory) breaks the pool for every call in flight:
each of them runs once more on a new pool, and a call that breaks that one too raises
:class:`PageProcessLost`. Like any error, that fails the step and leaves the task as it was.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from multiprocessing.connection import Connection, wait
from typing import Any, TypeVar

R = TypeVar("R")
Offload = Callable[..., Awaitable[Any]]
"""Runs ``fn(*args)`` off the event loop and returns its result: ``await offload(fn, *args)``."""

_PRELOAD = ["veriloop.engines.verification"]
"""What every page process needs, imported once by the fork server that starts them."""

_pools: dict[int, ProcessPoolExecutor] = {}
_pools_lock = threading.Lock()
_lifeline: tuple[Connection, Connection] | None = None


class PageProcessLost(RuntimeError):
    """A page process died twice running the same call (the page may be what kills it)."""


def offload_for(processes: int) -> Offload:
    """How page work runs: in a worker thread for 0, else in a pool of ``processes`` processes."""
    if processes <= 0:
        return asyncio.to_thread
    return partial(run_in_page_process, processes)


async def run_in_page_process(processes: int, fn: Callable[..., R], /, *args: Any) -> R:
    """``fn(*args)`` in the pool of ``processes`` page processes; ``fn`` and its arguments and
    result must pickle (module-level functions, plain data, pydantic models)."""
    try:
        return await _run_once(processes, fn, args)
    except BrokenProcessPool:
        pass  # a process died, perhaps killed for something else: once more, on a new pool
    try:
        return await _run_once(processes, fn, args)
    except BrokenProcessPool as exc:
        raise PageProcessLost(
            f"a page process died twice running {getattr(fn, '__name__', fn)!r}"
        ) from exc


async def _run_once(processes: int, fn: Callable[..., R], args: tuple[Any, ...]) -> R:
    pool = _pool(processes)
    try:
        return await asyncio.get_running_loop().run_in_executor(pool, partial(fn, *args))
    except BrokenProcessPool:
        _discard(processes, pool)
        raise


def shutdown_page_processes() -> None:
    """Stop every page process (the service's shutdown; a later call starts new ones)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.shutdown(wait=True, cancel_futures=True)


def _pool(processes: int) -> ProcessPoolExecutor:
    with _pools_lock:
        pool = _pools.get(processes)
        if pool is None:
            pool = _pools[processes] = ProcessPoolExecutor(
                processes,
                mp_context=_context(),
                initializer=_exit_with,
                initargs=(_serving_end(),),
            )
        return pool


def _discard(processes: int, broken: ProcessPoolExecutor) -> None:
    with _pools_lock:
        if _pools.get(processes) is broken:  # other calls that saw it break may have replaced it
            del _pools[processes]
    broken.shutdown(wait=False, cancel_futures=True)


def _exit_with(serving: Connection) -> None:
    """A page process's start: it exits once the serving process is gone, however that ended.

    Left alone, the page processes of a killed server wait for work forever, and their fork
    server with them (it lives while a process it started lives). ``serving`` is the read end
    of a pipe whose write end only the serving process holds: its end comes when that process
    does, even while it is an unreaped zombie."""

    def watch() -> None:
        wait([serving])
        os._exit(0)

    threading.Thread(target=watch, name="veriloop-serving-process-watch", daemon=True).start()


def _serving_end() -> Connection:
    """The read end of this process's lifeline to its page processes (made once)."""
    global _lifeline
    if _lifeline is None:
        _lifeline = multiprocessing.Pipe(duplex=False)
    return _lifeline[0]


def _context() -> multiprocessing.context.BaseContext:
    # Not fork: the serving process has threads (the event loop's helpers, the database driver),
    # and a forked child could inherit one of their locks held. A fork server starts clean, with
    # the engines imported once, and forks every page process from that.
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context
