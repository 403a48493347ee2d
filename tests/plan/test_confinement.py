"""Confinement of a step's processes (issue 44, items 1-3): no privilege inside, only the files it
needs, limits. Real bubblewrap, real setpriv and prlimit, real seccomp, the service as root (as
here) and, where practical, as an unprivileged user.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from veriloop.engines.plan.confinement import paths, sandbox, seccomp
from veriloop.engines.plan.confinement.limits import MIB, Limits
from veriloop.engines.plan.confinement.process import run_command
from veriloop.engines.plan.confinement.sandbox import (
    LAYERS,
    Confinement,
    ProcessRefused,
    launch,
    layers_for,
)
from veriloop.engines.plan.confinement.user import StepUser
from veriloop.engines.plan.executors import run_shell_step

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="these probes start the service as root")

REQUIRED = Confinement(sandbox="required")
HIDDEN_DIRS = ("/root", "/home", "/srv", "/var", "/run", "/work")
"""Folders a step must not see (beyond the way to the interpreter, when it lives there)."""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """Under pytest's 0700 folder, as the service's run folders are under a private one."""
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A service's data folder outside any workspace, holding a key file."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="veriloop-data-"))
    (folder / "api_keys").write_text("sk-data-dir-secret\n")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


async def step(command: str, workspace: Path, confinement: Confinement = REQUIRED, **kw):
    return await run_command(command, workspace, timeout_s=60, confinement=confinement, **kw)


@pytest.mark.anyio
async def test_a_root_service_runs_steps_as_an_unprivileged_user_without_capabilities(
    workspace,
) -> None:
    (workspace / "given.txt").write_text("from the service\n")
    run = await step(
        "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):'"
        " /proc/self/status; echo more >> given.txt; touch made.txt",
        workspace,
    )
    assert run.exit_code == 0, run.output
    status = dict(line.split(":", 1) for line in run.output.splitlines())
    status = {name: value.split() for name, value in status.items()}
    assert status["Uid"] == ["61000"] * 4 and status["Gid"] == ["61000"] * 4
    assert status.get("Groups", []) == []
    for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert status[caps] == ["0000000000000000"], caps
    assert status["NoNewPrivs"] == ["1"] and status["Seccomp"] == ["2"]  # 2: a filter
    # On the host, what the step made belongs to uid 61000, not root.
    made = (workspace / "made.txt").stat()
    assert (made.st_uid, made.st_gid) == (61000, 61000)
    assert (workspace / "given.txt").read_text() == "from the service\nmore\n"
    assert run.layers == LAYERS


@pytest.mark.anyio
async def test_the_kernel_refuses_mounts_namespaces_and_tracing(workspace) -> None:
    run = await step(
        "umount -l /tmp; echo umount=$?; mount -o remount,bind,rw /usr; echo remount=$?;"
        " mount -t tmpfs x /tmp; echo mount=$?; unshare -U true; echo unshare=$?;"
        " unshare -n true; echo unshare_net=$?; python3 -c 'import os; os.unshare(os.CLONE_NEWNS)';"
        " echo os_unshare=$?",
        workspace,
    )
    codes = dict(line.split("=") for line in run.output.splitlines() if "=" in line)
    assert all(code != "0" for code in codes.values()), run.output
    assert set(codes) == {"umount", "remount", "mount", "unshare", "unshare_net", "os_unshare"}
    assert "Operation not permitted" in run.output


def test_the_seccomp_filter_alone_refuses_what_root_could_do(workspace) -> None:
    """The filter holds even for a process that kept every capability (root inside bwrap)."""
    fd = seccomp.filter_fd()
    script = (
        "import ctypes, errno, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for name, call in [('unshare', lambda: libc.unshare(0x20000)),\n"
        "                   ('mount', lambda: libc.mount(b'x', b'/mnt', b'tmpfs', 0, None)),\n"
        "                   ('clone_newuser', lambda: libc.syscall(56, 0x10000000, 0, 0, 0, 0)),\n"
        "                   ('ptrace', lambda: libc.ptrace(16, 1, 0, 0)),\n"
        "                   ('bpf', lambda: libc.syscall(321, 0, 0, 0)),\n"
        "                   ('clone3', lambda: libc.syscall(435, 0, 0))]:\n"
        "    print(name, call(), errno.errorcode.get(ctypes.get_errno()))\n"
        "print('fork', os.waitpid(os.fork() or os._exit(0), 0)[1] if True else 0)\n"
    )
    try:
        done = subprocess.run(
            ["bwrap", "--bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--seccomp", str(fd)]
            + ["--", sys.executable, "-c", script],
            pass_fds=(fd,),
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        os.close(fd)
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    for name in ("unshare", "mount", "clone_newuser", "ptrace", "bpf"):
        assert lines[name] == "-1 EPERM", (name, done.stdout, done.stderr)
    assert lines["clone3"] == "-1 ENOSYS"  # so the C library falls back to clone
    assert lines["fork"] == "0"  # plain forks still work


@pytest.mark.anyio
async def test_a_step_sees_only_the_system_the_interpreter_and_its_workspace(
    workspace, data_dir
) -> None:
    listing = " ".join(f"echo {d}:; ls -A {d} 2>&1;" for d in HIDDEN_DIRS)
    run = await step(
        f"{listing} echo ==; echo secrets=$(cat /etc/shadow /etc/gshadow 2>/dev/null | wc -c);"
        f" cat {data_dir}/api_keys; ls /etc/ssl/private | wc -l; cat /work/TEAM.md;"
        f" ls {workspace.parent}; echo end",
        workspace,
    )
    assert run.exit_code == 0, run.output
    assert "sk-data-dir-secret" not in run.output
    assert "secrets=0" in run.output
    seen: dict[str, list[str]] = {}
    current = ""
    for line in run.output.splitlines():
        if line.endswith(":") and line[:-1] in HIDDEN_DIRS:
            current = line[:-1]
            seen[current] = []
        elif line == "==":
            current = ""
        elif current and line.startswith("ls:"):
            seen[current] = ["<none>"]
            current = ""
        elif current:
            seen[current].append(line)
    # Each folder is absent, or shows only the way to an interpreter prefix (this venv under
    # /work, the base interpreter under /root/.pyenv).
    prefixes = paths.interpreter_prefixes()
    for folder in HIDDEN_DIRS:
        allowed = {
            prefix.relative_to(folder).parts[0]
            for prefix in prefixes
            if Path(folder) in prefix.parents
        }
        shown = seen[folder]
        assert shown == ["<none>"] or set(shown) <= allowed, (folder, shown, allowed)
    # Only its own folder in the 0700 folder it sits in.
    assert run.output.split("end")[0].rstrip().splitlines()[-1] == workspace.name


@pytest.mark.anyio
async def test_the_operator_names_extra_read_only_paths(workspace, data_dir) -> None:
    data_dir.chmod(0o755)  # the step's user reads it like any other user would
    (data_dir / "api_keys").chmod(0o644)
    shown = Confinement(sandbox="required", readonly=(str(data_dir),))
    run = await step(f"cat {data_dir}/api_keys; echo x > {data_dir}/w", workspace, shown)
    assert run.output.startswith("sk-data-dir-secret\n")
    assert "Read-only file system" in run.output and not (data_dir / "w").exists()


@pytest.mark.anyio
async def test_tests_run_in_the_sandbox_with_the_reporter_bound_alone(workspace) -> None:
    from veriloop.engines.plan.judge.testrun import REPORTER_PLUGIN, run_tests

    (workspace / "test_x.py").write_text(
        "import os, pathlib\n"
        f"def test_sees_no_repository():\n    assert not pathlib.Path({str(REPORTER_PLUGIN.parent.parent)!r}, 'checks.py').exists()\n"
        "def test_uid():\n    assert os.getuid() == 61000\n"
    )
    run = await run_tests("pytest test_x.py", workspace, timeout_s=120, confinement=REQUIRED)
    assert run.ok and run.structured and run.passed == 2, run.output


def test_an_interpreter_under_tmp_runs_in_the_sandbox(tmp_path) -> None:
    """A service whose interpreter lives under /tmp (a clone there, its venv): the sandbox's
    private /tmp must not hide it."""
    venv = Path(tempfile.mkdtemp(prefix="veriloop-venv-", dir="/tmp")) / "venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        workspace = tmp_path / "w"
        workspace.mkdir()
        site = next(p for p in sys.path if p.endswith("site-packages"))
        probe = (
            "import asyncio, site, sys\n"
            f"site.addsitedir({site!r})\n"
            "from pathlib import Path\n"
            "from veriloop.engines.plan.confinement.process import run_command\n"
            "from veriloop.engines.plan.confinement.sandbox import Confinement\n"
            "run = asyncio.run(run_command(sys.executable + \" -c 'import sys; print(sys.prefix)'\","
            f" Path({str(workspace)!r}), timeout_s=60, confinement=Confinement(sandbox='required')))\n"
            "print(run.exit_code, run.layers, run.output)\n"
        )
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, timeout=90
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split("\n")[0].startswith("0 ('limits',"), done.stdout
        assert str(venv) in done.stdout
    finally:
        shutil.rmtree(venv.parent, ignore_errors=True)


def small(**limits: int) -> Confinement:
    """Small limits, and a uid of the test's own (RLIMIT_NPROC counts the uid host-wide)."""
    return Confinement(sandbox="required", limits=Limits(**limits), user=StepUser(61123, 61123))


@pytest.mark.anyio
async def test_memory_limit(workspace) -> None:
    run = await step(
        "python3 -c 'b = bytearray(400 * 2**20); print(\"allocated\")'",
        workspace,
        small(memory_bytes=200 * MIB),
    )
    assert run.exit_code != 0 and "MemoryError" in run.output and "allocated" not in run.output


@pytest.mark.anyio
async def test_process_limit(workspace) -> None:
    spawn = (
        "import subprocess\nps = []\ntry:\n    for _ in range(40):\n"
        "        ps.append(subprocess.Popen(['sleep', '5']))\nexcept OSError as e:\n    print(e)\n"
        "print('started', len(ps))\n[p.kill() for p in ps]\n"
    )
    run = await step(f"python3 -c {shlex.quote(spawn)}", workspace, small(processes=10))
    assert "Resource temporarily unavailable" in run.output, run.output
    assert int(run.output.split("started ")[1].split()[0]) < 10  # the shell and python count too


@pytest.mark.anyio
async def test_file_size_limit(workspace) -> None:
    run = await step("head -c 20000000 /dev/zero > big", workspace, small(file_bytes=8 * MIB))
    assert run.exit_code != 0
    assert (workspace / "big").stat().st_size == 8 * MIB


@pytest.mark.anyio
async def test_cpu_limit(workspace) -> None:
    run = await step("python3 -c 'while True: pass'", workspace, small(cpu_s=1))
    assert run.exit_code in (128 + 9, 128 + 24), run  # SIGKILL at the hard limit, or SIGXCPU


@pytest.mark.anyio
async def test_open_files_limit(workspace) -> None:
    run = await step(
        'python3 -c \'fs = [open("f", "w") for _ in range(100)]\'', workspace, small(open_files=20)
    )
    assert run.exit_code != 0 and "Too many open files" in run.output


@pytest.mark.anyio
async def test_a_step_past_its_disk_limit_is_stopped_and_fails_with_that_reason(workspace) -> None:
    result = await run_shell_step(
        "for i in $(seq 20); do head -c 5000000 /dev/zero > f$i; sleep 0.2; done; touch finished",
        workspace=workspace,
        timeout_s=60,
        confinement=small(disk_bytes=20 * MIB),
    )
    assert not result.ok and not (workspace / "finished").exists()
    assert result.error == "stopped: the workspace grew past the step's disk limit of 20 MiB"
    # The private /tmp has the same size: it is no way around the limit.
    run = await step("head -c 30000000 /dev/zero > /tmp/f", workspace, small(disk_bytes=20 * MIB))
    assert run.exit_code != 0 and "No space left on device" in run.output


def test_required_refuses_a_missing_layer_and_names_it(workspace, monkeypatch) -> None:
    seccomp.compiled_filter.cache_clear()
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # the bindings are not installed
    try:
        with pytest.raises(ProcessRefused) as refused:
            launch(workspace, REQUIRED)
        assert str(refused.value).startswith("sandbox required, but libseccomp's Python bindings")
        assert str(refused.value).endswith("(no seccomp layer)")
        # auto starts it under the layers that work, and says which.
        assert layers_for(Confinement()) == ("limits", "namespaces", "user", "no_caps", "paths")
    finally:
        seccomp.compiled_filter.cache_clear()
    assert layers_for(Confinement(sandbox="off")) == ("limits",)


def test_a_service_that_is_not_root_runs_steps_as_itself_without_capabilities(
    tmp_path, monkeypatch
) -> None:
    """The service as uid 62000: bwrap in a user namespace with every capability dropped. The
    probe is the launch's own argv started under setpriv (this interpreter lives under root's
    0700 home, where an unprivileged service could not start it; its prefixes are left out)."""
    workspace = Path(tempfile.mkdtemp(prefix="veriloop-nonroot-")) / "w"  # a folder it reaches
    workspace.mkdir()
    workspace.parent.chmod(0o755)
    os.chown(workspace, 62000, 62000)
    monkeypatch.setattr(sandbox, "service_is_root", lambda: False)
    monkeypatch.setattr(sandbox, "interpreter_prefixes", lambda: [])
    how = launch(workspace, REQUIRED)
    command = (
        "grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status;"
        " echo shadow=$(cat /etc/shadow 2>/dev/null | wc -c); unshare -U true; echo unshare=$?;"
        " ls -A /work /root 2>&1 | head -3; touch made"
    )
    try:
        done = subprocess.run(
            ["setpriv", "--reuid=62000", "--regid=62000", "--clear-groups", "--"]
            + [*how.argv, "-c", command],
            cwd=workspace,
            env=how.env,
            pass_fds=how.pass_fds,
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        for fd in how.pass_fds:
            os.close(fd)
    out = done.stdout
    assert how.layers == LAYERS and "--unshare-user" in how.argv, how.argv
    assert "CapEff:\t0000000000000000" in out and "CapBnd:\t0000000000000000" in out, done
    assert "NoNewPrivs:\t1" in out and "Seccomp:\t2" in out
    assert "shadow=0" in out and "unshare=1" in out
    assert "No such file or directory" in out and "TEAM.md" not in out
    assert (workspace / "made").stat().st_uid == 62000
    shutil.rmtree(workspace.parent)


@pytest.mark.anyio
async def test_the_step_tree_still_dies_with_the_step(workspace) -> None:
    result = await run_shell_step(
        "(sleep 1; touch late.txt) & echo started; wait",
        workspace=workspace,
        timeout_s=0.5,
        confinement=REQUIRED,
    )
    assert not result.ok and "timed out" in result.error
    await asyncio.sleep(1.5)
    assert not (workspace / "late.txt").exists()
