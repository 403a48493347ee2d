"""The paths layer: what a step's processes see of the file system.

An allowlist, never the whole disk: the system directories read-only (``/usr``, ``/bin``, ``/sbin``,
``/lib*``, ``/etc`` without its secrets), the interpreter's prefixes wherever they are (a venv, its
base interpreter, an install under ``/tmp`` or a home), the paths the operator names, the
workspace (and the caller's scratch folders) read-write, a new ``/dev`` and ``/proc`` and a private
``/tmp`` (1777, size-limited). Homes, the data directory, key files, ``/srv``, ``/var``, ``/run``,
other runs' folders and the service's own source tree are simply not there.
"""

from __future__ import annotations

import glob
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
"""Read-only in every sandbox (a symbolic link, as on merged-/usr systems, stays a link)."""
ETC_SECRETS = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/security/opasswd",
    "/etc/ssl/private", "/etc/pki/tls/private", "/etc/pki/CA/private", "/etc/letsencrypt",
    "/etc/sudoers", "/etc/sudoers.d", "/etc/krb5.keytab", "/etc/ipsec.secrets", "/etc/ppp",
    "/etc/wireguard", "/etc/NetworkManager/system-connections", "/etc/ssh/ssh_host_*_key",
    "/etc/postgresql", "/etc/mysql/debian.cnf", "/etc/docker/key.json",
)  # fmt: skip
"""Secrets under ``/etc`` (patterns allowed): empty inside the sandbox, whoever could read them."""


SYSTEM_BIN = "/usr/bin:/bin:/usr/sbin:/sbin"
"""Where the tools the layers start (prlimit, setpriv) are looked up, whatever PATH says."""


def system_tool(name: str) -> str | None:
    """The system's own ``name`` (util-linux), never one from the runner's PATH."""
    return shutil.which(name, path=SYSTEM_BIN)


def interpreter_prefixes() -> list[Path]:
    """Where this interpreter and its standard library live: the venv and the base interpreter,
    as given and resolved (a test run in the sandbox starts ``sys.executable``)."""
    found: list[Path] = []
    for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        for path in (Path(prefix), Path(prefix).resolve()):
            if path not in found and path != Path("/"):
                found.append(path)
    return found


def system_view(*, tmp_bytes: int, network: bool) -> list[str]:
    """bwrap options for the system part: ``SYSTEM_PATHS`` without ``ETC_SECRETS``, ``/dev``,
    ``/proc``, a private ``/tmp``; with the network, the resolver configuration ``/etc`` links to."""
    options: list[str] = []
    for name in SYSTEM_PATHS:
        path = Path(name)
        if path.is_symlink():
            options += ["--symlink", str(path.readlink()), name]
        elif path.exists():
            options += ["--ro-bind", name, name]
    options += hidden(_etc_secrets())
    options += ["--dev", "/dev", "--proc", "/proc"]
    options += ["--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    resolver = Path("/etc/resolv.conf")
    if network and resolver.is_symlink() and resolver.exists():
        target = resolver.resolve()
        if not _under(target, [Path("/etc"), Path("/usr")]):
            options += readable([target])
    return options


def readable(paths: Iterable[Path]) -> list[str]:
    """bwrap options binding ``paths`` read-only at the same place (missing ones skipped), their
    parent folders made traversable (bwrap creates them 0700)."""
    options: list[str] = []
    for path in paths:
        if path.exists():
            options += _parents(path) + ["--ro-bind", str(path), str(path)]
    return options


def writable_binds(paths: Iterable[Path]) -> list[str]:
    """bwrap options binding ``paths`` read-write at the same place."""
    options: list[str] = []
    for path in paths:
        options += _parents(path) + ["--bind", str(path), str(path)]
    return options


def hidden(paths: Iterable[Path]) -> list[str]:
    """bwrap options making ``paths`` empty: folders a tmpfs, files ``/dev/null``."""
    options: list[str] = []
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            options += ["--tmpfs", str(path)]
        elif path.exists() or path.is_symlink():
            options += ["--ro-bind", "/dev/null", str(path)]
    return options


def visible_roots(prefixes: Sequence[Path], operator: Sequence[Path]) -> list[Path]:
    """Every folder bound from the host besides the system ones (where hidden paths may fall)."""
    return [Path(name) for name in SYSTEM_PATHS] + [*prefixes, *operator]


def inside(path: Path, roots: Iterable[Path]) -> bool:
    """``path`` is one of ``roots`` or under one of them."""
    return _under(path, roots)


def _etc_secrets() -> list[Path]:
    found = []
    for pattern in ETC_SECRETS:
        found += [Path(name) for name in sorted(glob.glob(pattern))]
    return found


def _parents(path: Path) -> list[str]:
    options: list[str] = []
    for parent in reversed(path.parents[:-1]):  # outermost first, "/" itself left out
        options += ["--perms", "0755", "--dir", str(parent)]
    return options


def _under(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


__all__ = [
    "ETC_SECRETS",
    "SYSTEM_BIN",
    "SYSTEM_PATHS",
    "hidden",
    "inside",
    "interpreter_prefixes",
    "readable",
    "system_tool",
    "system_view",
    "visible_roots",
    "writable_binds",
]
