"""Hidden tests and fixtures: files the operator's ``hidden:`` globs name leave the workspace for
the snapshot store when the plan starts, so no step sees them (not in its workspace, not in its
sandbox); the judge's tree of every step has them, and they go back when the run finishes."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from veriloop.engines.plan.judge.scope import matches
from veriloop.engines.plan.judge.snapshot import STORE, SnapshotMissing, read_blob, store_file
from veriloop.engines.plan.judge.testrun import workspace_files


def hide(workspace: Path, patterns: Sequence[str], store: Path = STORE) -> dict[str, str]:
    """Move the files matching ``patterns`` into the store; ``{path: sha256}`` of what moved."""
    if not patterns or not Path(workspace).is_dir():
        return {}
    workspace = Path(workspace)
    moved = {}
    for path in list(workspace_files(workspace)):
        rel = path.relative_to(workspace).as_posix()
        if matches(rel, patterns):
            moved[rel] = store_file(path, store)
            path.unlink()
    return moved


def restore(workspace: Path, hidden: Mapping[str, str], store: Path = STORE) -> list[str]:
    """Put the hidden files back (over whatever a step wrote there); the paths that could not be
    restored because their copy is gone."""
    lost = []
    for rel, digest in sorted(hidden.items()):
        try:
            data = read_blob(digest, store)
        except SnapshotMissing:
            lost.append(rel)
            continue
        target = Path(workspace) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            target.unlink()  # a link a step put there is replaced, never followed
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
    return lost


__all__ = ["hide", "restore"]
