"""Running the service under uvicorn: ``serve(host, port, workers, database_url)`` (``veriloop serve``)."""

from __future__ import annotations

import os

import uvicorn
from fastapi import FastAPI

from veriloop.server.app import create_app
from veriloop.server.settings import Settings

APP_FACTORY = "veriloop.server.main:app_from_env"
KEEP_ALIVE_S = 75
"""How long an idle client connection stays open. uvicorn's default, 5 s, is shorter than a busy
process takes to answer its other tasks: a client reusing a connection the server is closing at that
moment loses its request (an httpx ReadError at 200 concurrent tasks). 75 s is nginx's default."""
"""Import string uvicorn's workers use: every worker builds its app from the environment."""


def app_from_env() -> FastAPI:
    """The app configured by ``VERILOOP_*`` variables (uvicorn factory)."""
    return create_app(Settings.from_env())


def serve(
    host: str = "127.0.0.1", port: int = 8000, workers: int = 1, database_url: str | None = None
) -> None:
    """Serve the interact API until interrupted.

    ``database_url`` overrides ``VERILOOP_DATABASE_URL`` (passed to workers
    through the environment). More than one worker needs PostgreSQL: SQLite
    locks live in one process.
    """
    if database_url:
        os.environ["VERILOOP_DATABASE_URL"] = database_url
    settings = Settings.from_env()  # fail on a bad configuration before forking workers
    if workers > 1 and not settings.is_postgres:
        raise ValueError(
            "workers > 1 needs VERILOOP_DATABASE_URL=postgresql://...; SQLite serves one process"
        )
    uvicorn.run(
        APP_FACTORY,
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="info",
        timeout_keep_alive=KEEP_ALIVE_S,
    )
