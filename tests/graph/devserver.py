"""`langgraph dev` on a free loopback port for the Studio tests (no network, no analytics)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).parent / "langgraph"
STARTUP_S = 120


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def langgraph_dev(log_path: Path, **env: str) -> Iterator[str]:
    """Serve langgraph.json's graphs; yields the base URL once ``/ok`` answers, stops afterwards.

    The environment is this process's (OPENAI_BASE_URL pointing at a scripted model server)
    plus ``env``.
    """
    port = free_port()
    environment = {
        **os.environ,
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        **env,
    }
    log = log_path.open("w")
    process = subprocess.Popen(
        [str(LANGGRAPH), "dev", "--config", str(REPO / "langgraph.json"), "--host", "127.0.0.1",
         "--port", str(port), "--no-browser", "--no-reload"],
        cwd=REPO, env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"langgraph dev exited with {process.returncode}:\n{tail(log_path)}")
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"langgraph dev not ready after {STARTUP_S}s:\n{tail(log_path)}")
            time.sleep(0.5)
        yield url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        log.close()


def tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:]
