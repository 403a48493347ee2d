"""Extension test fixtures: one browser with the extension, one service, the demo app."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Playwright, sync_playwright

from veriloop.extension_bundle import launch_with_extension, write_extension
from veriloop.llm.scripted import ScriptedModelServer
from veriloop.runners.demo.playbook import DemoPlaybook
from veriloop.runners.demo.server import DemoAppServer

# importlib mode: let the tests import extension_kit, and it the service tests' kit
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
sys.path.insert(0, str(Path(__file__).parent))

from extension_kit import Extension, Service, chromium  # noqa: E402


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    with DemoPlaybook().install(ScriptedModelServer()) as server:
        yield server


@pytest.fixture(scope="module")
def service(
    model: ScriptedModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    running = Service(tmp_path_factory.mktemp("service"), model.base_url).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def extension(
    playwright: Playwright, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Extension]:
    executable = chromium()
    folder = write_extension(tmp_path_factory.mktemp("extension") / "veriloop")
    profile = tmp_path_factory.mktemp("profile")
    context, extension_id = launch_with_extension(
        playwright, folder, profile, executable_path=executable
    )
    try:
        yield Extension(context, extension_id, folder)
    finally:
        context.close()


@pytest.fixture
def demo_app() -> Iterator[DemoAppServer]:
    with DemoAppServer() as app:
        yield app
