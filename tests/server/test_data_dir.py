"""veriloop serve's data directory: 0700, and where plan runs' files and temporary files live."""

from __future__ import annotations

import shutil
import stat
import tempfile
from pathlib import Path

from veriloop.server.data_dir import MAX_TMP_CHARS, use_data_dir


def test_the_data_dir_and_its_folders_are_private_and_take_runs_and_tmp(
    tmp_path, monkeypatch
) -> None:
    short = tempfile.mkdtemp(prefix="vl-", dir="/tmp")  # pytest's tmp_path may be too long
    folder = Path(short) / "data"
    folder.mkdir(mode=0o755)
    env = {}
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setenv("TMPDIR", "/tmp")
    assert use_data_dir(folder, env) == folder.resolve()
    for path in (folder, folder / "workspace", folder / "tmp"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert env == {"VERILOOP_WORKSPACE": str(folder / "workspace"), "TMPDIR": str(folder / "tmp")}

    chosen = {"VERILOOP_WORKSPACE": "/srv/runs"}
    use_data_dir(folder, chosen)
    assert chosen["VERILOOP_WORKSPACE"] == "/srv/runs"  # the operator's choice stands
    shutil.rmtree(short)


def test_a_data_dir_too_deep_for_socket_paths_gets_a_private_tmp_of_the_systems(tmp_path) -> None:
    folder = tmp_path / ("d" * MAX_TMP_CHARS)
    env = {}
    use_data_dir(folder, env)
    tmp = Path(env["TMPDIR"])
    assert tmp.parent == Path("/tmp") and tmp.name.startswith("veriloop-")
    assert stat.S_IMODE(tmp.stat().st_mode) == 0o700
    # room for multiprocessing's pymp-*/listener-* socket below it (107 bytes at most)
    assert len(str(tmp / "pymp-12345678" / "listener-12345678")) < 108
    tmp.rmdir()
