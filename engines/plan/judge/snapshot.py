"""Pre-step copies of a workspace, kept out of the step's reach, for checks that judge a step.

:func:`take_snapshot` stores every workspace file (hidden folders, virtualenvs and caches excluded,
as for test discovery) in a content-addressed store outside the workspace and returns the tree:
``{relative path: sha256}``, small enough for graph state. Blobs are shared by every step and run
(identical content is stored once) and outlive a crash, so a resumed step still has its pre-step
copies. Reading a blob checks its hash: a store that was tampered with reads as missing, never as
the step's version.

:func:`changed_files` is the step's diff against the tree; the judge's tree
(:mod:`~veriloop.engines.plan.judge.tree`) is built from the blobs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from veriloop.engines.plan.judge.testrun import workspace_files

STORE = Path(tempfile.gettempdir()) / "veriloop-snapshots"
"""Where blobs live: outside every workspace (a sandboxed step has a private /tmp)."""
MAX_FILES = 5000
"""Most files a snapshot keeps."""
MAX_FILE_BYTES = 5_000_000
"""A larger file (data, not code) is fingerprinted but not copied."""
MAX_TOTAL_BYTES = 200_000_000
"""Most bytes a snapshot copies."""
KEEP_S = 7 * 24 * 3600.0
"""A blob no snapshot has used for a week is removed: a step's checks read its pre-step
copies within its own run, and a long-running service would otherwise fill its disk."""
PRUNE_EVERY_S = 3600.0
"""How often one process looks for such blobs (the first snapshot it takes, then hourly)."""

_pruned_at: dict[Path, float] = {}


class SnapshotMissing(LookupError):
    """A pre-step copy is gone or no longer matches its hash."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def take_snapshot(workspace: Path, store: Path = STORE) -> tuple[dict[str, str], bool]:
    """The workspace's tree ``{path: sha256}`` with its blobs stored; True when it was cut short."""
    workspace = Path(workspace)
    if not workspace.is_dir():
        return {}, False
    store.mkdir(mode=0o700, parents=True, exist_ok=True)
    if time.time() - _pruned_at.get(store, 0.0) >= PRUNE_EVERY_S:
        _pruned_at[store] = time.time()
        prune(store)
    tree: dict[str, str] = {}
    total = 0
    for path in workspace_files(workspace):
        if path.suffix == ".pyc":
            continue
        if len(tree) >= MAX_FILES:
            return tree, True
        try:
            size = path.stat().st_size
            digest = sha256_file(path)
            if size <= MAX_FILE_BYTES and total + size <= MAX_TOTAL_BYTES:
                total += size
                try:  # stored once, for all steps; its time says it is still in use
                    os.utime(store / digest[:2] / digest)
                except FileNotFoundError:
                    digest = _store(path, store)
        except FileNotFoundError:
            continue  # a parallel step's temporary file, renamed meanwhile
        tree[path.relative_to(workspace).as_posix()] = digest
    return tree, False


def current_tree(workspace: Path) -> dict[str, str]:
    """``{path: sha256}`` of the workspace now (same files as a snapshot)."""
    workspace = Path(workspace)
    if not workspace.is_dir():
        return {}
    tree = {}
    for path in workspace_files(workspace):
        if path.suffix != ".pyc":
            try:
                tree[path.relative_to(workspace).as_posix()] = sha256_file(path)
            except FileNotFoundError:
                continue  # a parallel step's temporary file, renamed meanwhile
    return tree


def changed_files(before: Mapping[str, str], now: Mapping[str, str]) -> dict[str, str]:
    """``{path: "added" | "changed" | "deleted"}`` between two trees."""
    found = {}
    for rel in sorted(before.keys() | now.keys()):
        if rel not in before:
            found[rel] = "added"
        elif rel not in now:
            found[rel] = "deleted"
        elif before[rel] != now[rel]:
            found[rel] = "changed"
    return found


def prune(store: Path = STORE, keep_s: float = KEEP_S) -> int:
    """Remove blobs (and abandoned partial copies) untouched for ``keep_s``; how many went."""
    if not store.is_dir():
        return 0
    cutoff = time.time() - keep_s
    removed = 0
    for path in [*store.glob("*/*"), *store.glob(".partial-*")]:
        with contextlib.suppress(FileNotFoundError):  # another process pruned it meanwhile
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
    return removed


def read_blob(digest: str, store: Path = STORE) -> bytes:
    """The pre-step content with this hash (SnapshotMissing when gone or tampered with)."""
    path = store / digest[:2] / digest
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SnapshotMissing(f"the pre-step copy {digest[:12]} is gone") from exc
    if hashlib.sha256(data).hexdigest() != digest:
        raise SnapshotMissing(f"the pre-step copy {digest[:12]} was altered")
    return data


def store_file(path: Path, store: Path = STORE) -> str:
    """Store one file's content (once per content); its sha256."""
    store.mkdir(mode=0o700, parents=True, exist_ok=True)
    return _store(path, store)


def _store(path: Path, store: Path) -> str:
    """Copy ``path`` into the store, hashing what was copied (a file that changes meanwhile is
    stored as read); its sha256."""
    digest = hashlib.sha256()
    fd, temp = tempfile.mkstemp(dir=store, prefix=".partial-")
    try:
        with os.fdopen(fd, "wb") as out, path.open("rb") as source:
            while chunk := source.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        name = digest.hexdigest()
        target = store / name[:2] / name
        target.parent.mkdir(mode=0o700, exist_ok=True)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return name


__all__ = [
    "STORE",
    "SnapshotMissing",
    "changed_files",
    "current_tree",
    "prune",
    "read_blob",
    "sha256_file",
    "store_file",
    "take_snapshot",
]
