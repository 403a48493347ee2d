"""Fixtures for the service tests: real uvicorn servers on loopback (in a thread or a process),
a PostgreSQL schema per test, and the scripted model answering from a playbook."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import uvicorn

from veriloop.llm.scripted import ANY_PURPOSE, ScriptedModelServer
from veriloop.server.app import create_app
from veriloop.server.settings import Settings

sys.path.insert(
    0, str(Path(__file__).parent)
)  # importlib mode: let the tests import service_testkit

from service_testkit import KEYS, PG_URL, REPO, Playbook, ProcessServer, Server, free_port  # noqa: E402


@pytest.fixture
def playbook(scripted_model: ScriptedModelServer) -> Playbook:
    """The scripted model answering every purpose from the playbook."""
    book = Playbook()
    scripted_model.on(ANY_PURPOSE, book)
    return book


# -- servers ----------------------------------------------------------------------------------


@pytest.fixture
def thread_server() -> Iterator:
    """Start ``create_app(settings)`` under uvicorn in a thread on a free port (real HTTP on loopback)."""
    started: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(settings: Settings) -> Server:
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        started.append((server, thread))
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the service did not start"
            time.sleep(0.02)
        return Server(f"http://127.0.0.1:{port}", settings)

    yield start
    for server, thread in started:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture
def process_servers(scripted_model: ScriptedModelServer) -> Iterator:
    """``start(database_url, count=1)``: service processes (started together) that talk to the scripted model.

    Returns the server, or a list when ``count`` > 1; all are stopped at the end.
    """
    started: list[ProcessServer] = []
    env = {
        **os.environ,
        "VERILOOP_API_KEYS": ",".join(f"{k}:{t}" for k, t in KEYS.items()),
        "VERILOOP_LLM_MAX_RETRIES": "0",
        "LANGSMITH_TRACING": "false",
    }

    def start(database_url: str, count: int = 1) -> ProcessServer | list[ProcessServer]:
        servers = [ProcessServer(database_url, env).launch() for _ in range(count)]
        started.extend(servers)
        ready = [server.ready() for server in servers]
        return ready if count > 1 else ready[0]

    yield start
    for server in started:
        server.stop()


# -- PostgreSQL -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_ready() -> str:
    """The test database exists and answers (never skip: CI guarantees PostgreSQL; fail loudly)."""
    subprocess.run(
        ["bash", str(REPO / "scripts/ensure_postgres.sh"), PG_URL], check=True, capture_output=True
    )
    return PG_URL


@pytest.fixture
def pg_url(postgres_ready: str) -> Iterator[str]:
    """A database URL whose tables live in a fresh schema of the test database (dropped afterwards)."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_ready, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    yield f"{postgres_ready}?options=-csearch_path%3D{schema}"
    with psycopg.connect(postgres_ready, autocommit=True) as conn:
        conn.execute(
            "SET lock_timeout = '30s'"
        )  # fail loudly rather than wait on a stuck server forever
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def sqlite_settings(tmp_path: Path) -> Settings:
    """Settings of a keyed service on a fresh SQLite file."""
    return Settings(database_url=f"sqlite:///{tmp_path / 'veriloop.sqlite'}", api_keys=KEYS)
