"""The limits layer: what one step process (and its children) may use.

rlimits, set by ``prlimit`` on bubblewrap itself (hard and soft alike, so the step cannot raise
them) and inherited by everything it starts: address space, processes, CPU seconds, the size of
one file, open files. RLIMIT_NPROC counts every process of the step's uid on the whole host, so
steps running at once share it. The workspace's size is not an rlimit: :func:`folder_bytes` is
read while the step runs and the step is stopped past :attr:`Limits.disk_bytes`. cgroups are not
used (v1 here, with nothing delegated).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from veriloop.engines.plan.confinement.paths import system_tool
from veriloop.schemas.manifest import Manifest, ManifestStep

MIB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Per-step limits (each process of the step; the disk limit for its writable folders)."""

    memory_bytes: int = 1024 * MIB
    """Address space of each process (RLIMIT_AS)."""
    processes: int = 256
    """Processes of the step's uid, host-wide (RLIMIT_NPROC)."""
    cpu_s: int = 600
    """CPU seconds of each process (RLIMIT_CPU: SIGXCPU, then SIGKILL)."""
    file_bytes: int = 1024 * MIB
    """Largest file a process may write (RLIMIT_FSIZE: SIGXFSZ)."""
    open_files: int = 1024
    """Open descriptors of each process (RLIMIT_NOFILE)."""
    disk_bytes: int = 2048 * MIB
    """What the workspace (and the step's other writable folders) may hold; past it the step is
    stopped. Also the size of the sandbox's private /tmp."""

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value <= 0:
                raise ValueError(f"step limit {name} must be positive, not {value}")

    @classmethod
    def of(
        cls,
        *,
        memory_mb: int,
        processes: int,
        cpu_s: int,
        file_mb: int,
        open_files: int,
        disk_mb: int,
    ) -> Limits:
        """Limits from the operator's units (MiB, seconds, counts)."""
        return cls(
            memory_bytes=memory_mb * MIB,
            processes=processes,
            cpu_s=cpu_s,
            file_bytes=file_mb * MIB,
            open_files=open_files,
            disk_bytes=disk_mb * MIB,
        )


DEFAULT_LIMITS = Limits()
"""1 GiB of memory, 256 processes, 10 CPU minutes, 1 GiB files, 1024 descriptors, 2 GiB of disk."""


def limits_problem() -> str | None:
    """Why the limits layer cannot apply here (one line), or None."""
    if system_tool("prlimit") is None:
        return "prlimit (util-linux) is not installed"
    return None


def set_limits(limits: Limits) -> list[str]:
    """The argv prefix that starts the rest under ``limits``."""
    return [
        system_tool("prlimit") or "prlimit",
        f"--as={limits.memory_bytes}",
        f"--nproc={limits.processes}",
        f"--cpu={limits.cpu_s}",
        f"--fsize={limits.file_bytes}",
        f"--nofile={limits.open_files}",
        "--",
    ]


def folder_bytes(folders: Iterable[Path]) -> int:
    """Bytes the files under ``folders`` occupy on disk (links not followed, vanished files skipped)."""
    total = 0
    stack = [str(folder) for folder in folders]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    continue
    return total


def step_timeout(asked: float | None, default: float, maximum: float) -> float:
    """A step's time limit: what its manifest asks (else ``default``), never past ``maximum``
    (0: no maximum)."""
    timeout = asked or default
    return min(timeout, maximum) if maximum > 0 else timeout


def timeout_refusals(manifest: Manifest, maximum: float) -> list[str]:
    """Each step (nested plans' included) whose ``timeout_s`` is over the operator's ``maximum``
    (0: none), one located sentence each naming the limit."""
    if maximum <= 0:
        return []
    return [
        f"{where}step {step.id!r} asks for timeout_s {step.timeout_s:g}, over this service's "
        f"maximum of {maximum:g} s (max_timeout_s, veriloop serve --max-timeout-s)"
        for where, step in _steps(manifest)
        if step.timeout_s is not None and step.timeout_s > maximum
    ]


def _steps(manifest: Manifest, where: str = "") -> Iterator[tuple[str, ManifestStep]]:
    for step in manifest.steps:
        yield where, step
        if step.plan is not None:
            yield from _steps(step.plan, f"{where}plan step {step.id!r}: ")


def describe_bytes(size: int) -> str:
    """``2 GiB``, ``512 MiB``: a limit as people write it."""
    if size % (1 << 30) == 0:
        return f"{size >> 30} GiB"
    return f"{size / MIB:g} MiB"


__all__ = [
    "DEFAULT_LIMITS",
    "Limits",
    "describe_bytes",
    "folder_bytes",
    "limits_problem",
    "set_limits",
    "step_timeout",
    "timeout_refusals",
]
