"""Who may run what over HTTP (issue 28, item 1): a default service runs no process for a plan,
and with ``plan_shell=sandboxed`` a shell step cannot read the service's environment, write
outside its workspace or open a socket. A real server on loopback, real bubblewrap."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from service_testkit import python_step, wait_for_run
from typer.testing import CliRunner

from veriloop.cli import app
from veriloop.engines.plan.confinement.limits import MIB, Limits
from veriloop.engines.plan.confinement.sandbox import LAYERS
from veriloop.schemas.plan_outputs import ManifestDraft, StepDraft
from veriloop.server.settings import CONFINEMENT_SETTINGS, Settings

SECRET = "sk-service-secret-0123456789"


@pytest.fixture
def workspace(monkeypatch, tmp_path, scripted_model) -> Path:
    """The service's workspace, its test callables, and a secret in its environment."""
    root = tmp_path / "workspace"
    root.mkdir()
    monkeypatch.setenv("VERILOOP_TOOLS", "plan_tools:TOOLS")
    monkeypatch.setenv("VERILOOP_WORKSPACE", str(root))
    monkeypatch.setenv("VERILOOP_LLM_MAX_RETRIES", "0")
    monkeypatch.setenv("SERVICE_DB_PASSWORD", SECRET)
    return root


SHELL_MANIFESTS = {
    "shell step": {"steps": [{"id": "leak", "command": "printenv"}]},
    "command check": {
        "steps": [
            {
                "id": "check",
                "function": "mark",
                "input": {"name": "x"},
                "checks": [{"kind": "command", "command": "printenv > out"}],
            }
        ]
    },
    "test command": {"steps": [{"id": "tested", "input": "write code", "test_command": "pytest"}]},
    "requires testing": {
        "steps": [{"id": "tested", "input": "write code", "requires_testing": True}]
    },
    "nested plan": {
        "steps": [
            {
                "id": "outer",
                "plan": {"steps": [{"id": "inner", "cmd": "cat /proc/1/environ"}]},
            }
        ]
    },
    "yaml text": "steps:\n  - id: leak\n    run: printenv\n",
}


@pytest.mark.parametrize("kind", SHELL_MANIFESTS)
def test_a_default_service_refuses_a_manifest_that_runs_processes(
    kind, workspace, thread_server, sqlite_settings
) -> None:
    assert sqlite_settings.plan_shell == "off"  # the default
    server = thread_server(sqlite_settings)
    client = server.client()
    response = client.post("/api/plans", json={"manifest": SHELL_MANIFESTS[kind], "runId": "r1"})
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "manifest"]
    detail = error["msg"]
    assert "plan_shell=off" in detail and "veriloop serve --plan-shell" in detail
    step = {"command check": "'check'", "nested plan": "plan step 'outer': step 'inner'"}
    assert step.get(kind, "step '") in detail
    # Refused at submission: no run exists.
    assert client.get("/api/plans/r1").status_code == 404
    assert not list(workspace.rglob("*.*"))


def test_a_default_service_still_runs_the_operators_python_functions(
    workspace, thread_server, sqlite_settings, tmp_path
) -> None:
    client = thread_server(sqlite_settings).client()
    step = python_step("a", None)  # its process is sandboxed: no marker outside its workspace
    response = client.post("/api/plans", json={"manifest": {"steps": [step]}})
    assert response.status_code == 202, response.text
    report = wait_for_run(client, response.json()["runId"])
    assert report["status"] == "completed", report
    assert report["steps"]["a"]["output"] == {"value": "a", "depends": []}
    assert "namespaces" in report["steps"]["a"]["attempts"][-1]["layers"]


def test_a_sandboxed_service_refuses_what_its_sandbox_withholds(
    workspace, thread_server, sqlite_settings
) -> None:
    client = thread_server(dataclasses.replace(sqlite_settings, plan_shell="sandboxed")).client()
    manifest = {
        "sandbox": "off",
        "agents": {"coder": {"prompt": "code", "env": ["SERVICE_DB_PASSWORD"]}},
        "steps": [{"id": "fetch", "command": "curl example.com", "network": True}],
    }
    response = client.post("/api/plans", json={"manifest": manifest})
    assert response.status_code == 422
    detail = response.json()["detail"][0]["msg"]
    assert "sandbox: off" in detail
    assert "agent 'coder' declares env SERVICE_DB_PASSWORD" in detail
    assert "step 'fetch' declares network: true" in detail


def test_a_sandboxed_step_cannot_read_the_service_environment_write_outside_or_open_a_socket(
    workspace, thread_server, sqlite_settings, tcp_listener, tmp_path
) -> None:
    port, accepted = tcp_listener
    outside = Path(tempfile.mkdtemp(dir="/var/tmp"))  # outside /tmp, which the sandbox replaces
    command = "; ".join(
        [
            "echo built > artifact.txt",  # the step's legitimate work
            "printenv SERVICE_DB_PASSWORD OPENAI_API_KEY && echo env-leaked",
            "cat /proc/*/environ 2>/dev/null | grep -a -c sk-service || true",
            f"echo x > {outside}/escaped.txt && echo wrote-outside",
            f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)'"
            " && echo connected",
            "echo done",
        ]
    )
    # Kept: the run's own folder is read below (a finished run's folder is otherwise removed).
    settings = dataclasses.replace(sqlite_settings, plan_shell="sandboxed", keep_workspaces=True)
    client = thread_server(settings).client()
    response = client.post(
        "/api/plans", json={"manifest": {"steps": [{"id": "attack", "command": command}]}}
    )
    assert response.status_code == 202, response.text
    report = wait_for_run(client, response.json()["runId"])
    step = report["steps"]["attack"]
    assert step["status"] == "completed", step
    assert step["attempts"][0]["layers"] == list(LAYERS)
    stdout = step["output"]["stdout"]
    [artifact] = (workspace / "runs").glob("*/artifact.txt")  # the run's own folder
    assert artifact.read_text() == "built\n"
    assert stdout.splitlines() == ["0", "done"]  # no variable, no environ, no write, no socket
    assert SECRET not in str(report) and os.environ["OPENAI_API_KEY"] not in str(report)
    # The folder outside the workspace is not even there (the sandbox shows an allowlist of paths).
    assert f"cannot create {outside}/escaped.txt: Directory nonexistent" in step["output"]["stderr"]
    assert not (outside / "escaped.txt").exists()
    assert not accepted
    shutil.rmtree(outside)


def test_plan_shell_comes_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("VERILOOP_PLAN_SHELL", "sandboxed")
    settings = Settings.from_env()
    assert settings.plan_shell == "sandboxed"
    context = settings.plan_context()
    assert (context.sandbox, context.allow_shell, context.allow_network, context.manifest_env) == (
        "required",
        True,
        False,
        False,
    )
    assert Settings().plan_context().allow_shell is False
    monkeypatch.setenv("VERILOOP_PLAN_SHELL", "anything")
    with pytest.raises(ValueError, match="plan_shell"):
        Settings.from_env()


def test_a_model_written_command_approved_by_the_caller_still_does_not_run_when_off(
    workspace, thread_server, sqlite_settings, scripted_model
) -> None:
    # Nothing to refuse at submission (a goal): the refusal happens when the step would start.
    draft = ManifestDraft(steps=[StepDraft(id="leak", command="printenv > leaked.txt")])
    scripted_model.script("planning", draft)
    client = thread_server(sqlite_settings).client()
    run_id = client.post("/api/plans", json={"goal": "Leak the keys"}).json()["runId"]
    paused = wait_for_run(client, run_id)
    assert [r["stepId"] for r in paused["pendingReviews"]] == ["leak"]
    answer = {"decisions": {"leak": {"approved": True}}}
    assert client.post(f"/api/plans/{run_id}/reviews", json=answer).status_code == 202
    step = wait_for_run(client, run_id)["steps"]["leak"]
    assert step["verificationStatus"] == "execution_failed"
    assert "plan_shell=off" in step["diagnosis"]
    assert not list(workspace.rglob("leaked.txt"))


def test_a_manifest_over_the_operators_maximum_timeout_is_refused_at_submission(
    workspace, thread_server, sqlite_settings
) -> None:
    settings = dataclasses.replace(sqlite_settings, plan_shell="sandboxed", max_timeout_s=60)
    client = thread_server(settings).client()
    manifest = {
        "steps": [
            {"id": "fine", "command": "true", "timeout_s": 60},
            {
                "id": "outer",
                "plan": {"steps": [{"id": "slow", "command": "true", "timeout_s": 1e8}]},
            },
        ]
    }
    expected = (
        "plan step 'outer': step 'slow' asks for timeout_s 1e+08, over this service's maximum of "
        "60 s (max_timeout_s, veriloop serve --max-timeout-s)"
    )
    response = client.post("/api/plans", json={"manifest": manifest, "runId": "r1"})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["msg"].endswith(expected)
    assert client.get("/api/plans/r1").status_code == 404
    check = client.post("/api/plans/validate", json={"manifest": manifest}).json()
    assert check["runnable"] is False
    assert [f["message"] for f in check["critique"]["findings"] if f["rule"] == "max_timeout"] == [
        expected
    ]
    fine = {"steps": [{"id": "fine", "command": "true", "timeout_s": 60}]}
    assert client.post("/api/plans/validate", json={"manifest": fine}).json()["runnable"] is True


def test_the_confinement_options_of_serve_reach_the_plan_context(monkeypatch, tmp_path) -> None:
    import veriloop.server.main
    from veriloop.server.data_dir import MAX_TMP_CHARS

    defaults = Settings()
    for name in CONFINEMENT_SETTINGS:  # serve sets them: restored after the test
        monkeypatch.setenv(f"VERILOOP_{name.upper()}", str(getattr(defaults, name)))
    # serve also makes its data dir, TMPDIR and the runs' workspace: here, and restored after.
    monkeypatch.setenv("VERILOOP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TMPDIR", os.environ.get("TMPDIR", tempfile.gettempdir()))
    monkeypatch.delenv("VERILOOP_WORKSPACE", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", tempfile.tempdir)
    started = []
    monkeypatch.setattr(veriloop.server.main, "serve", lambda **kw: started.append(kw))
    options = ["--sandbox-ro", str(tmp_path), "--sandbox-ro", "/opt/tools", "--step-uid", "62001"]
    options += ["--limit-memory-mb", "512", "--limit-processes", "64", "--limit-cpu-s", "30"]
    options += ["--limit-file-mb", "100", "--limit-open-files", "256", "--limit-disk-mb", "300"]
    options += ["--max-timeout-s", "90", "--database-url", f"sqlite:///{tmp_path}/db.sqlite"]
    result = CliRunner().invoke(app, ["serve", *options])
    assert result.exit_code == 0 and started, result.output
    assert os.environ["VERILOOP_WORKSPACE"] == str(tmp_path / "data" / "workspace")
    tmp = str(tmp_path / "data" / "tmp")
    if len(tmp) <= MAX_TMP_CHARS:
        assert os.environ["TMPDIR"] == tmp
    else:  # too deep for socket paths below it: a private folder of the system's
        assert os.environ["TMPDIR"].startswith("/tmp/veriloop-")
    context = Settings.from_env().plan_context()
    assert context.sandbox_ro == f"{tmp_path}:/opt/tools"
    assert (context.step_uid, context.step_gid, context.max_timeout_s) == (62001, 61000, 90.0)
    assert context.step_limits() == Limits(
        memory_bytes=512 * MIB,
        processes=64,
        cpu_s=30,
        file_bytes=100 * MIB,
        open_files=256,
        disk_bytes=300 * MIB,
    )
    assert Settings().plan_context().max_timeout_s == 3600  # the service's default maximum
