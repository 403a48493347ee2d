"""Headless Chromium through Playwright: launch it off the network, snapshot pages, execute actions.

Every page gets the one snapshot script (``snapshot.js``, the page contract) as
an init script, so each document numbers its elements and keeps its own
witness of network, DOM and URL changes since the last action.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from veriloop.schemas.actions import Action
from veriloop.schemas.observation import ClientObservations, ClientVerification
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR

CHROMIUM_ENV = "VERILOOP_CHROMIUM"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
# Keep the browser to the pages it is asked for: no updates, sync, QUIC, metrics or other background traffic.
# (No --disable-features here: Chromium keeps only the last one, which would drop Playwright's own list.)
OFFLINE_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--metrics-recording-only",
)
SCROLL_SCRIPT = """direction => {
  const step = Math.round(window.innerHeight * 0.8);
  if (direction === "up") window.scrollBy(0, -step);
  else if (direction === "down") window.scrollBy(0, step);
  else if (direction === "top") window.scrollTo(0, 0);
  else window.scrollTo(0, document.documentElement.scrollHeight);
}"""
_MISSING = "__veriloop_missing__"
_CONTEXT_GONE = (
    "Execution context was destroyed",
    "navigation",
    "Target page, context or browser has been closed",
)


class ChromiumNotFound(RuntimeError):
    """No Chromium executable where we were told to look."""


@cache
def snapshot_script() -> str:
    """The text of ``snapshot.js`` (package data)."""
    return (
        resources.files("veriloop.runners.browser")
        .joinpath("snapshot.js")
        .read_text(encoding="utf-8")
    )


def chromium_path(explicit: str | None = None) -> str:
    """The Chromium to launch: ``explicit``, else ``$VERILOOP_CHROMIUM``, else Debian's ``/usr/bin/chromium``."""
    candidate = explicit or os.environ.get(CHROMIUM_ENV) or DEFAULT_CHROMIUM
    resolved = shutil.which(candidate) or (candidate if Path(candidate).is_file() else None)
    if not resolved:
        raise ChromiumNotFound(
            f"no Chromium at {candidate!r}: install Debian's (sudo apt-get install chromium) "
            f"or point {CHROMIUM_ENV} at a Chromium/Chrome executable"
        )
    return resolved


@dataclass(frozen=True)
class Snapshot:
    """One capture of the page, as the snapshot script returned it."""

    url: str
    dom: str
    active_element: str | None
    client_observations: ClientObservations
    settled: bool
    """False when the page was still busy at the 5 s cap."""
    stability_wait_ms: float
    serialize_ms: float
    total_ms: float
    """The whole capture as the runner saw it (wait + numbering + serialization + transfer)."""


@dataclass(frozen=True)
class Execution:
    """What executing one action did on the client side."""

    ok: bool
    error: str | None = None
    client_verification: ClientVerification | None = None
    """Set when the action's element was not on the page."""
    duration_ms: float = 0.0


class ChromiumBrowser:
    """Debian's Chromium under Playwright, headless unless asked otherwise; a context manager.

    Playwright's ``launch`` gives every browser a fresh temporary profile
    (user-data dir), removed on close.
    """

    def __init__(
        self,
        *,
        executable_path: str | None = None,
        headless: bool = True,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.executable_path = chromium_path(executable_path)
        self.headless = headless
        self.args = (*OFFLINE_FLAGS, *extra_args)
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None

    def start(self) -> ChromiumBrowser:
        if self._browser is None:
            self._playwright = sync_playwright().start()
            try:
                self._browser = self._playwright.chromium.launch(
                    executable_path=self.executable_path,
                    headless=self.headless,
                    args=list(self.args),
                )
            except Exception:
                self._playwright.stop()
                self._playwright = None
                raise
        return self

    def close(self) -> None:
        if self._browser is not None:
            self._browser.close()
            self._browser = None
        if self._playwright is not None:
            self._playwright.stop()
            self._playwright = None

    def __enter__(self) -> ChromiumBrowser:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def new_session(
        self, *, viewport: tuple[int, int] = (1280, 800), action_timeout_s: float = 3.0
    ) -> PageSession:
        """A fresh context (cookies, storage) with one tab that carries the snapshot script."""
        if self._browser is None:
            raise RuntimeError(
                "the browser is not started; use it as a context manager or call start()"
            )
        context = self._browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
        context.add_init_script(snapshot_script())
        return PageSession(context, context.new_page(), action_timeout_s=action_timeout_s)


@dataclass
class PageSession:
    """One tab: snapshot it, execute actions on it, screenshot it."""

    context: BrowserContext
    page: Page
    action_timeout_s: float = 3.0
    navigation_timeout_s: float = 15.0
    snapshot_options: dict = field(default_factory=dict)
    """Overrides of the script's stability numbers (networkIdleMs, domQuietMs, minWaitMs, maxWaitMs)."""

    def close(self) -> None:
        self.context.close()

    def goto(self, url: str) -> None:
        self.page.goto(url, wait_until="domcontentloaded", timeout=self.navigation_timeout_s * 1000)

    def _call(self, method: str, arg: object = None) -> object:
        """Call ``window.__veriloop.<method>(arg)``; across a navigation, wait for the new document."""
        expression = f"arg => window.__veriloop ? window.__veriloop.{method}(arg) : {_MISSING!r}"
        for attempt in range(5):
            try:
                result = self.page.evaluate(expression, arg)
                if result != _MISSING:
                    return result
                # A document the init script did not reach (opened before the session): install now.
                self.page.evaluate(snapshot_script())
            except PlaywrightError as exc:
                if (
                    attempt == 4
                    or self.page.is_closed()
                    or not any(m in str(exc) for m in _CONTEXT_GONE)
                ):
                    raise
                self.page.wait_for_load_state(
                    "domcontentloaded", timeout=self.navigation_timeout_s * 1000
                )
        raise RuntimeError(f"the snapshot script could not be installed on {self.page.url}")

    def mark_action(self) -> None:
        """Start the witness window: what the page does from now on is the action's effect."""
        self._call("markAction")

    def snapshot(self, *, since_url: str | None = None, wait: bool = True) -> Snapshot:
        """Wait for stability (unless ``wait`` is False) and capture the page."""
        options = {**self.snapshot_options, "wait": wait}
        if since_url is not None:
            options["sinceUrl"] = since_url
        started = time.perf_counter()
        raw = self._call("snapshot", options)
        total_ms = (time.perf_counter() - started) * 1000
        stability = raw.get("stability") or {}
        return Snapshot(
            url=raw["url"],
            dom=raw["dom"],
            active_element=raw.get("activeElement"),
            client_observations=ClientObservations.model_validate(
                raw.get("clientObservations") or {}
            ),
            settled=bool(stability.get("settled", True)),
            stability_wait_ms=float(stability.get("waitedMs", 0)),
            serialize_ms=float(stability.get("serializeMs", 0)),
            total_ms=total_ms,
        )

    def screenshot(self) -> bytes:
        return self.page.screenshot(type="png")

    def execute(self, action: Action) -> Execution:
        """Run one action; a missing element or a refused action is reported, never raised."""
        started = time.perf_counter()
        try:
            result = self._run(action)
        except PlaywrightError as exc:
            result = Execution(ok=False, error=_first_line(exc))
        return Execution(
            ok=result.ok,
            error=result.error,
            client_verification=result.client_verification,
            duration_ms=(time.perf_counter() - started) * 1000,
        )

    def _run(self, action: Action) -> Execution:
        page = self.page
        timeout = self.action_timeout_s * 1000
        kind = action.kind
        if kind in ("finish", "fail"):
            return Execution(ok=True)
        if kind == "navigate":
            self.goto(action.text or "")
        elif kind == "refresh":
            page.reload(wait_until="domcontentloaded", timeout=self.navigation_timeout_s * 1000)
        elif kind == "go_back":
            if (
                page.go_back(
                    wait_until="domcontentloaded", timeout=self.navigation_timeout_s * 1000
                )
                is None
            ):
                return Execution(ok=False, error="goBack(): there is no previous page")
        elif kind == "wait":
            page.wait_for_timeout((action.seconds or 0) * 1000)
        elif kind == "press" and action.element_id is None:
            page.keyboard.press(action.text or "")
        elif kind == "scroll" and action.element_id is None:
            page.evaluate(SCROLL_SCRIPT, action.text)
        else:
            selector = f'[{ELEMENT_ID_ATTR}="{action.element_id}"]'
            target = page.locator(selector)
            if target.count() == 0:
                return Execution(
                    ok=False,
                    error=f"{action}: no element {action.element_id} on the page",
                    client_verification=ClientVerification(element_found=False, selector=selector),
                )
            target = target.first
            if kind == "click":
                target.click(timeout=timeout)
            elif kind == "set_value":
                _set_value(target, action.text or "", timeout)
            elif kind == "select_option":
                target.select_option(action.text, timeout=timeout)
            elif kind == "press":
                target.press(action.text or "", timeout=timeout)
            elif kind == "scroll":
                target.scroll_into_view_if_needed(timeout=timeout)
        return Execution(ok=True)


_TRUE_WORDS = frozenset({"true", "on", "yes", "1", "checked"})


def _set_value(target, text: str, timeout: float) -> None:
    """Type into a field; a checkbox/radio takes true/false, a select takes an option."""
    kind = target.evaluate(
        "el => el.tagName === 'SELECT' ? 'select' : (el.type || '').toLowerCase()"
    )
    if kind in ("checkbox", "radio"):
        target.set_checked(text.strip().lower() in _TRUE_WORDS, timeout=timeout)
    elif kind == "select":
        target.select_option(text, timeout=timeout)
    else:
        target.fill(text, timeout=timeout)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
