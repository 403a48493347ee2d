"""The judge's tree: where checks and test runs of a step run, instead of the live workspace.

:func:`build_tree` lays out a set of files, each either a pre-step blob of the snapshot store
(hard-linked, so a tree of a large project costs one link a file; copied when the store sits on
another file system) or an in-scope change of the step (copied). Nothing else is in it: not the
step's caches or bytecode, not a file it wrote outside its scope, not the live workspace. Files are
read-only (0444, 0555 for executables) and folders 0555, readable by any user, so the tree stays a
read-only copy even unsandboxed; in bubblewrap it is also bound read-only.

Beside the tree (never inside it) is a scratch folder for what the judge's processes write: HOME,
TMPDIR and a private bytecode cache (``PYTHONPYCACHEPREFIX``), so no ``.pyc`` the step forged is
ever read. :meth:`JudgeTree.env` is the rest of the judge's environment: no user site-packages,
no ``PYTHONPATH``, pytest plugins never autoloaded (only those the operator names with ``-p``, and
veriloop's reporter); :meth:`JudgeTree.pytest_options` passes the operator's runner configuration,
taken from the snapshot, explicitly (``-c``, ``--rootdir``), so a config file of any name the step
added is never read.
"""

from __future__ import annotations

import atexit
import configparser
import contextlib
import os
import shutil
import stat
import tempfile
import threading
import tomllib
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from veriloop.engines.plan.judge.snapshot import (
    SnapshotMissing,
    active_store,
    read_blob,
    sha256_file,
)

PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
"""Where pytest looks for its configuration in the root folder, in its order."""
EMPTY_CONFIG = "[pytest]\n"
"""The configuration used when the snapshot has none (pytest would otherwise search for one)."""


@dataclass
class JudgeTree:
    """A built tree and its scratch folder (both under ``base``, removed by :meth:`close`)."""

    base: Path
    """The folder holding both (removed with everything in it)."""
    root: Path
    """The tree: pre-step files and in-scope changes, read-only."""
    scratch: Path
    """Where the judge's processes write (HOME, TMPDIR, bytecode)."""
    config: Path
    """The pytest configuration file passed with ``-c``."""
    files: dict[str, str | Path]
    """What the tree holds: ``{path: blob digest or source file}``."""
    folders: list[Path]
    """The tree's folders, deepest last (made writable again to remove them)."""
    runnable: frozenset[str] = frozenset()
    """Paths placed as executables."""
    reusable: bool = False
    """Only sandboxed processes used it (bound read-only): it can be patched for a later check."""

    def env(self) -> dict[str, str]:
        """The environment the judge's processes get on top of a step's."""
        return {
            "HOME": str(self.scratch / "home"),
            "TMPDIR": str(self.scratch / "tmp"),
            "PYTHONPYCACHEPREFIX": str(self.scratch / "pycache"),
            "PYTHONNOUSERSITE": "1",
            "PYTHONPATH": "",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        }

    def pytest_options(self) -> list[str]:
        """pytest's options that fix its configuration to the operator's."""
        return ["-c", str(self.config), "--rootdir", str(self.root), "-p", "no:cacheprovider"]

    def retire(self) -> None:
        """Hand the tree back in the background: to the pool of idle trees when it is reusable
        (its scratch folder emptied), else removed (pending work finishes before the process
        exits)."""
        _remover.submit(self._park if self.reusable else self.close)

    def _park(self) -> None:
        try:
            shutil.rmtree(self.scratch)
            _scratch(self.scratch)
        except OSError:
            self.close()
            return
        with _pool_lock:
            if len(_pool) < POOL_SIZE:
                _pool.append(self)
                return
        self.close()

    def close(self) -> None:
        """Remove the tree and its scratch folder (read-only folders made writable first)."""
        for folder in self.folders:
            with contextlib.suppress(OSError):
                os.chmod(folder, 0o755)
        shutil.rmtree(self.base, ignore_errors=True)


@atexit.register
def _drain_pool() -> None:
    """Idle trees go with the process (the remover's pending work is joined at interpreter
    shutdown before exit handlers run: nothing is parked after this)."""
    with _pool_lock:
        idle = list(_pool)
        _pool.clear()
    for judge in idle:
        judge.close()


def judge_files(
    tree: Mapping[str, str], workspace: Path, changes: Mapping[str, str]
) -> dict[str, str | Path]:
    """The judge's files: the pre-step ``tree`` with the step's in-scope ``changes``
    (``{path: "added" | "changed" | "deleted"}``) applied from ``workspace``."""
    files: dict[str, str | Path] = dict(tree)
    for rel, state in changes.items():
        if state == "deleted":
            files.pop(rel, None)
        else:
            files[rel] = Path(workspace) / rel
    return files


def build_tree(
    files: Mapping[str, str | Path],
    *,
    workspace: Path,
    executable: Iterable[str] = (),
    store: Path | None = None,
    reuse: bool = False,
    required: Iterable[str] = (),
) -> JudgeTree:
    """A tree holding exactly ``files`` (see :func:`judge_files`). A blob missing from the store
    (too large to keep) is copied from ``workspace`` only when the copy still has its pre-step
    hash; otherwise the file is left out. ``executable``: paths whose pre-step copy was
    executable. ``reuse``: only sandboxed processes will use the tree (bound read-only), so an
    idle tree that only such processes used is patched into it (its differing files replaced,
    the step's copies always), and it goes back to the pool when retired. ``store``: see
    :func:`~veriloop.engines.plan.judge.snapshot.active_store`. ``required``: paths the tree must
    hold (the run's hidden files, which have no live copy): SnapshotMissing naming those it could
    not place."""
    store = active_store(store)
    runnable = frozenset(executable)
    judge = None
    if reuse:
        with _pool_lock:
            for index, idle in enumerate(_pool):
                if idle.base.parent == store.parent:
                    judge = _pool.pop(index)
                    break
    if judge is None:
        base = Path(tempfile.mkdtemp(prefix="veriloop-judge-", dir=store.parent))
        os.chmod(base, 0o755)
        root, scratch = base / "tree", base / "scratch"
        root.mkdir()
        _scratch(scratch)
        judge = JudgeTree(base, root, scratch, scratch / "pytest.ini", {}, [root])
    try:
        _lay_out(judge, files, runnable, Path(workspace), store)
        if missing := sorted(rel for rel in required if not (judge.root / rel).is_file()):
            raise SnapshotMissing(
                f"the judge's tree cannot hold {', '.join(missing)}: the stored copy is gone or "
                "was altered"
            )
    except BaseException:
        judge.close()
        raise
    judge.reusable = reuse
    return judge


def _lay_out(
    judge: JudgeTree,
    files: Mapping[str, str | Path],
    runnable: frozenset[str],
    workspace: Path,
    store: Path,
) -> None:
    """Make ``judge.root`` hold exactly ``files``: what differs from what it holds is replaced."""
    root = judge.root
    folders = set(judge.folders)
    for folder in folders:
        os.chmod(folder, 0o755)
    for rel, source in judge.files.items():
        if _differs(rel, source, files, judge.runnable, runnable):
            (root / rel).unlink(missing_ok=True)
    for rel, source in files.items():
        if rel in judge.files and not _differs(
            rel, judge.files[rel], files, judge.runnable, runnable
        ):
            continue
        target = root / rel
        if target.parent not in folders:
            target.parent.mkdir(parents=True, exist_ok=True)
            folders.update(f for f in target.parents if f.is_relative_to(root))
        if isinstance(source, Path):
            _copy(source, target, None)
        else:
            _place_blob(source, target, store, workspace / rel, rel in runnable)
    judge.files, judge.runnable = dict(files), runnable
    judge.config = _config(files, root, judge.scratch)
    judge.folders = sorted(folders, key=lambda f: len(f.parts))
    for folder in reversed(judge.folders):
        os.chmod(folder, 0o555)


def _differs(
    rel: str,
    source: str | Path,
    files: Mapping[str, str | Path],
    runnable_before: frozenset[str],
    runnable: frozenset[str],
) -> bool:
    """The tree's ``rel`` (from ``source``) is not what ``files`` wants there (a step's copy
    always differs: it is copied again)."""
    return (
        isinstance(source, Path)
        or files.get(rel) != source
        or (rel in runnable_before) != (rel in runnable)
    )


def _scratch(scratch: Path) -> None:
    """An empty scratch folder, writable by the judge's processes whoever they run as."""
    for folder in ("home", "tmp", "pycache"):
        (scratch / folder).mkdir(parents=True)
    for folder in (scratch, *scratch.iterdir()):
        os.chmod(folder, 0o777)


def executable_files(workspace: Path, tree: Mapping[str, str]) -> list[str]:
    """Files of ``tree`` that are executable in ``workspace`` now (taken with the snapshot)."""
    found = []
    for rel in tree:
        with contextlib.suppress(OSError):
            if os.stat(Path(workspace) / rel, follow_symlinks=False).st_mode & stat.S_IXUSR:
                found.append(rel)
    return sorted(found)


_remover = ThreadPoolExecutor(max_workers=1, thread_name_prefix="veriloop-judge-remover")
"""Removes retired trees, one at a time, off the step's path."""
POOL_SIZE = 4
"""Idle trees kept for reuse (one per check that may run at once is plenty)."""
_pool: list[JudgeTree] = []
_pool_lock = threading.Lock()


def _place_blob(digest: str, target: Path, store: Path, fallback: Path, runnable: bool) -> None:
    blob = store / digest[:2] / digest
    if not runnable:
        try:
            os.link(blob, target)
            # The inode just linked (a link shares its mode), readable by the judge's user: the
            # path may hold a new 0600 copy of the same content since it was last linked.
            os.chmod(target, 0o444)
            return
        except OSError:  # gone, another file system, or links refused: a copy does
            target.unlink(missing_ok=True)
    try:
        data = read_blob(digest, store)
    except SnapshotMissing:
        # Too large to keep: the live file only when it still is what it was before the step.
        _copy(fallback, target, digest)
        return
    with target.open("xb") as out:
        out.write(data)
    os.chmod(target, 0o555 if runnable else 0o444)


def _copy(source: Path, target: Path, digest: str | None) -> None:
    """Copy a regular file without following a symlink; with ``digest``, keep the copy only when
    its hash matches (else leave it out)."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return  # gone or a symlink now: not a file the step may hand the judge
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            return
        with target.open("xb") as out:  # never through a link left at the path
            shutil.copyfileobj(handle, out, 1 << 20)
    if digest is not None and sha256_file(target) != digest:
        target.unlink()
        return
    os.chmod(target, 0o555 if mode & stat.S_IXUSR else 0o444)


def _config(files: Mapping[str, str | Path], root: Path, scratch: Path) -> Path:
    """The operator's pytest configuration: the first file of :data:`PYTEST_CONFIGS` in the
    tree's root with a pytest section (the pre-step copy, unless the step's scope let it change
    that file); an empty one in scratch when there is none."""
    for name in PYTEST_CONFIGS:
        if name not in files:
            continue
        try:
            text = (root / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if _has_pytest_section(name, text):
            return root / name
    config = scratch / "pytest.ini"
    config.write_text(EMPTY_CONFIG)
    return config


def _has_pytest_section(name: str, text: str) -> bool:
    if name in ("pytest.ini", ".pytest.ini"):
        return True
    try:
        if name == "pyproject.toml":
            return "ini_options" in tomllib.loads(text).get("tool", {}).get("pytest", {})
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(text)
    except (ValueError, configparser.Error):
        return False
    return parser.has_section("tool:pytest" if name == "setup.cfg" else "pytest")


__all__ = ["JudgeTree", "build_tree", "executable_files", "judge_files"]
