"""Starting one process of a step: the shell command, its process group, its output's tails.

Every process a plan run starts (shell steps, command checks, test runs) goes through
:func:`run_command`, which asks :func:`~veriloop.engines.plan.confinement.sandbox.launch` how to
start it (user, capabilities, seccomp, paths, limits) and kills its whole tree when it ends.
While it runs, the size of its writable folders is read every :data:`DISK_POLL_S` seconds: past
the step's disk limit the tree is killed and the run says why (:attr:`CommandRun.stopped`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veriloop.engines.plan.confinement.limits import describe_bytes, folder_bytes
from veriloop.engines.plan.confinement.sandbox import (
    DEFAULT_CONFINEMENT,
    Confinement,
    Layer,
    launch,
)
from veriloop.engines.plan.leftovers import strip_privilege_bits

OUTPUT_TAIL_CHARS = 20_000
"""How much of a command's combined stdout/stderr is kept (its end, where the summary is)."""
DISK_POLL_S = 0.5
"""How often the writable folders' size is read while a command runs (at least; a large folder
is read less often, so the reading never takes more than a tenth of the time)."""


@dataclass
class CommandRun:
    """A shell command's exit status and the tail of its output."""

    exit_code: int | None
    timed_out: bool
    output: str
    stderr: str = ""
    """The tail of standard error when it was kept apart (otherwise it is in ``output``)."""
    layers: tuple[Layer, ...] = ()
    """The confinement layers it ran under (see :data:`~.sandbox.LAYERS`)."""
    stopped: str | None = None
    """Why it was stopped before it ended (a limit it went past); None: it ended, or timed out."""
    output_bytes: int = 0
    """How much it wrote to its standard output (all of it, not only the tail kept)."""
    leftovers: tuple[str, ...] = ()
    """Processes of its session still running after it ended (killed then), one line each.
    Sandboxed ones never show here: the pid namespace ends with the command."""


async def run_command(
    command: str,
    workspace: Path,
    *,
    timeout_s: float,
    env: dict[str, str] | None = None,
    tail_chars: int = OUTPUT_TAIL_CHARS,
    split_stderr: bool = False,
    confinement: Confinement = DEFAULT_CONFINEMENT,
    writable: Sequence[Path] = (),
    readonly: Sequence[Path] = (),
    args: Sequence[str] = (),
    stdin: bytes | None = None,
) -> CommandRun:
    """Run ``command`` through the shell in ``workspace``, in its own process group; kill the group
    after ``timeout_s`` (exit_code None, timed_out True), when cancelled, and once the command has
    ended (its stray children go with it, and so does whatever left the group but not the
    session: :attr:`CommandRun.leftovers`). Output goes to temporary files, so a child that keeps
    the output open cannot hold the run, and only the tails are read back. Raises OSError when
    the command cannot start (e.g. a missing workspace).

    The process never sees this process's environment: it gets the scrubbed one of
    :mod:`~veriloop.engines.plan.confinement.sandbox` plus ``env`` (veriloop's own plumbing), and runs in
    bubblewrap as ``confinement`` says, with ``writable`` folders besides the workspace and
    ``readonly`` paths bound read-only over both (see :func:`launch`). A command
    that must not start (``confinement`` forbids processes, or requires a sandbox that cannot
    start) raises ProcessRefused and runs nothing. ``args`` follow the command (the shell's ``$0``,
    ``$1``...); ``stdin`` is what it reads (nothing when None)."""
    # Finding bwrap (and probing it once), temporary files and reading them back are blocking
    # calls: keep them off the event loop.
    how = await asyncio.to_thread(
        launch,
        Path(workspace),
        confinement,
        extra_env=env,
        writable=writable,
        readonly=readonly,
    )
    sink, errors, given = await asyncio.to_thread(_files, stdin)
    try:
        try:
            proc = await asyncio.create_subprocess_exec(
                *how.argv,
                "-c",
                command,
                *args,
                cwd=str(workspace),
                stdin=asyncio.subprocess.DEVNULL if given is None else given,
                stdout=sink,
                stderr=errors if split_stderr else asyncio.subprocess.STDOUT,
                start_new_session=True,
                env=how.env,
                pass_fds=how.pass_fds,
            )
        finally:
            for fd in how.pass_fds:
                os.close(fd)
            if given is not None:
                given.close()
        timed_out = False
        stopped = None
        try:
            try:
                stopped = await asyncio.wait_for(
                    _watch_disk(proc, [Path(workspace), *map(Path, writable)], confinement),
                    timeout=timeout_s,
                )
            except TimeoutError:
                timed_out = True
            if timed_out or stopped:
                _kill_group(proc.pid)
                await proc.wait()
        finally:
            leftovers = await asyncio.to_thread(kill_session, proc.pid)
            _kill_group(proc.pid)
            # Nothing privileged survives the process: no setuid/setgid file for the host.
            await asyncio.to_thread(strip_privilege_bits, [Path(workspace), *writable])
        output, stderr = await asyncio.to_thread(
            lambda: (_tail(sink, tail_chars), _tail(errors, tail_chars) if split_stderr else "")
        )
        output_bytes = sink.seek(0, os.SEEK_END)
    finally:
        sink.close()
        errors.close()
    if timed_out:
        output += f"\n[killed after {timeout_s:g} s]"
    elif stopped:
        output += f"\n[stopped: {stopped}]"
    return CommandRun(
        None if timed_out or stopped else proc.returncode,
        timed_out,
        output,
        stderr,
        layers=how.layers,
        stopped=stopped,
        output_bytes=output_bytes,
        leftovers=tuple(leftovers),
    )


def _files(stdin: bytes | None) -> tuple[Any, Any, Any]:
    """Temporary files for the output and standard error, and one holding ``stdin`` (or None)."""
    given = None
    if stdin is not None:
        given = tempfile.TemporaryFile()
        given.write(stdin)
        given.seek(0)
    return tempfile.TemporaryFile(), tempfile.TemporaryFile(), given


async def _watch_disk(
    proc: asyncio.subprocess.Process, folders: list[Path], confinement: Confinement
) -> str | None:
    """Wait for ``proc``; None when it ended, the reason when ``folders`` outgrew the disk limit."""
    limit = confinement.limits.disk_bytes
    loop = asyncio.get_running_loop()
    pause = DISK_POLL_S
    while True:
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=pause)
            return None
        except TimeoutError:
            pass
        started = loop.time()
        used = await asyncio.to_thread(folder_bytes, folders)
        if used > limit:
            return f"the workspace grew past the step's disk limit of {describe_bytes(limit)}"
        pause = max(DISK_POLL_S, 10 * (loop.time() - started))


def _tail(sink: Any, limit: int) -> str:
    """The last ``limit`` characters written to ``sink``, saying how much came before them."""
    size = sink.seek(0, os.SEEK_END)
    start = max(0, size - 4 * limit)  # bytes, with room for multi-byte characters
    sink.seek(start)
    text = sink.read().decode("utf-8", errors="replace")
    dropped = start
    if len(text) > limit:
        dropped += len(text[:-limit].encode())
        text = text[-limit:]
    if dropped:
        return f"[... {dropped} bytes of earlier output omitted ...]\n{text}"
    return text


def kill_session(session: int) -> list[str]:
    """Kill every process still running in ``session`` (its leader's pid; a command's children
    that left its process group stay in its session unless they start their own); one line
    (pid and command) for each."""
    found: list[str] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == session:
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
            if fields[0] in (b"Z", b"X") or int(fields[3]) != session:
                continue
            with open(f"/proc/{entry.name}/cmdline", "rb") as line:
                command = line.read().replace(b"\0", b" ").decode(errors="replace").strip()
            os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        found.append(f"process {entry.name} ({command[:80] or '?'})")
    return found


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


__all__ = ["OUTPUT_TAIL_CHARS", "CommandRun", "kill_session", "run_command"]
