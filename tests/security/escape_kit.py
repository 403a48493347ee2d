"""What the escape suite shares: the service under test, its constants, and plan helpers."""

from __future__ import annotations

import hashlib
import stat
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from service_testkit import wait_for_run

from veriloop.plans import run_snapshot_store, run_workspace

REPO = Path(__file__).resolve().parents[2]
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
SERVICE_UID = 62000
"""The unprivileged service's uid and gid (no account needed)."""
KEYS = {"escape-key-tenant-a-0123456789": "tenant_a", "escape-key-tenant-b-9876543210": "tenant_b"}
KEY_A, KEY_B = KEYS
ENV_SECRET = "dotenv-secret-5d1f0c"
"""What the service's ``.env`` (in its working directory) holds."""
OPERATOR_FILE = "operator-notes.txt"
OPERATOR_SECRET = "operator-secret-77a0c3"
"""A file of the operator's in the data directory, and what it holds."""
VICTIM_SECRET = "tenant-b-secret-8f2e41"
"""What tenant B's run keeps in its workspace (and its snapshot store)."""
LIMITS = {
    "memory_mb": 256,
    "processes": 64,
    "cpu_s": 2,
    "file_mb": 8,
    "disk_mb": 32,
    "max_timeout_s": 120,
}
"""Small step limits for the probes, so the machine is never at risk (serve options)."""
START_TIMEOUT_S = 180.0
RUN_TIMEOUT_S = 150.0


@dataclass
class Service:
    """One running ``veriloop serve`` and what the probes aim at."""

    mode: str
    url: str
    base: Path
    data_dir: Path
    key_file: Path
    dotenv: Path
    process: subprocess.Popen
    victim_run: str = "victim"
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def workspace_base(self) -> Path:
        return self.data_dir / "workspace"

    def run_folder(self, tenant: str, run_id: str) -> Path:
        return run_workspace(self.workspace_base, f"{tenant}:{run_id}")

    def snapshot_store(self, tenant: str, run_id: str) -> Path:
        return run_snapshot_store(self.workspace_base, f"{tenant}:{run_id}")

    def client(self, key: str = KEY_A) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"X-API-Key": key}, timeout=60)


def start_run(client: httpx.Client, manifest: dict, run_id: str | None = None) -> str:
    run_id = run_id or uuid.uuid4().hex[:12]
    response = client.post("/api/plans", json={"manifest": manifest, "runId": run_id})
    assert response.status_code == 202, response.text
    return run_id


def shell(step_id: str, command: str, **more: Any) -> dict:
    """A shell step that is not retried."""
    return {"id": step_id, "command": command, "max_retries": 0, **more}


def open_for_others(paths: list[Path]) -> dict[Path, int]:
    """Let any user traverse to ``paths`` (the interpreter, the venv, the repository): o+x on each
    folder leading there that lacks it (such as root's 0700 home with pyenv inside). The modes
    changed, to restore."""
    changed: dict[Path, int] = {}
    for path in paths:
        for folder in reversed(path.resolve().parents):
            mode = stat.S_IMODE(folder.stat().st_mode)
            if not mode & stat.S_IXOTH and folder not in changed:
                changed[folder] = mode
                folder.chmod(mode | stat.S_IXOTH)
    return changed


def serve_command(port: int, data_dir: Path, database_url: str) -> list[str]:
    limits = [f"--limit-{name.replace('_', '-')}={value}" for name, value in LIMITS.items()]
    limits = [o.replace("--limit-max-timeout-s", "--max-timeout-s") for o in limits]
    return [
        sys.executable,
        "-m",
        "veriloop",
        "serve",
        "--host=127.0.0.1",
        f"--port={port}",
        "--plan-shell=sandboxed",
        f"--data-dir={data_dir}",
        f"--database-url={database_url}",
        *limits,
    ]


def start_victim(service: Service) -> dict[str, str]:
    """Tenant B's run: a secret in its workspace, snapshotted by a second step, then paused at a
    review so both stay while tenant A probes."""
    manifest = {
        "steps": [
            shell("secret", f"echo {VICTIM_SECRET} > secret.txt"),
            shell("later", "echo later > later.txt", depends_on=["secret"]),
            {"id": "hold", "executor": "human", "question": "Keep?", "depends_on": ["later"]},
        ]
    }
    with service.client(KEY_B) as client:
        start_run(client, manifest, service.victim_run)
        report = wait_for_run(client, service.victim_run, RUN_TIMEOUT_S)
    assert report["status"] == "awaiting_review", report
    digest = hashlib.sha256(f"{VICTIM_SECRET}\n".encode()).hexdigest()
    store = service.snapshot_store("tenant_b", service.victim_run)
    assert (store / digest[:2] / digest).is_file(), "the victim's snapshot holds its secret"
    return {"store": str(store), "blob": str(store / digest[:2] / digest)}
