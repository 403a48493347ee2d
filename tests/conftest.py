"""Shared fixtures: the scripted model server, and a guard that keeps tests off real providers."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import fields

import psycopg
import pytest
from psycopg import sql

from veriloop.context import PlanContext
from veriloop.llm import clear_llm_cache
from veriloop.llm.pricing import PRICES_ENV
from veriloop.llm.scripted import ScriptedModelServer

# Captured at import, before any fixture edits the environment: live tests run only with a real key.
_ORIGINAL_OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY")

# Everything that could point a test at a real provider or change its model settings.
_MODEL_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    PRICES_ENV,
    "TAVILY_API_KEY",
    "TAVILY_BASE_URL",
) + tuple(f"VERILOOP_{f.name.upper()}" for f in fields(PlanContext))


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker gets its own PostgreSQL database (``<db>_<worker>``), so tests
    that count rows, drop schemas or install the fence never see another worker's."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    url = os.environ.get("VERILOOP_TEST_POSTGRES_URL")
    if not worker or not url:
        return
    server, _, database = url.rpartition("/")
    own = f"{database}_{worker}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (own,)).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(own)))
    os.environ["VERILOOP_TEST_POSTGRES_URL"] = f"{server}/{own}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _ORIGINAL_OPENAI_API_KEY:
        return
    skip = pytest.mark.skip(reason="live: set OPENAI_API_KEY to call a real model provider")
    for item in items:
        if "live" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_real_provider(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Unless marked ``live``, a test sees no provider key, endpoint or model settings from the shell."""
    if request.node.get_closest_marker("live") is None:
        for name in _MODEL_ENV:
            monkeypatch.delenv(name, raising=False)
    clear_llm_cache()
    yield
    clear_llm_cache()


@pytest.fixture(autouse=True)
def _restore_process_environment() -> Iterator[None]:
    """``veriloop serve`` points TMPDIR and VERILOOP_WORKSPACE at its data dir in its own process:
    a test that invokes it in-process must not leave them to the next test on its worker."""
    saved, tempdir = dict(os.environ), tempfile.tempdir
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)
    tempfile.tempdir = tempdir


@pytest.fixture
def scripted_model(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedModelServer]:
    """A running ScriptedModelServer that ``get_llm()`` talks to (OPENAI_BASE_URL points at it)."""
    server = ScriptedModelServer().start()
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    clear_llm_cache()
    try:
        yield server
    finally:
        server.stop()
        clear_llm_cache()


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (``pytest.mark.anyio``) run on asyncio, as the service does."""
    return "asyncio"


@pytest.fixture
def tcp_listener() -> Iterator[tuple[int, list[bool]]]:
    """A TCP server on loopback: ``(port, accepted)``, one entry in ``accepted`` per connection."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    accepted: list[bool] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(True)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join(timeout=5)
    server.close()
