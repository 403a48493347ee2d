"""Starting a ``veriloop serve`` process for a benchmark: a free loopback port, and the wait until
it answers ``/healthz``."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import httpx

START_TIMEOUT_S = 180.0
"""How long a service may take to answer /healthz (a loaded 2-core machine needs tens of seconds,
several workers starting together more than a minute)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_service(
    argv: list[str], env: dict[str, str], port: int, *, cwd: Path | None = None
) -> tuple[subprocess.Popen, str]:
    """Start ``argv`` (a serve command on ``port``) and wait until it is healthy: (process, URL).
    Exits the benchmark with a message when it does not come up."""
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"veriloop serve did not start on {url} (exit status {process.poll()})")
