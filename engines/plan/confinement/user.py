"""The user layer: who a step's processes are on the host, and without which privileges.

A service running as root starts bubblewrap as root (so it can bind any path root can reach, such
as a workspace under a 0700 folder), and inside the sandbox ``setpriv`` changes to the step's own
uid/gid, clears the groups, empties every capability set (the bounding set included) and sets
no_new_privs before the shell starts. A real uid change is what drops privilege: a uid mapped
inside a user namespace is still root outside. A service that is not root runs steps as itself
in a user namespace with every capability dropped (bubblewrap's ``--cap-drop ALL``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from veriloop.engines.plan.confinement.paths import system_tool

DEFAULT_STEP_ID = 61000
"""The uid and gid step processes get when the service runs as root (no account needed)."""


@dataclass(frozen=True)
class StepUser:
    """The unprivileged user a root service runs step processes as."""

    uid: int = DEFAULT_STEP_ID
    """Host uid of every step process (it owns the workspace while steps run)."""
    gid: int = DEFAULT_STEP_ID
    """Host gid of every step process."""

    def __post_init__(self) -> None:
        if self.uid <= 0 or self.gid <= 0:
            raise ValueError(f"the step user must not be root: uid {self.uid}, gid {self.gid}")


def service_is_root() -> bool:
    """The service runs as root: step processes change uid inside the sandbox."""
    return os.geteuid() == 0


def user_problem() -> str | None:
    """Why the user layer cannot apply here (one line), or None."""
    if service_is_root() and system_tool("setpriv") is None:
        return "setpriv (util-linux) is not installed, so step processes cannot leave root"
    return None


def drop_privileges(user: StepUser) -> list[str]:
    """The argv prefix, run inside the sandbox by root, that becomes ``user`` with no privilege."""
    return [
        system_tool("setpriv") or "setpriv",
        f"--reuid={user.uid}",
        f"--regid={user.gid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def hand_over(folders: Iterable[Path], user: StepUser) -> None:
    """Make ``user`` own ``folders`` and everything in them, so the step can write there.

    Symbolic links are changed, never followed; a file with more than one link is left alone
    (a link the step made to a file it could not write must not become its own)."""
    for folder in folders:
        _own(folder, user)
        for root, dirs, files in os.walk(folder):
            for name in (*dirs, *files):
                _own(Path(root) / name, user)


def _own(path: Path, user: StepUser) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if (info.st_uid, info.st_gid) == (user.uid, user.gid):
        return
    if info.st_nlink > 1 and not path.is_dir():
        return
    os.lchown(path, user.uid, user.gid)


__all__ = [
    "DEFAULT_STEP_ID",
    "StepUser",
    "drop_privileges",
    "hand_over",
    "service_is_root",
    "user_problem",
]
