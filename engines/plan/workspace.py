"""The directory ``llm`` steps' file tools work in, and the tools themselves; nothing leaves it.

A path given to :class:`Workspace` is relative to its root. Rejected with
:class:`WorkspaceEscape`: absolute paths, ``..`` that climbs out of the root,
and symlinks (a final one, or a symlinked directory anywhere on the path)
whose target lies outside the root. Symlinks that stay inside are fine.

Checking the resolved path and then opening it would leave a window in which a
directory could be swapped for an escaping symlink, so reads and writes open
the checked (symlink-free) path one component at a time from the root with
``O_NOFOLLOW``: a component that turned into a symlink after the check is
refused instead of followed (POSIX; elsewhere a plain open of the checked path).

Shell steps are not confined by this: it guards the model's file tools only.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

from langchain_core.tools import BaseTool, StructuredTool

MAX_LISTED = 1000
"""list_files stops after this many entries (and says so)."""
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__"})
"""Directories list_files does not descend into (they can still be read or listed by name)."""

_SAFE_WALK = (
    hasattr(os, "O_NOFOLLOW") and hasattr(os, "O_DIRECTORY") and os.open in os.supports_dir_fd
)


class WorkspaceEscape(ValueError):
    """A path that would leave the workspace (absolute, ``..`` out of the root, or an escaping symlink)."""


class Workspace:
    """A directory the file tools are confined to."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ValueError(f"workspace {str(self.root)!r} is not a directory")

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    # -- paths -----------------------------------------------------------------------------

    def resolve(self, path: str) -> Path:
        """The real (symlink-free) absolute path of ``path`` inside the root; WorkspaceEscape otherwise."""
        text = os.fspath(path)
        if "\x00" in text:
            raise WorkspaceEscape(f"{text!r}: a path cannot contain NUL")
        relative = Path(text or ".")
        if relative.is_absolute() or relative.drive:
            raise WorkspaceEscape(
                f"{text!r} is absolute; give a path relative to the workspace root"
            )
        real = (self.root / relative).resolve()  # follows every symlink, then applies ..
        if real != self.root and self.root not in real.parents:
            raise WorkspaceEscape(f"{text!r} leads outside the workspace (to {str(real)!r})")
        return real

    def relative(self, path: str) -> str:
        """``path`` as a POSIX path relative to the root ("." for the root), after :meth:`resolve`."""
        return self.resolve(path).relative_to(self.root).as_posix() or "."

    # -- files -----------------------------------------------------------------------------

    def read_file(self, path: str) -> str:
        """The text of a file in the workspace (UTF-8, undecodable bytes replaced)."""
        real = self.resolve(path)
        with self._open(real, os.O_RDONLY) as fd, os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read().decode("utf-8", errors="replace")

    def write_file(self, path: str, content: str) -> int:
        """Write ``content`` (UTF-8) to a file in the workspace, creating parent directories; bytes written.

        The file is replaced whole (a new file, with the old one's permissions, renamed over it):
        steps run side by side, and one whose tests import the file meanwhile must see the old
        content or the new, never a truncated file.
        """
        real = self.resolve(path)
        data = content.encode("utf-8")
        with self._parent(real, make_parents=True) as (directory, name):
            if _is_symlink(name, directory):
                raise WorkspaceEscape(f"{name!r} became a symlink after it was checked")
            folder, _, base = name.rpartition("/")  # a folder only in the non-POSIX fallback
            temp = f"{folder}{'/' if folder else ''}.{base}.{secrets.token_hex(6)}.partial"
            try:
                fd = _open_in(directory, temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
                try:
                    with contextlib.suppress(FileNotFoundError):
                        old = os.stat(name, dir_fd=directory, follow_symlinks=False)
                        os.fchmod(fd, stat.S_IMODE(old.st_mode))
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                finally:
                    os.close(fd)
                os.replace(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=directory)
                raise
        return len(data)

    def list_files(self, path: str = ".") -> list[str]:
        """Files under ``path`` (recursively, sorted), as POSIX paths relative to the root.

        Directories in :data:`SKIPPED_DIRS` and symlinked directories are not descended into.
        At most :data:`MAX_LISTED` entries.
        """
        real = self.resolve(path)
        if real.is_file():
            return [real.relative_to(self.root).as_posix()]
        if not real.is_dir():
            raise FileNotFoundError(f"{path!r} does not exist in the workspace")
        found: list[str] = []
        for directory, dirnames, filenames in os.walk(real):  # followlinks=False
            dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
            base = Path(directory)
            for name in sorted(filenames):
                found.append((base / name).relative_to(self.root).as_posix())
                if len(found) >= MAX_LISTED:
                    return sorted(found)
        return sorted(found)

    @contextlib.contextmanager
    def _parent(
        self, real: Path, *, make_parents: bool = False
    ) -> Iterator[tuple[int | None, str]]:
        """The fd of ``real``'s directory (already checked), reached without following any symlink,
        and ``real``'s name in it; the fd is None where the platform cannot walk by descriptors."""
        parts = PurePosixPath(real.relative_to(self.root).as_posix()).parts
        if not parts or parts == (".",):
            raise IsADirectoryError(f"{str(real)!r} is the workspace root, not a file")
        if not _SAFE_WALK:  # pragma: no cover - non-POSIX fallback
            if make_parents:
                real.parent.mkdir(parents=True, exist_ok=True)
            yield None, str(real)
            return
        directory = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for name in parts[:-1]:
                child = self._enter(directory, name, make_parents)
                os.close(directory)
                directory = child
            yield directory, parts[-1]
        finally:
            os.close(directory)

    @contextlib.contextmanager
    def _open(self, real: Path, flags: int, *, make_parents: bool = False) -> Iterator[int]:
        """Open ``real`` (already checked) without following any symlink on the way; yields the fd."""
        with self._parent(real, make_parents=make_parents) as (directory, name):
            fd = _open_in(directory, name, flags)
        try:
            yield fd
        finally:
            os.close(fd)

    @staticmethod
    def _enter(directory: int, name: str, make: bool) -> int:
        """The fd of directory ``name`` inside ``directory``, never reached through a symlink."""
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        try:
            try:
                return os.open(name, flags, dir_fd=directory)
            except FileNotFoundError:
                if not make:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=directory)
                return os.open(name, flags, dir_fd=directory)
        except FileNotFoundError:
            raise
        except OSError as exc:  # ELOOP / ENOTDIR: a symlink appeared after the check, or a file
            if _is_symlink(name, directory):
                raise WorkspaceEscape(f"{name!r} became a symlink after it was checked") from exc
            raise


def _open_in(directory: int | None, name: str, flags: int) -> int:
    """Open ``name`` in ``directory`` (an fd; None: ``name`` is a whole path), never through a symlink."""
    try:
        return os.open(name, flags | getattr(os, "O_NOFOLLOW", 0), 0o666, dir_fd=directory)
    except OSError as exc:
        if _is_symlink(name, directory):
            raise WorkspaceEscape(f"{name!r} became a symlink after it was checked") from exc
        raise


def _is_symlink(name: str, directory: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        return False


def workspace_tools(ws: Workspace) -> list[BaseTool]:
    """``read_file``, ``write_file`` and ``list_files`` over ``ws``; every error comes back as text
    starting with ``Error:`` (the model reads it), never as an exception."""

    def read_file(path: str) -> str:
        """Read a text file of the workspace. `path` is relative to the workspace root."""
        return _as_text(lambda: ws.read_file(path), path)

    def write_file(path: str, content: str) -> str:
        """Write (create or overwrite) a text file in the workspace, creating parent directories.
        `path` is relative to the workspace root."""
        return _as_text(
            lambda: f"wrote {ws.write_file(path, content)} bytes to {ws.relative(path)}", path
        )

    def list_files(path: str = ".") -> str:
        """List the files under a directory of the workspace (recursively), one path a line,
        relative to the workspace root."""

        def listing() -> str:
            files = ws.list_files(path)
            lines = "\n".join(files) if files else "(no files)"
            if len(files) >= MAX_LISTED:
                lines += f"\n... (stopped after {MAX_LISTED} entries; list a subdirectory)"
            return lines

        return _as_text(listing, path)

    return [StructuredTool.from_function(func=fn) for fn in (read_file, write_file, list_files)]


def _as_text(action: Callable[[], str], path: str) -> str:
    """``action()``, or its error as ``Error: ...`` text naming the path the model gave."""
    try:
        return action()
    except (WorkspaceEscape, UnicodeError) as exc:
        return f"Error: {exc}"
    except OSError as exc:  # the model's path only: no absolute host paths in its conversation
        return f"Error: {type(exc).__name__}: {exc.strerror or 'failed'} ({path!r})"
