"""Helpers of the console tests (conftest.py puts this folder on sys.path)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from playwright.sync_api import Page

SCREENSHOTS_ENV = "VERILOOP_SCREENSHOTS"
"""Where the screenshots go (``docs/images`` refreshes the documentation's); unset: a temp folder."""


def sign_in(page: Page, url: str, key: str = "key-a") -> None:
    """Open ``url``, give the key the page asks for, wait for the page's content."""
    page.goto(url)
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Open the console").click()
    page.locator("#key-form").wait_for(state="detached")


def screenshot(page: Page, name: str) -> None:
    """``console_<name>.png`` for docs/console.md, in ``$VERILOOP_SCREENSHOTS`` (a test
    run leaves the checkout alone unless asked), else beside the test's temporary files."""
    folder = Path(os.environ.get(SCREENSHOTS_ENV) or tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"console_{name}.png"), full_page=True)
