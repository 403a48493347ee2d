"""What a step may change (its write scope), and what it changed outside it.

A step's scope is an allowlist: the ``writes:`` globs of its manifest entry, or the default, which
is the project's Python source plus new files of inert kinds, and nothing else: no tests
(``test_*.py``, ``*_test.py``, ``conftest.py``, anything under a ``tests`` folder), no runner
configuration or start-up hooks (``setup.py``, ``noxfile.py``, ``sitecustomize.py``,
``usercustomize.py``, ``.cfg``, ``.ini``, ``.toml``, ``.pth`` files), no existing non-Python file
(data, which checks and tests read) changed or deleted, no new file an import could load as code
(``.so``, archives) or packaging metadata, nothing in a hidden file or folder (a path segment
starting with ``.``). ``writes_tests: true`` adds test
modules and test data (fixtures under ``tests/`` included), never a ``conftest.py``: a conftest is a
pytest plugin that can change the outcome of any test, so it needs a ``writes:`` glob of its own. A
trick nobody listed fails by construction: a path is in scope only when a rule admits it.

Bytecode and caches (``__pycache__``, ``*.pyc``, ``.pytest_cache`` and other tool caches, the
runner's own ``.veriloop`` folder) are the one exception: a step's honest runs write them, so they
are neither a change nor ever carried into the judge's tree.

The snapshot (:mod:`~veriloop.engines.plan.judge.snapshot`) keeps only the files the judge may read;
what it leaves out (hidden folders, virtualenvs, build folders, symlinks) is fingerprinted here by
:func:`unsnapshotted` (path, type, size and times of every entry, per folder), so a write there is
seen too, and named by the folder it went into.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path, PurePosixPath

from veriloop.engines.plan.judge.testrun import SKIP_DIRS

CACHE_DIRS = frozenset(
    {
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".hypothesis",
        ".cache",
        ".veriloop",
    }
)
"""Folders of bytecode, tool caches and the runner's own state: never a change, never judged."""
CACHE_SUFFIXES = (".pyc", ".pyo")
"""Bytecode files, wherever they are."""
RUNNER_FILES = frozenset(
    {"setup.py", "noxfile.py", "conftest.py", "sitecustomize.py", "usercustomize.py"}
)
"""Python files that configure a runner or the interpreter, not the project's code."""
LOADABLE_SUFFIXES = frozenset({".so", ".pyd", ".dll", ".dylib", ".egg", ".whl", ".zip", ".pyz"})
"""Files an import or a path entry can load as code: never a new file in the default scope."""
PACKAGING_FILES = frozenset(
    {"PKG-INFO", "MANIFEST.in", "Makefile", "Pipfile", "Pipfile.lock", "poetry.lock", "uv.lock"}
)
"""Packaging and build metadata (``.cfg``/``.toml``/``.ini`` files are runner configuration)."""
MAX_ENTRIES = 100_000
"""Entries :func:`unsnapshotted` looks at; past this a folder's fingerprint says so."""


def is_cache(rel: str) -> bool:
    """Bytecode or a cache: never a change and never carried into the judge's tree."""
    parts = PurePosixPath(rel).parts
    return rel.endswith(CACHE_SUFFIXES) or any(part in CACHE_DIRS for part in parts)


def is_test_path(rel: str) -> bool:
    """A test file by path: ``test_*.py``, ``*_test.py``, ``conftest.py``, or under ``tests/``."""
    path = PurePosixPath(rel)
    name = path.name
    return (
        "tests" in path.parts[:-1]
        or name == "conftest.py"
        or (name.startswith("test_") and name.endswith(".py"))
        or name.endswith("_test.py")
    )


def _hidden(rel: str) -> bool:
    return any(part.startswith(".") for part in PurePosixPath(rel).parts)


def in_scope(rel: str, state: str, writes: Sequence[str] | None, *, writes_tests: bool) -> bool:
    """The step may make change ``state`` (``added``, ``changed``, ``deleted``) to ``rel`` (caches
    aside, which are never a change)."""
    if writes_tests and is_test_path(rel) and not _hidden(rel) and not _runner_config_file(rel):
        return True
    if writes is not None:
        return matches(rel, writes)
    if _hidden(rel) or is_test_path(rel) or _runner_config_file(rel):
        return False
    if rel.endswith(".py"):
        return True
    # A new file is no data any check or test read before the step; only inert kinds: code an
    # import could load (extension modules, archives on a path) and packaging metadata stay out.
    return state == "added" and not _loadable_or_packaging(rel)


def _loadable_or_packaging(rel: str) -> bool:
    path = PurePosixPath(rel)
    return (
        path.suffix in LOADABLE_SUFFIXES
        or path.name in PACKAGING_FILES
        or any(part.endswith((".egg-info", ".dist-info")) for part in path.parts)
    )


def matches(rel: str, patterns: Iterable[str]) -> bool:
    """``rel`` matches one of the globs."""
    return any(_glob(pattern).fullmatch(rel) for pattern in patterns)


def literal_prefix(pattern: str) -> str:
    """The part of a glob before its first wildcard: every path the glob matches starts with it."""
    return re.split(r"[*?\[]", pattern, maxsplit=1)[0]


def _runner_config_file(rel: str) -> bool:
    """Runner configuration, even under ``tests/``: a test writer writes tests, not the runner's
    settings or plugins (ini, cfg, toml, pth files, start-up hooks, ``conftest.py``)."""
    name = PurePosixPath(rel).name
    return name in RUNNER_FILES or name.endswith((".ini", ".cfg", ".toml", ".pth"))


def outside_scope(
    diff: Mapping[str, str],
    writes: Sequence[str] | None,
    *,
    writes_tests: bool,
    claimed: Iterable[str] = (),
) -> list[str]:
    """Paths of ``diff`` (``{path: state}``) the step was not allowed to change; ``claimed``: globs
    other steps of the plan declared in their ``writes:`` (their files, not this step's)."""
    others = [_glob(pattern) for pattern in claimed]
    return sorted(
        rel
        for rel, state in diff.items()
        if not is_cache(rel)
        and not in_scope(rel, state, writes, writes_tests=writes_tests)
        and not any(pattern.fullmatch(rel) for pattern in others)
    )


def in_scope_changes(
    diff: Mapping[str, str], writes: Sequence[str] | None, *, writes_tests: bool
) -> dict[str, str]:
    """The part of ``diff`` the judge's tree carries: in scope, no caches."""
    return {
        rel: state
        for rel, state in diff.items()
        if not is_cache(rel) and in_scope(rel, state, writes, writes_tests=writes_tests)
    }


def unsnapshotted(workspace: Path) -> dict[str, str]:
    """Fingerprints of what the snapshot leaves out: ``{folder/: digest}`` for each hidden,
    virtualenv or build folder (caches skipped), ``{path: "symlink:<target>"}`` for each symlink
    and ``{path: "special"}`` for other non-regular files."""
    workspace = Path(workspace)
    found: dict[str, str] = {}
    if not workspace.is_dir():
        return found
    seen = 0
    for root, dirs, files in os.walk(workspace):
        base = Path(root)
        kept = []
        for name in dirs:
            path = base / name
            rel = path.relative_to(workspace).as_posix()
            seen += 1
            if name in CACHE_DIRS or seen > MAX_ENTRIES:
                continue
            if path.is_symlink():
                found[rel] = f"symlink:{os.readlink(path)}"
            elif name.startswith(".") or name in SKIP_DIRS or (path / "pyvenv.cfg").exists():
                found[f"{rel}/"] = _folder_digest(path)
            else:
                kept.append(name)
        dirs[:] = kept
        for name in files:
            seen += 1
            if name.endswith(CACHE_SUFFIXES) or seen > MAX_ENTRIES:
                continue
            path = base / name
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(mode):
                found[path.relative_to(workspace).as_posix()] = f"symlink:{os.readlink(path)}"
            elif not stat.S_ISREG(mode):
                found[path.relative_to(workspace).as_posix()] = "special"
    if seen > MAX_ENTRIES:
        found["*"] = f"more than {MAX_ENTRIES} entries"
    return found


def unsnapshotted_changes(before: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """Folders and links of :func:`unsnapshotted` that were added, changed or removed."""
    return sorted(
        rel for rel in before.keys() | now.keys() if before.get(rel) != now.get(rel) and rel != "*"
    )


def _folder_digest(folder: Path) -> str:
    """Every entry under ``folder`` (caches skipped): path, type, size, modification and change
    times. A rewrite that restores the modification time still moves the change time."""
    digest = hashlib.sha256()
    count = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in CACHE_DIRS)
        for name in sorted(files + [d for d in dirs if (Path(root) / d).is_symlink()]):
            if name.endswith(CACHE_SUFFIXES):
                continue
            count += 1
            if count > MAX_ENTRIES:
                return f"more than {MAX_ENTRIES} entries"
            path = Path(root) / name
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else ""
            digest.update(
                f"{path.relative_to(folder).as_posix()}\0{st.st_mode}\0{st.st_size}\0"
                f"{st.st_mtime_ns}\0{st.st_ctime_ns}\0{link}\n".encode(errors="surrogateescape")
            )
    return digest.hexdigest()


@lru_cache(maxsize=1024)
def _glob(pattern: str) -> re.Pattern[str]:
    """``pattern`` as a regex over a relative path: ``**`` any number of folders, ``*`` and ``?``
    within one path segment, ``[...]`` a character class."""
    out = []
    parts = pattern.strip("/").split("/")
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        out.append(_segment(part) + ("" if last else "/"))
    return re.compile("".join(out), re.DOTALL)


def _segment(part: str) -> str:
    out, i = [], 0
    while i < len(part):
        char = part[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := part.find("]", i + 2)) != -1:
            body = part[i + 1 : end].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body[:1] in "!^" and body else "[" + body + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


__all__ = [
    "CACHE_DIRS",
    "in_scope",
    "in_scope_changes",
    "is_cache",
    "is_test_path",
    "literal_prefix",
    "matches",
    "outside_scope",
    "unsnapshotted",
    "unsnapshotted_changes",
]
