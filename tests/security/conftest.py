"""A real ``veriloop serve --plan-shell sandboxed`` per mode (the service as root, then as an
unprivileged user), on a throwaway PostgreSQL database, with API keys for two tenants.

Each mode's server is shared by the module (one start each). Tenant B owns a run paused at a
review, with a secret file in its workspace and the secret's pre-step copy in its snapshot store:
what tenant A's probes try to reach.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

# importlib mode: let the tests import escape_kit, and it the service tests' kit
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
sys.path.insert(0, str(Path(__file__).parent))

from escape_kit import (  # noqa: E402
    ENV_SECRET,
    KEYS,
    OPERATOR_FILE,
    OPERATOR_SECRET,
    PG_ADMIN_URL,
    REPO,
    SERVICE_UID,
    START_TIMEOUT_S,
    Service,
    open_for_others,
    serve_command,
    start_victim,
)
from service_testkit import free_port, wait_healthy  # noqa: E402


@contextmanager
def throwaway_database() -> Iterator[str]:
    """A PostgreSQL database of its own for one server, dropped afterwards."""
    name = f"veriloop_escape_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module", params=["root", "user"])
def service(request) -> Iterator[Service]:
    """``veriloop serve`` as root, or under setpriv as an unprivileged uid owning its data dir."""
    with throwaway_database() as database_url:
        yield from _serve(request.param, database_url)


def _serve(mode: str, database_url: str) -> Iterator[Service]:
    base = Path(tempfile.mkdtemp(prefix=f"veriloop-escape-{mode}-", dir="/var/tmp"))
    data_dir = base / "data"
    key_file = base / "keys"
    key_file.write_text("".join(f"{key}:{tenant}\n" for key, tenant in KEYS.items()))
    key_file.chmod(0o600)
    dotenv = base / ".env"
    dotenv.write_text(f"SERVICE_SECRET={ENV_SECRET}\n")
    dotenv.chmod(0o600)
    prefix: list[str] = []
    opened: dict[Path, int] = {}
    if mode == "user":
        # The service's own files are its own; the code it runs must be reachable by its user
        # (test setup only: an interpreter under root's 0700 home is not, until opened here).
        for path in (base, key_file, dotenv):
            os.chown(path, SERVICE_UID, SERVICE_UID)
        base.chmod(0o700)
        opened = open_for_others(
            [Path(sys.executable), Path(sys.base_prefix), Path(sys.prefix), REPO]
        )
        prefix = ["setpriv", f"--reuid={SERVICE_UID}", f"--regid={SERVICE_UID}", "--clear-groups"]
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(base),
        "LANG": "C.UTF-8",
        "VERILOOP_API_KEYS_FILE": str(key_file),
        "SERVICE_SECRET": ENV_SECRET,
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_API_KEY": "sk-escape-probe-unused",
        "VERILOOP_LLM_MAX_RETRIES": "0",
        "LANGSMITH_TRACING": "false",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    log = (base / "serve.log").open("wb")
    process = subprocess.Popen(
        [*prefix, *serve_command(port, data_dir, database_url)],
        cwd=base,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    service = Service(mode, f"http://127.0.0.1:{port}", base, data_dir, key_file, dotenv, process)
    try:
        wait_healthy(service.url, process, (base / "serve.log").read_text, START_TIMEOUT_S)
        (data_dir / OPERATOR_FILE).write_text(OPERATOR_SECRET)
        service.notes["victim_store"] = start_victim(service)
        yield service
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        log.close()
        shutil.rmtree(base, ignore_errors=True)
        for folder, original in opened.items():
            folder.chmod(original)
