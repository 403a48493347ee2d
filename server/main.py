"""Running the service under uvicorn: ``serve(host, port, workers, database_url)`` (``veriloop serve``)."""

from __future__ import annotations

import gc
import os
import sys
import threading
from types import FrameType

import uvicorn
from fastapi import FastAPI
from uvicorn.supervisors import Multiprocess

from veriloop.server.app import create_app
from veriloop.server.settings import Settings

APP_FACTORY = "veriloop.server.main:app_from_env"
"""Import string uvicorn's workers use: every worker builds its app from the environment."""
KEEP_ALIVE_S = 75
"""How long an idle client connection stays open. uvicorn's default, 5 s, is shorter than a busy
process takes to answer its other tasks: a client reusing a connection the server is closing at that
moment loses its request (an httpx ReadError at 200 concurrent tasks). 75 s is nginx's default."""
EVENT_LOOP = "asyncio" if sys.platform == "win32" else "uvloop"
HTTP_PARSER = "httptools"
"""uvicorn's event loop and HTTP parser, named rather than left to "auto", which quietly falls back
to asyncio and h11 when uvloop and httptools are not installed (as on a plain install before they
were dependencies). ``benchmarks.service_concurrency``, alternated: the service spent about 1.5 ms
more CPU a step without them (23-24 against 21-22 ms), and 100 tasks took 1.32-1.35x the model's
time against 1.29x."""
SHUTDOWN_GRACE_S = 5
"""After SIGTERM, how long requests in flight may finish before uvicorn cancels them. A cancelled
step leaves its task as it was (the same request sent to another process runs it); a plan run
stops where it is and stays resumable."""
HARD_STOP_S = 9.5
"""After SIGTERM, the process exits at this point whatever still runs (a page parse, a stuck
shutdown): a stop within 10 s at any load. Nothing is lost by it: a step commits only by saving
its checkpoint, and an interrupted one is discarded or adopted by the next request."""
GC_THRESHOLD = (10_000, 10, 10)
"""Allocations between young collections (Python's default is 700), then as many collections of
each generation before the next older one. Each step allocates tens of thousands of short-lived
objects; at the default the collector ran every few hundred of them."""


def app_from_env() -> FastAPI:
    """The app configured by ``VERILOOP_*`` variables (uvicorn factory), in a process tuned to serve."""
    app = create_app(Settings.from_env())
    tune_gc()
    return app


def tune_gc() -> None:
    """Make the cyclic garbage collector cheap for a long-running service.

    Measured with ``benchmarks.service_concurrency``: the collector took 16-24% of the process's
    CPU, mostly walking the heap built at import (LangGraph, pydantic schemas, the openai SDK),
    which lives as long as the process. :func:`gc.freeze` moves it out of the collector's reach,
    and a larger young generation collects less often. Only the server does this: a process that
    embeds the graph keeps its own collector settings.
    """
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


def serve(
    host: str = "127.0.0.1", port: int = 8000, workers: int = 1, database_url: str | None = None
) -> None:
    """Serve the interact API until interrupted.

    ``database_url`` overrides ``VERILOOP_DATABASE_URL`` (passed to workers
    through the environment). Workers share one port; on SQLite they share the
    database file and its lock file, so they must run on one host (PostgreSQL:
    any number of hosts), and an in-memory database serves one process.
    """
    if database_url:
        os.environ["VERILOOP_DATABASE_URL"] = database_url
    settings = Settings.from_env()  # fail on a bad configuration before forking workers
    if workers > 1 and not settings.is_postgres and settings.sqlite_path == ":memory:":
        raise ValueError(
            "workers > 1 needs a database file: an in-memory SQLite database lives in one process"
        )
    config = uvicorn.Config(
        APP_FACTORY,
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="info",
        timeout_keep_alive=KEEP_ALIVE_S,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        loop=EVENT_LOOP,
        http=HTTP_PARSER,
    )
    if workers > 1:  # as uvicorn.run does: each worker has the grace period, not the hard stop
        Multiprocess(config, sockets=[config.bind_socket()]).run()
    else:
        BoundedStopServer(config).run()


class BoundedStopServer(uvicorn.Server):
    """uvicorn's server, which exits ``HARD_STOP_S`` after the first SIGTERM/SIGINT at the latest."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            stop = threading.Timer(HARD_STOP_S, os._exit, (0,))
            stop.daemon = True  # a shutdown that ends sooner is not held up by it
            stop.start()
        super().handle_exit(sig, frame)
