"""The workspace the file tools are confined to: paths, symlinks, and the tools' text errors."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from veriloop.engines.plan.workspace import Workspace, WorkspaceEscape, workspace_tools


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.txt").write_text("alpha")
    return Workspace(root)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "secret.txt").write_text("top secret")
    return secret


def tools(ws: Workspace) -> dict:
    return {tool.name: tool for tool in workspace_tools(ws)}


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "src/../../root2/x", ".."])
def test_paths_that_leave_the_root_are_rejected(ws: Workspace, path: str) -> None:
    with pytest.raises(WorkspaceEscape):
        ws.resolve(path)
    with pytest.raises(WorkspaceEscape):
        ws.write_file(path, "x")


def test_paths_inside_resolve(ws: Workspace) -> None:
    assert ws.resolve("src/a.txt") == ws.root / "src" / "a.txt"
    assert ws.resolve("src/../src/a.txt") == ws.root / "src" / "a.txt"
    assert ws.resolve(".") == ws.root
    assert ws.resolve("new/dir/file.txt") == ws.root / "new" / "dir" / "file.txt"
    assert ws.relative("src/./a.txt") == "src/a.txt"


def test_symlink_to_outside_is_rejected(ws: Workspace, outside: Path) -> None:
    (ws.root / "tmp_link").symlink_to("/tmp")
    (ws.root / "secret_link").symlink_to(outside / "secret.txt")
    for path in ("tmp_link", "tmp_link/x", "secret_link"):
        with pytest.raises(WorkspaceEscape, match="outside the workspace"):
            ws.resolve(path)
    with pytest.raises(WorkspaceEscape):
        ws.read_file("secret_link")


def test_symlinked_directory_escaping_is_rejected(ws: Workspace, outside: Path) -> None:
    (ws.root / "src" / "out").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WorkspaceEscape):
        ws.read_file("src/out/secret.txt")
    with pytest.raises(WorkspaceEscape):
        ws.write_file("src/out/new.txt", "x")
    with pytest.raises(WorkspaceEscape):
        ws.list_files("src/out")
    assert not (outside / "new.txt").exists()


def test_dangling_symlink_pointing_outside_is_rejected(ws: Workspace, outside: Path) -> None:
    (ws.root / "later").symlink_to(outside / "not-yet.txt")
    with pytest.raises(WorkspaceEscape):
        ws.write_file("later", "planted")
    assert not (outside / "not-yet.txt").exists()


def test_symlink_that_stays_inside_is_allowed(ws: Workspace) -> None:
    (ws.root / "alias.txt").symlink_to("src/a.txt")
    (ws.root / "code").symlink_to(ws.root / "src", target_is_directory=True)
    assert ws.read_file("alias.txt") == "alpha"
    assert ws.read_file("code/a.txt") == "alpha"
    ws.write_file("code/b.txt", "beta")
    assert (ws.root / "src" / "b.txt").read_text() == "beta"
    ws.write_file("alias.txt", "changed")
    assert (ws.root / "src" / "a.txt").read_text() == "changed"


def test_write_through_an_escaping_symlink_is_refused(ws: Workspace, outside: Path) -> None:
    (ws.root / "report.md").symlink_to(outside / "secret.txt")
    result = tools(ws)["write_file"].invoke({"path": "report.md", "content": "overwritten"})
    assert result.startswith("Error:") and "outside the workspace" in result
    assert (outside / "secret.txt").read_text() == "top secret"


def test_a_directory_swapped_for_a_symlink_after_the_check_is_refused(
    ws: Workspace, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = ws.resolve("sub/new.txt")  # sub does not exist yet: fine
    (ws.root / "sub").symlink_to(outside, target_is_directory=True)  # the race
    monkeypatch.setattr(ws, "resolve", lambda path: checked)
    with pytest.raises(WorkspaceEscape, match="became a symlink"):
        ws.write_file("sub/new.txt", "x")
    assert not (outside / "new.txt").exists()


def test_read_write_and_list(ws: Workspace) -> None:
    assert ws.write_file("docs/deep/notes.md", "héllo") == len("héllo".encode())
    assert ws.read_file("docs/deep/notes.md") == "héllo"
    (ws.root / ".git").mkdir()
    (ws.root / ".git" / "HEAD").write_text("ref")
    assert ws.list_files() == ["docs/deep/notes.md", "src/a.txt"]
    assert ws.list_files("docs") == ["docs/deep/notes.md"]
    assert ws.list_files("src/a.txt") == ["src/a.txt"]
    with pytest.raises(FileNotFoundError):
        ws.list_files("nope")
    with pytest.raises(IsADirectoryError):
        ws.write_file(".", "x")


def test_a_reader_sees_the_old_file_or_the_new_never_part_of_one(ws: Workspace) -> None:
    # Parallel steps: one step's test run imports a module another step is rewriting.
    versions = ["a" * 2_000_000, "b" * 1_000_000]
    ws.write_file("mod.py", versions[0])
    seen: set[int] = set()
    writing = True

    def read_meanwhile() -> None:
        while writing:
            seen.add(len((ws.root / "mod.py").read_bytes()))

    reader = threading.Thread(target=read_meanwhile)
    reader.start()
    try:
        # At least 60 rewrites, and on until the reader has seen both versions (a busy machine
        # may schedule it late), within a bound.
        for n in range(2000):
            ws.write_file("mod.py", versions[n % 2])
            if n >= 60 and len(seen) >= 2:
                break
    finally:
        writing = False
        reader.join()
    assert seen <= {len(v) for v in versions} and len(seen) == 2
    assert sorted(os.listdir(ws.root)) == ["mod.py", "src"]  # no temporary file left behind


def test_a_rewritten_file_keeps_its_permissions(ws: Workspace) -> None:
    script = ws.root / "run.sh"
    script.write_text("echo old")
    script.chmod(0o750)
    ws.write_file("run.sh", "echo new")
    assert script.read_text() == "echo new" and stat.S_IMODE(script.stat().st_mode) == 0o750


def test_a_failed_write_leaves_the_old_file_and_nothing_else(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(fd: int, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", disk_full)
    with pytest.raises(OSError, match="No space"):
        ws.write_file("src/a.txt", "replacement")
    monkeypatch.undo()
    assert (ws.root / "src" / "a.txt").read_text() == "alpha"
    assert os.listdir(ws.root / "src") == ["a.txt"]


def test_a_file_swapped_for_a_symlink_after_the_check_is_refused(
    ws: Workspace, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = ws.resolve("src/a.txt")
    (ws.root / "src" / "a.txt").unlink()
    (ws.root / "src" / "a.txt").symlink_to(outside / "secret.txt")  # the race
    monkeypatch.setattr(ws, "resolve", lambda path: checked)
    with pytest.raises(WorkspaceEscape, match="became a symlink"):
        ws.write_file("src/a.txt", "x")
    assert (outside / "secret.txt").read_text() == "top secret"
    assert (ws.root / "src" / "a.txt").is_symlink()


def test_tools_answer_errors_as_text(ws: Workspace) -> None:
    by_name = tools(ws)
    assert sorted(by_name) == ["list_files", "read_file", "write_file"]
    assert by_name["write_file"].invoke({"path": "out/r.txt", "content": "hi"}) == (
        "wrote 2 bytes to out/r.txt"
    )
    assert by_name["read_file"].invoke({"path": "out/r.txt"}) == "hi"
    assert by_name["list_files"].invoke({}) == "out/r.txt\nsrc/a.txt"
    assert by_name["read_file"].invoke({"path": "/etc/passwd"}).startswith("Error: ")
    missing = by_name["read_file"].invoke({"path": "missing.txt"})
    assert missing.startswith("Error: FileNotFoundError")
    assert by_name["read_file"].invoke({"path": "src"}).startswith("Error: IsADirectoryError")
    assert by_name["list_files"].invoke({"path": "../"}).startswith("Error: ")
    assert os.path.basename(str(ws.root)) not in missing.replace("missing.txt", "")
