"""Fixtures of the console tests: one real ``veriloop serve`` process per module (SQLite, two
tenants' keys, the scripted model on loopback, the plan test callables) and one headless
Chromium per module (Playwright, /usr/bin/chromium)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

SERVER_TESTS = Path(__file__).resolve().parents[1] / "server"
sys.path.insert(0, str(SERVER_TESTS))  # importlib mode: the service tests' kit and callables
sys.path.insert(0, str(Path(__file__).parent))  # and console_kit

from service_testkit import KEYS, Playbook, ProcessServer  # noqa: E402

from benchmarks.console_latency import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from veriloop.llm.scripted import ANY_PURPOSE, ScriptedModelServer  # noqa: E402


@pytest.fixture(autouse=True)
def _no_real_provider() -> None:
    """The server process gets its model settings from ``console_server`` alone (the test
    process's environment is not passed on, so no real provider is reachable)."""


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def launch(
    scripted: ScriptedModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., ProcessServer]]:
    """``launch(database_url=None, env_overrides=None)``: ``veriloop serve`` in its own process
    (default: a fresh SQLite file), keyed for tenant_a (key-a) and tenant_b (key-b), its
    environment changed by ``env_overrides`` (None removes a variable); all stopped at the end."""
    started: list[ProcessServer] = []

    def start(
        database_url: str | None = None, env_overrides: dict[str, str | None] | None = None
    ) -> ProcessServer:
        root = tmp_path_factory.mktemp("console")
        (root / "workspace").mkdir()
        keep = ("PATH", "HOME", "LANG")
        env = {name: os.environ[name] for name in keep if name in os.environ}
        env.update(
            OPENAI_BASE_URL=scripted.base_url,
            OPENAI_API_KEY="test-key",
            VERILOOP_API_KEYS=",".join(f"{k}:{t}" for k, t in KEYS.items()),
            VERILOOP_LLM_MAX_RETRIES="0",
            VERILOOP_REPLAN_COOLDOWN_S="0",
            VERILOOP_TOOLS="plan_tools:TOOLS",
            VERILOOP_WORKSPACE=str(root / "workspace"),
            # The command-approval flow runs what a person approved; the python steps mark a file
            # outside their workspace, which only an unsandboxed step can.
            VERILOOP_PLAN_SHELL="host",
            PYTHONPATH=str(SERVER_TESTS),
            LANGSMITH_TRACING="false",
        )
        for name, value in (env_overrides or {}).items():  # None: not set at all
            env.pop(name, None) if value is None else env.__setitem__(name, value)
        server = ProcessServer(database_url or f"sqlite:///{root / 'veriloop.sqlite'}", env)
        started.append(server.launch())
        return server.ready()

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def console_server(launch: Callable[..., ProcessServer]) -> ProcessServer:
    """The module's server (SQLite)."""
    return launch()


@pytest.fixture(scope="module")
def api(console_server: ProcessServer) -> Iterator[httpx.Client]:
    """Tenant A's client of the module's server."""
    with console_server.client("key-a") as client:
        yield client


@pytest.fixture(scope="module")
def playbook(scripted: ScriptedModelServer) -> Playbook:
    """Browser tasks' model answers for the module (plan runs' scripted answers are queued per
    test); a module asks for it with ``pytest.mark.usefixtures("playbook")``."""
    book = Playbook()
    scripted.on(ANY_PURPOSE, book)
    return book


@pytest.fixture(scope="module")
def markers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The file the module's ``python_step`` steps mark (plan_tools' ``mark``)."""
    return tmp_path_factory.mktemp("markers") / "markers.txt"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context (its own sessionStorage) and page."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        yield page
    finally:
        context.close()
