"""Helpers of the console tests (conftest.py puts this folder on sys.path)."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


def sign_in(page: Page, url: str, key: str = "key-a") -> None:
    """Open ``url``, give the key the page asks for, wait for the page's content."""
    page.goto(url)
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Open the console").click()
    page.locator("#key-form").wait_for(state="detached")


def screenshot(page: Page, name: str) -> None:
    """A screenshot for docs/console.md (docs/images/console_<name>.png)."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(IMAGES / f"console_{name}.png"), full_page=True)
