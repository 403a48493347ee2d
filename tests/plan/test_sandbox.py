"""A step's processes: a scrubbed environment, and bubblewrap (issue 28, items 1 and 2).

Real processes, real bwrap (/usr/bin/bwrap), a real TCP server on loopback.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from veriloop.context import PlanContext
from veriloop.engines.plan.confinement.process import run_command
from veriloop.engines.plan.confinement.sandbox import (
    LAYERS,
    Confinement,
    ProcessRefused,
    bwrap_problem,
    step_env,
)
from veriloop.engines.plan.execution import execute_step
from veriloop.engines.plan.executors import run_shell_step
from veriloop.engines.plan.judge.testrun import run_tests
from veriloop.plans import PlanRunner, run_workspace
from veriloop.schemas.manifest import CheckSpec, ManifestStep

SANDBOXED = Confinement(sandbox="required")
SECRET = "sk-test-do-not-leak-0123456789"


@pytest.fixture
def secrets(monkeypatch) -> None:
    """What a service's environment holds: none of it may reach a step."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("VERILOOP_API_KEYS", f"{SECRET}:tenant")
    monkeypatch.setenv("VERILOOP_DATABASE_URL", f"postgresql://u:{SECRET}@db/x")


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox's private /tmp would hide anything under it anyway)."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def connect_script(port: int) -> str:
    return (
        "python3 -c 'import socket,sys\n"
        f'try: socket.create_connection(("127.0.0.1", {port}), timeout=2)\n'
        'except OSError as e: sys.exit(f"no socket: {e}")\n'
        'print("connected")\''
    )


def test_bubblewrap_works_on_this_machine() -> None:
    # The CI image installs bubblewrap (scripts/setup.sh); every sandbox test below needs it.
    assert bwrap_problem() is None


@pytest.mark.anyio
@pytest.mark.parametrize("sandbox", ["off", "required"])
async def test_a_step_never_sees_the_runners_environment(secrets, workspace, sandbox) -> None:
    run = await run_command(
        "printenv; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c sk-test || true",
        workspace,
        timeout_s=20,
        confinement=Confinement(sandbox=sandbox),
    )
    assert run.exit_code == 0
    assert run.layers == (LAYERS if sandbox == "required" else ("limits",))
    env = dict(line.split("=", 1) for line in run.output.splitlines() if "=" in line)
    assert not {name for name in env if name.startswith(("OPENAI_", "VERILOOP_"))}
    assert env["HOME"] == str(workspace) and "PATH" in env
    if sandbox == "required":
        # The service's own /proc/<pid>/environ is out of sight in the sandbox's pid namespace.
        assert SECRET not in run.output and run.output.rstrip().endswith("0")


@pytest.mark.anyio
async def test_pass_env_is_the_escape_hatch(secrets, workspace, monkeypatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-allowed")
    run = await run_command(
        "printenv GITHUB_TOKEN OPENAI_API_KEY",
        workspace,
        timeout_s=20,
        confinement=Confinement(pass_env=("GITHUB_TOKEN",)),
    )
    assert run.output.splitlines() == ["ghp-allowed"]  # and not the key nobody passed


@pytest.mark.anyio
async def test_the_sandbox_writes_only_to_the_workspace(workspace, tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    result = await run_shell_step(
        f"echo ok > made.txt; echo x > {outside}/escaped.txt; echo y > /etc/escaped.txt;"
        f" echo z > {Path.home()}/escaped.txt; echo t > /tmp/scratch.txt && cat /tmp/scratch.txt",
        workspace=workspace,
        timeout_s=20,
        confinement=SANDBOXED,
    )
    assert result.layers == list(LAYERS) and result.ok, result
    assert (workspace / "made.txt").read_text() == "ok\n"  # the legitimate work is done
    assert not (outside / "escaped.txt").exists()
    assert not Path("/etc/escaped.txt").exists()
    assert not (Path.home() / "escaped.txt").exists()
    assert "Read-only file system" in result.output["stderr"]
    assert result.output["stdout"] == "t\n"  # a private /tmp works


@pytest.mark.anyio
async def test_the_sandbox_has_no_network_unless_the_step_declares_it(
    workspace, tcp_listener
) -> None:
    port, accepted = tcp_listener
    denied = await run_shell_step(
        connect_script(port), workspace=workspace, timeout_s=20, confinement=SANDBOXED
    )
    assert not denied.ok and "no socket" in denied.output["stderr"] and not accepted
    declared = await run_shell_step(
        connect_script(port),
        workspace=workspace,
        timeout_s=20,
        confinement=Confinement(sandbox="required", network=True),
    )
    assert declared.ok and declared.output["stdout"] == "connected\n" and accepted


@pytest.mark.anyio
async def test_the_sandboxed_process_tree_dies_with_the_step(workspace) -> None:
    result = await run_shell_step(
        "(sleep 1; touch late.txt) & echo started; wait",
        workspace=workspace,
        timeout_s=0.3,
        confinement=SANDBOXED,
    )
    assert not result.ok and "timed out" in result.error
    await asyncio.sleep(1.5)
    assert not (workspace / "late.txt").exists()


@pytest.mark.anyio
async def test_required_without_bubblewrap_fails_the_step_and_runs_nothing(
    workspace, monkeypatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no bwrap to be found
    step = ManifestStep(
        id="build",
        executor="shell",
        command="touch ran.txt",
        checks=[CheckSpec(kind="command", command="touch checked.txt")],
    )
    result = await execute_step(
        step,
        prompt="",
        agent=None,
        depends={},
        tools={},
        workspace=workspace,
        llm=None,
        timeout_s=10,
        max_turns=1,
        confinement=SANDBOXED,
    )
    assert not result.ok
    assert result.error == (
        "step 'build' was not run: sandbox required, but bubblewrap (bwrap) is not installed "
        "or not on PATH (Debian: apt-get install bubblewrap) (no namespaces layer)"
    )
    assert not list(workspace.iterdir())
    # auto falls back, and says so.
    fallback = await run_shell_step(
        "/bin/touch ran.txt", workspace=workspace, timeout_s=10, confinement=Confinement()
    )
    assert fallback.ok and fallback.layers == ["limits"] and (workspace / "ran.txt").exists()


@pytest.mark.anyio
async def test_a_runner_that_forbids_processes_starts_none(workspace) -> None:
    forbidden = Confinement(forbidden="no processes here")
    (workspace / "test_x.py").write_text("def test_x():\n    open('ran', 'w')\n")
    with pytest.raises(ProcessRefused, match="no processes here"):
        await run_tests("pytest test_x.py", workspace, timeout_s=30, confinement=forbidden)
    with pytest.raises(ProcessRefused):
        await run_command("touch ran", workspace, timeout_s=30, confinement=forbidden)
    shell = await run_shell_step(
        "touch ran", workspace=workspace, timeout_s=30, confinement=forbidden
    )
    assert not shell.ok and shell.error.endswith(": no processes here")
    assert not (workspace / "ran").exists()


@pytest.mark.anyio
async def test_tests_run_in_the_sandbox_and_their_report_still_arrives(workspace) -> None:
    (workspace / "test_ok.py").write_text(
        "import os\n\ndef test_home():\n    assert os.environ['HOME'] == os.getcwd()\n"
    )
    run = await run_tests("pytest test_ok.py", workspace, timeout_s=60, confinement=SANDBOXED)
    assert run.ok and run.structured and run.passed == 1, run.output


def test_the_environment_allowlist() -> None:
    runner = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "TMPDIR": "/var/tmp",
        "OPENAI_API_KEY": SECRET,
        "DATABASE_URL": "postgresql://x",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "NEEDED": "1",
    }
    ws = Path("/w")
    confinement = Confinement(pass_env=("NEEDED",))
    assert step_env(ws, confinement, sandboxed=False, environ=runner) == {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "TMPDIR": "/var/tmp",
        "HOME": "/w",
        "NEEDED": "1",
    }
    inside = step_env(ws, confinement, sandboxed=True, environ=runner, extra={"X": "1"})
    assert inside["TMPDIR"] == "/tmp" and inside["X"] == "1" and "OPENAI_API_KEY" not in inside
    assert os.environ.get("PATH")  # the real PATH is untouched by the above


@pytest.mark.anyio
async def test_a_run_never_sees_another_runs_workspace(outside_tmp) -> None:
    """The service gives each run its own folder; a sandboxed step sees only its own."""
    base = outside_tmp
    (base / "operator.txt").write_text("the operator's file\n")
    runner = PlanRunner(
        context=PlanContext(workspace=str(base), sandbox="required"), workspace_per_run=True
    )
    writer = {"steps": [{"id": "w", "command": "echo tenant-a-secret > a.txt"}]}
    assert (await runner.arun(manifest=writer, run_id="a")).status == "completed"
    assert (run_workspace(base, "a") / "a.txt").read_text() == "tenant-a-secret\n"

    reader = {
        "steps": [
            {
                "id": "r",
                "command": f"echo mine > b.txt; cat b.txt; ls -a ..; cat {base}/operator.txt"
                f" {run_workspace(base, 'a')}/a.txt ../*/a.txt; true",
            }
        ]
    }
    report = await runner.arun(manifest=reader, run_id="b")
    output = report.steps["r"].output
    assert report.steps["r"].status == "completed", report.steps["r"]
    assert output["stdout"].splitlines()[0] == "mine"  # its own folder works
    assert "tenant-a-secret" not in output["stdout"] and "operator" not in output["stdout"]
    # Only the run's own folder exists in its view of the runs folder.
    assert output["stdout"].split() == ["mine", ".", "..", run_workspace(base, "b").name]
