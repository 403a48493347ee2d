"""What a step leaves on the host: no setuid or setgid bit survives it, and a run's folders go.

A file a step makes keeps its mode bits outside the sandbox, so a setuid copy of a shell made
inside would be setuid on the host (as the step's user, or root's in ``host`` mode). After each
step process ends, :func:`strip_privilege_bits` clears those bits on everything under its
writable folders, never following a symbolic link. :func:`remove_tree` deletes a run's folders
however the step left their modes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

PRIVILEGE_BITS = stat.S_ISUID | stat.S_ISGID
"""Mode bits that lend the owner's user or group to whoever runs the file."""
OWNER_RWX = stat.S_IRWXU


def strip_privilege_bits(folders: Iterable[Path]) -> list[str]:
    """Clear setuid and setgid on every file and folder under ``folders`` (themselves included);
    the paths that had them. Symbolic links are never followed; a folder this process may not
    enter (a step made it 0000) is opened to its owner first, so nothing is left unscanned."""
    stripped: list[str] = []
    for folder in folders:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            _strip_in(os.fspath(folder), stripped)
    return stripped


def _strip_in(path: str, stripped: list[str]) -> None:
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        return
    _clear(path, info.st_mode, stripped)
    pending = [path]
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except PermissionError:
            _open_to_owner(folder)
            entries = list(os.scandir(folder))
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(mode):
                continue
            _clear(entry.path, mode, stripped)
            if stat.S_ISDIR(mode):
                pending.append(entry.path)


def _clear(path: str, mode: int, stripped: list[str]) -> None:
    """Drop the privilege bits of ``path`` (a file or folder, by its lstat mode), through an
    O_PATH descriptor opened without following links, so a path swapped for a link meanwhile is
    refused rather than followed."""
    if not mode & PRIVILEGE_BITS or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return
    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW)
    try:
        now = os.fstat(fd).st_mode
        if stat.S_ISREG(now) or stat.S_ISDIR(now):
            os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(now) & ~PRIVILEGE_BITS)
            stripped.append(path)
    finally:
        os.close(fd)


def _open_to_owner(folder: str) -> None:
    """Give a folder's owner (this process) rwx on it, the link never followed."""
    fd = os.open(folder, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY)
    try:
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(os.fstat(fd).st_mode) | OWNER_RWX)
    finally:
        os.close(fd)


def remove_tree(folder: Path) -> None:
    """Delete ``folder`` and everything in it, opening folders a step closed to their owner (a
    service that is not root owns them but may not delete from a 0500 folder); gone already is
    fine."""

    def reopen(_function, path: str, excinfo) -> None:
        if isinstance(excinfo[1], FileNotFoundError):
            return
        _open_to_owner(os.path.dirname(path))
        if os.path.isdir(path) and not os.path.islink(path):
            _open_to_owner(path)
            shutil.rmtree(path, onerror=reopen)
        else:
            os.unlink(path)

    if os.path.lexists(folder):
        shutil.rmtree(folder, onerror=reopen)


__all__ = ["PRIVILEGE_BITS", "remove_tree", "strip_privilege_bits"]
