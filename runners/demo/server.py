"""The demo app's loopback HTTP server: static files from package data plus a small JSON API.

The API is the app's own record of what happened, so the demo judges a task
by the app's data (``GET /api/patients``, ``GET /api/settings``,
``GET /api/state``), never by what the agent claims.
"""

from __future__ import annotations

import json
import threading
from copy import deepcopy
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

STATIC_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css"}
SEED_PATIENTS = (
    {"name": "Maria Garcia", "dob": "1984-03-12", "consent": True},
    {"name": "Tom Becker", "dob": "1979-11-02", "consent": False},
    {"name": "Aiko Tanaka", "dob": "1992-07-25", "consent": True},
)
SETTINGS_CHOICES = {"theme": ("light", "dark", "system"), "page_size": (10, 25, 50)}


class DemoAppData:
    """The app's records: patients, settings and the searches people ran (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._patients = [dict(p) for p in SEED_PATIENTS]
        self._settings: dict[str, Any] = {"theme": "light", "page_size": 10}
        self._searches: list[str] = []

    def patients(self, query: str = "", *, record: bool = False) -> list[dict[str, Any]]:
        needle = query.strip().lower()
        with self._lock:
            if record and needle:
                self._searches.append(query.strip())
            return [dict(p) for p in self._patients if needle in p["name"].lower()]

    def add_patient(self, body: dict[str, Any]) -> dict[str, Any]:
        name = str(body.get("name") or "").strip()
        if not name:
            raise ValueError("Full name is required")
        patient = {
            "name": name,
            "dob": body.get("dob") or None,
            "consent": bool(body.get("consent")),
        }
        with self._lock:
            self._patients.append(patient)
        return dict(patient)

    def update_settings(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            for key, value in body.items():
                choices = SETTINGS_CHOICES.get(key)
                if choices is None:
                    raise ValueError(f"unknown setting {key!r}")
                typed = type(choices[0])(value)
                if typed not in choices:
                    raise ValueError(f"{key} must be one of {list(choices)}")
                self._settings[key] = typed
            return dict(self._settings)

    def snapshot(self) -> dict[str, Any]:
        """Everything, for ``GET /api/state``."""
        with self._lock:
            return {
                "patients": deepcopy(self._patients),
                "settings": dict(self._settings),
                "searches": list(self._searches),
            }


class DemoAppServer:
    """Serves the demo app on 127.0.0.1 in a daemon thread; use as a context manager."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.data = DemoAppData()
        self._httpd = ThreadingHTTPServer((host, port), _handler(self.data))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="demo-app", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/"

    def start(self) -> DemoAppServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> DemoAppServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler(data: DemoAppData) -> type[BaseHTTPRequestHandler]:
    static = resources.files("veriloop.runners.demo").joinpath("app")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            """Quiet: the demo prints its own progress."""

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/api/patients":
                query = parse_qs(url.query).get("q", [""])[0]
                self._json(200, {"patients": data.patients(query, record=True)})
            elif url.path == "/api/settings":
                self._json(200, data.snapshot()["settings"])
            elif url.path == "/api/state":
                self._json(200, data.snapshot())
            else:
                self._static(url.path)

        def do_POST(self) -> None:
            if urlsplit(self.path).path != "/api/patients":
                self._json(404, {"error": f"no route POST {self.path}"})
                return
            self._apply(data.add_patient, created=True)

        def do_PUT(self) -> None:
            if urlsplit(self.path).path != "/api/settings":
                self._json(404, {"error": f"no route PUT {self.path}"})
                return
            self._apply(data.update_settings)

        def _apply(self, change, *, created: bool = False) -> None:
            try:
                body = json.loads(
                    self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}"
                )
                if not isinstance(body, dict):
                    raise ValueError("the body must be a JSON object")
                result = change(body)
            except (ValueError, TypeError) as exc:
                self._json(400, {"error": str(exc)})
                return
            self._json(201 if created else 200, result)

        def _static(self, path: str) -> None:
            name = "index.html" if path in ("", "/") else path.lstrip("/")
            suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
            target = static.joinpath(name)
            if "/" in name or suffix not in STATIC_TYPES or not target.is_file():
                self._json(404, {"error": f"not found: {path}"})
                return
            self._send(200, target.read_bytes(), STATIC_TYPES[suffix])

        def _json(self, status: int, payload: Any) -> None:
            self._send(status, json.dumps(payload).encode(), "application/json")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status, HTTPStatus(status).phrase)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

    return Handler
