"""Runner fixtures: one headless Chromium per module, and a loopback server for fixture pages."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from veriloop.runners.browser.client import ChromiumBrowser, PageSession

PAGES = Path(__file__).parent / "pages"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:
        if self.path == "/api/ping":
            body, kind, status = json.dumps({"pong": True}).encode(), "application/json", 200
        else:
            page = PAGES / self.path.lstrip("/")
            if page.suffix == ".html" and page.is_file():
                body, kind, status = page.read_bytes(), "text/html; charset=utf-8", 200
            else:
                body, kind, status = b"not found", "text/plain", 404
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="session")
def pages_url() -> Iterator[str]:
    """Base URL of the fixture pages (tests/runner/pages) and GET /api/ping."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


@pytest.fixture(scope="module")
def browser() -> Iterator[ChromiumBrowser]:
    """One headless Chromium per test module (each test gets its own context).

    Module scope: the sync Playwright API allows one running instance per thread, and other
    suites (eval) start their own.
    """
    with ChromiumBrowser() as chromium:
        yield chromium


@pytest.fixture
def session(browser: ChromiumBrowser) -> Iterator[PageSession]:
    """A fresh context and tab with the snapshot script; short action timeout to keep failures fast."""
    page_session = browser.new_session(action_timeout_s=0.5)
    yield page_session
    page_session.close()
