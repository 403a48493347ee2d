"""Helpers of the extension tests (conftest puts this folder on sys.path). The extension in a real Chromium: the unpacked extension (as ``veriloop extension path`` writes
it), a real ``veriloop serve`` answered by the scripted demo playbook, and the demo app.

One browser per module (a persistent context: extensions need a profile); tests share it and
open their own tabs. The side panel is driven as a page (``chrome-extension://ID/sidepanel.html
?tab=N``), pinned to the tab the task runs in.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, Worker
from service_testkit import free_port, wait_healthy

from veriloop.llm.endpoint import SCRIPTED_MODEL
from veriloop.runners.browser.client import ChromiumNotFound, chromium_path

API_KEY = "ext-key"
FINAL_STATES = ("completed", "failed", "paused", "stopped")
DOCS_IMAGES = Path(os.environ.get("VERILOOP_SCREENSHOTS") or tempfile.gettempdir())
"""Where the screenshots for docs/extension.md go: ``VERILOOP_SCREENSHOTS=docs/images`` refreshes
the documentation's; unset, a test run leaves the checkout alone."""


def chromium() -> str:
    try:
        return chromium_path()
    except ChromiumNotFound as exc:
        pytest.skip(f"Chromium is not installed: {exc}")


@dataclass
class Service:
    """``veriloop serve`` in its own process, restartable on the same port and data."""

    data_dir: Path
    model_url: str | None
    """The scripted model's URL; None: a service with no model configured."""
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Service:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": self.model_url,
            "OPENAI_API_KEY": "scripted",
            "VERILOOP_MODEL": SCRIPTED_MODEL,  # priced at $0, as a scripted demo is
            "VERILOOP_API_KEYS": f"{API_KEY}:extension-tests",
            "VERILOOP_PAGE_PROCESSES": "0",
            "VERILOOP_LLM_MAX_RETRIES": "0",
            "VERILOOP_RETRY_AFTER_S": "1",  # a scripted provider failure is a 503 at once
        }
        env.pop("VERILOOP_DATABASE_URL", None)
        if self.model_url is None:
            for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "VERILOOP_MODEL"):
                env.pop(name, None)
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "veriloop",
                "serve",
                "--port",
                str(self.port),
                "--data-dir",
                str(self.data_dir),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_healthy(self.url, self.process, lambda: "(its output is not kept)")
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=30)


@dataclass
class Extension:
    """The browser with the extension loaded, and handles to drive it."""

    context: BrowserContext
    id: str
    folder: Path

    @property
    def worker(self) -> Worker:
        workers = [w for w in self.context.service_workers if self.id in w.url]
        if workers:
            return workers[0]
        return self.context.wait_for_event("serviceworker", timeout=15000)

    def configure(self, service_url: str, api_key: str = API_KEY) -> None:
        self.worker.evaluate(
            "s => chrome.storage.local.set({settings: s})",
            {"serviceUrl": service_url, "apiKey": api_key},
        )

    def open_app(self, url: str) -> tuple[Page, int]:
        """A new tab on ``url`` and its chrome.tabs id."""
        page = self.context.new_page()
        page.goto(url)
        tab_id = self.worker.evaluate(
            "async u => (await chrome.tabs.query({})).find(t => t.url === u).id", page.url
        )
        return page, tab_id

    def panel(self, tab_id: int) -> Page:
        """The side panel page (a side panel's width), pinned to ``tab_id``."""
        page = self.context.new_page()
        page.set_viewport_size({"width": 420, "height": 900})
        page.goto(f"chrome-extension://{self.id}/sidepanel.html?tab={tab_id}")
        return page

    def record(self, tab_id: int) -> dict:
        return self.worker.evaluate(
            f"async () => (await chrome.storage.local.get('tab:{tab_id}'))['tab:{tab_id}']"
        )


def wait_forgotten(extension: Extension, tab_id: int) -> None:
    """Until the extension's storage holds nothing for ``tab_id`` (its task record and its
    request being sent)."""
    extension.worker.evaluate(
        """async id => { for (;;) {
            const keys = Object.keys(await chrome.storage.local.get(null));
            if (!keys.includes(`tab:${id}`) && !keys.includes(`pending:${id}`)) return;
            await new Promise(r => setTimeout(r, 50));
        } }""",
        tab_id,
    )


def steps(record: dict) -> list[int]:
    """The step indexes the panel recorded for the tab's task, in order."""
    return [step["stepIndex"] for step in record["task"]["steps"]]


def wait_steps(panel: Page, count: int, timeout_s: float = 60) -> None:
    """Until the panel lists ``count`` steps."""
    panel.wait_for_function(
        "n => document.querySelectorAll('#steps > li').length >= n",
        arg=count,
        timeout=timeout_s * 1000,
    )


@contextmanager
def task_in_new_tab(extension: Extension, url: str, goal: str) -> Iterator[tuple[Page, int, Page]]:
    """A new tab on ``url``, its side panel, and ``goal`` started there: (tab page, tab id, panel)."""
    page, tab_id = extension.open_app(url)
    panel = extension.panel(tab_id)
    start_task(panel, goal)
    try:
        yield page, tab_id, panel
    finally:
        page.close()
        panel.close()


def assert_each_step_once(record: dict) -> None:
    """The task's steps are 0, 1, 2, ...: none recorded (or executed) twice, none lost."""
    assert steps(record) == list(range(len(record["task"]["steps"])))


def start_task(panel: Page, goal: str) -> None:
    panel.fill("#goal", goal)
    panel.click("#start")


def wait_final(panel: Page, timeout_s: float = 90) -> str:
    """The panel's status badge once the task stops running."""
    panel.wait_for_function(
        "states => states.includes(document.querySelector('#status')?.textContent)",
        arg=list(FINAL_STATES),
        timeout=timeout_s * 1000,
    )
    return panel.text_content("#status")
