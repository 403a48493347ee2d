"""The escape suite (issue 44): a hostile tenant holding an API key submits shell steps to a real
``veriloop serve --plan-shell sandboxed`` (real bubblewrap, real PostgreSQL), and each probe's
output or exit status shows what the step could do. Every probe must be blocked with the service
as root and again as an unprivileged user (the ``service`` fixture's two modes)."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from pathlib import Path

import pytest
from escape_kit import (
    ENV_SECRET,
    KEY_A,
    KEY_B,
    KEYS,
    LIMITS,
    OPERATOR_FILE,
    OPERATOR_SECRET,
    RUN_TIMEOUT_S,
    VICTIM_SECRET,
    Service,
    shell,
    start_run,
)
from service_testkit import wait_for_run

pytestmark = pytest.mark.postgres

SOCKET_PROBE = """
import socket, sys
targets = [("unix", p) for p in sys.argv[1:3]] + [("tcp", ("127.0.0.1", int(p))) for p in sys.argv[3:]]
for kind, where in targets:
    sock = socket.socket(socket.AF_UNIX if kind == "unix" else socket.AF_INET)
    sock.settimeout(3)
    try:
        sock.connect(where)
        print("OPEN", where)
    except OSError as exc:
        print("refused", where, type(exc).__name__)
print("tried", len(targets))
"""
FORK_PROBE = """
import os, time
n = 0
try:
    while n < 100:
        if os.fork() == 0:
            time.sleep(20)
            os._exit(0)
        n += 1
except OSError as exc:
    print("REFUSED", type(exc).__name__)
print("FORKED", n)
"""


def isolation_probes(service: Service) -> list[dict]:
    """Steps of tenant A's run, each trying one way out (they always exit 0: output tells)."""
    victim = service.run_folder("tenant_b", service.victim_run)
    store = Path(service.notes["victim_store"]["store"])
    blob = service.notes["victim_store"]["blob"]
    port = service.url.rsplit(":", 1)[1]
    return [
        shell(
            "mount",
            "mount -o remount,bind,rw / 2>&1; echo remount=$?; "
            "mount -t tmpfs none /mnt 2>&1; echo tmpfs=$?; "
            "touch /usr/escape-probe 2>&1 && echo WROTE-USR; true",
        ),
        shell(
            "umount",
            "umount -l /tmp 2>&1; echo umount-tmp=$?; umount -l /proc 2>&1; echo umount-proc=$?; "
            "unshare -r -m true 2>&1; echo unshare=$?; true",
        ),
        shell(
            "proc",
            "echo pids=$(ls /proc | grep -c '^[0-9]'); "
            "echo service-cmdline=$(cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' ' "
            "| grep -c 'plan-shel[l]'); "
            "echo service-environ=$(cat /proc/*/environ 2>/dev/null | grep -ac 'dotenv-secre[t]'); "
            "echo capeff=$(grep CapEff /proc/self/status | cut -f2); echo uid=$(id -u); true",
        ),
        shell(
            "sockets",
            f"python3 -c '{SOCKET_PROBE}' /var/run/postgresql/.s.PGSQL.5432 "
            f"/run/postgresql/.s.PGSQL.5432 5432 {port}; true",
        ),
        shell(
            "keys",
            f"cat {service.key_file} {service.dotenv} 2>&1; ls -a {service.base} 2>&1; "
            "printenv; true",
        ),
        shell("shadow", "cat /etc/shadow /etc/gshadow 2>&1; echo read=$?; true"),
        shell(
            "other_runs",
            f"cat {victim}/secret.txt {blob} 2>/dev/null; "
            f"ls -A {victim} {store} 2>/dev/null | sed 's/^/victim-entry:/'; "
            f"echo runs=$(ls -A {service.workspace_base}/runs 2>/dev/null); "
            f"echo snapshots=$(ls -A {store.parent} 2>/dev/null); "
            # What a step writes there lands in its sandbox at most, never on the host.
            f"echo x > {victim}/planted; echo x > {service.workspace_base}/runs/planted; true",
        ),
        shell(
            "data_dir",
            f"cat {service.data_dir}/{OPERATOR_FILE} 2>/dev/null; "
            f"echo data=$(ls -A {service.data_dir} 2>/dev/null); "
            f"echo x > {service.data_dir}/planted 2>/dev/null; true",
        ),
    ]


def limit_probes() -> list[dict]:
    """Steps that each pass one limit (small ones, given to serve: see conftest.LIMITS)."""
    chain = []
    steps = [
        shell("memory", "python3 -c 'b = bytearray(512 << 20); print(\"ALLOCATED\")'"),
        shell("processes", f"python3 -c '{FORK_PROBE}'"),
        shell("file_size", "head -c 16M /dev/zero > big; echo rc=$?; stat -c size=%s big"),
        shell("cpu", "python3 -c 'while True: pass'", timeout_s=100),
        shell(
            "disk_outside",  # the sandbox's own folders outside the workspace count too
            "for i in 1 2 3 4 5 6; do head -c 7M /dev/zero > ../f$i || exit 1; done; "
            "echo WROTE-ALL",
            timeout_s=100,
        ),
        shell(
            "disk",
            "for i in 1 2 3 4 5 6 7 8; do head -c 7M /dev/zero > f$i; sleep 1; done; "
            "echo WROTE-ALL",
            timeout_s=100,
        ),
    ]
    for step in steps:  # one at a time: a limit one step meets must not be another's
        chain.append({**step, "depends_on": [chain[-1]["id"]]} if chain else step)
        chain[-1]["on_failure"] = "continue"
    return chain


@pytest.fixture(scope="module")
def isolation(service: Service) -> dict[str, dict]:
    with service.client(KEY_A) as client:
        run_id = start_run(client, {"steps": isolation_probes(service)}, "probes")
        report = wait_for_run(client, run_id, RUN_TIMEOUT_S)
    return report["steps"]


@pytest.fixture(scope="module")
def limits(service: Service) -> dict[str, dict]:
    with service.client(KEY_A) as client:
        run_id = start_run(client, {"steps": limit_probes()}, "limits")
        report = wait_for_run(client, run_id, RUN_TIMEOUT_S)
    return report["steps"]


def stdout(steps: dict[str, dict], step_id: str) -> str:
    step = steps[step_id]
    assert step["output"] is not None, step
    return step["output"]["stdout"] + step["output"].get("stderr", "")


def values(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


# -- privilege ------------------------------------------------------------------------------


def test_remount_and_new_mounts_are_refused(isolation) -> None:
    seen = values(stdout(isolation, "mount"))
    assert seen["remount"] != "0" and seen["tmpfs"] != "0", seen
    assert "WROTE-USR" not in stdout(isolation, "mount")
    assert not Path("/usr/escape-probe").exists()


def test_umount_and_new_namespaces_are_refused(isolation) -> None:
    seen = values(stdout(isolation, "umount"))
    assert {seen["umount-tmp"], seen["umount-proc"], seen["unshare"]} & {"0"} == set(), seen


def test_no_capability_no_root_no_host_process_in_sight(isolation, service) -> None:
    seen = values(stdout(isolation, "proc"))
    assert int(seen["capeff"], 16) == 0, seen
    assert seen["uid"] != "0", seen
    assert int(seen["pids"]) <= 10, seen  # the sandbox's own few, not the host's
    assert seen["service-cmdline"] == "0" and seen["service-environ"] == "0", seen


# -- reach ------------------------------------------------------------------------------------


def test_the_database_socket_and_loopback_are_out_of_reach(isolation) -> None:
    out = stdout(isolation, "sockets")
    assert "tried 4" in out, out
    assert "OPEN" not in out, out


def test_the_key_file_dotenv_and_environment_leak_nothing(isolation, service) -> None:
    out = stdout(isolation, "keys")
    digests = [hashlib.sha256(key.encode()).hexdigest() for key in KEYS]
    for secret in (*KEYS, *digests, ENV_SECRET, "OPENAI_API_KEY", "VERILOOP_"):
        assert secret not in out, secret
    # On the host: the key file holds digests only (migrated at start-up), no key in clear, and
    # no key is in the service's log or anywhere in its data directory.
    text = service.key_file.read_text()
    assert all(key not in text for key in KEYS) and all(d in text for d in digests)
    log = (service.base / "serve.log").read_bytes()
    assert all(key.encode() not in log for key in KEYS)
    for path in service.data_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            assert all(key.encode() not in data for key in KEYS), path


def test_etc_shadow_is_not_readable(isolation) -> None:
    out = stdout(isolation, "shadow")
    assert "root:" not in out, out


def test_another_tenants_run_folder_and_snapshots_are_out_of_reach(isolation, service) -> None:
    out = stdout(isolation, "other_runs")
    seen = values(out)
    assert VICTIM_SECRET not in out and "victim-entry:" not in out, out
    own = service.run_folder("tenant_a", "probes").name
    assert seen["runs"] == own, seen  # its own folder, nothing beside it
    assert "tenant_b" not in seen["snapshots"], seen
    victim = service.run_folder("tenant_b", service.victim_run)
    assert not (victim / "planted").exists()
    assert not (service.workspace_base / "runs" / "planted").exists()
    with service.client(KEY_A) as client:  # nor over HTTP
        assert client.get(f"/api/plans/{service.victim_run}").status_code == 404


def test_the_data_dir_is_out_of_reach_and_private(isolation, service) -> None:
    out = stdout(isolation, "data_dir")
    seen = values(out)
    assert OPERATOR_SECRET not in out, out
    # At most the empty folders leading to the step's own workspace.
    assert seen["data"] in ("", "workspace"), seen
    assert not (service.data_dir / "planted").exists()
    for folder in (service.data_dir, service.data_dir / "tmp", service.workspace_base / "runs"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


# -- limits -----------------------------------------------------------------------------------


def test_memory_is_limited(limits) -> None:
    assert limits["memory"]["status"] != "completed"
    out = stdout(limits, "memory")
    assert "ALLOCATED" not in out and "MemoryError" in out, out


def test_processes_are_limited(limits) -> None:
    out = stdout(limits, "processes")
    assert "REFUSED" in out, out
    assert int(values(out.replace("FORKED ", "forked="))["forked"]) < LIMITS["processes"]


def test_file_size_is_limited(limits) -> None:
    seen = values(stdout(limits, "file_size"))
    assert seen["rc"] != "0" and int(seen["size"]) <= LIMITS["file_mb"] << 20, seen


def test_cpu_time_is_limited(limits) -> None:
    step = limits["cpu"]
    assert step["status"] != "completed"
    assert "timed out" not in (step["attempts"][-1]["error"] or ""), step["attempts"][-1]


def test_disk_is_limited(limits) -> None:
    step = limits["disk"]
    assert step["status"] != "completed"
    assert "WROTE-ALL" not in stdout(limits, "disk")
    assert "disk" in (step["attempts"][-1]["error"] or "").lower(), step["attempts"][-1]


def test_nothing_outside_the_workspace_takes_more_than_the_disk_limit(limits) -> None:
    out = stdout(limits, "disk_outside")
    assert "WROTE-ALL" not in out, out


def test_a_timeout_past_the_operators_maximum_is_refused_at_submission(service) -> None:
    manifest = {"steps": [shell("long", "true", timeout_s=100_000_000)]}
    with service.client(KEY_A) as client:
        response = client.post("/api/plans", json={"manifest": manifest, "runId": "long"})
        assert response.status_code == 422, response.text
        assert str(LIMITS["max_timeout_s"]) in response.text
        assert client.get("/api/plans/long").status_code == 404


# -- what a step leaves ---------------------------------------------------------------------


def host_processes_matching(needle: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if needle in cmdline and "pytest" not in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


def test_no_setuid_file_no_process_survives_and_a_finished_run_leaves_nothing(service) -> None:
    manifest = {
        "steps": [
            shell(
                "leave",
                "cp /bin/sh suid-sh && chmod 6755 suid-sh; stat -c mode=%a suid-sh; "
                "mkdir -p d && cp /bin/sh d/g && chmod 2755 d/g; "
                "(sleep 3117 &); setsid sleep 3118 & nohup sleep 3119 >/dev/null 2>&1 & echo left",
            ),
            {"id": "hold", "executor": "human", "question": "Done?", "depends_on": ["leave"]},
        ]
    }
    with service.client(KEY_A) as client:
        run_id = start_run(client, manifest, "leftovers")
        report = wait_for_run(client, run_id, RUN_TIMEOUT_S)
        assert report["status"] == "awaiting_review", report
        folder = service.run_folder("tenant_a", run_id)
        for name in ("suid-sh", "d/g"):
            mode = (folder / name).lstat().st_mode
            assert not mode & (stat.S_ISUID | stat.S_ISGID), (name, oct(mode))
        deadline = time.monotonic() + 10
        while (left := host_processes_matching("sleep 311")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, left

        response = client.post(
            f"/api/plans/{run_id}/reviews", json={"decisions": {"hold": {"approved": True}}}
        )
        assert response.status_code == 202, response.text
        assert wait_for_run(client, run_id, RUN_TIMEOUT_S)["status"] == "completed"
    assert not folder.exists()
    assert not service.snapshot_store("tenant_a", run_id).exists()
    with service.client(KEY_B) as client:  # tenant B's paused run keeps its folder
        assert client.get(f"/api/plans/{service.victim_run}").json()["status"] == "awaiting_review"
    assert (service.run_folder("tenant_b", service.victim_run) / "secret.txt").exists()
