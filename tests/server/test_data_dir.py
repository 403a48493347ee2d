"""veriloop serve's data directory: 0700, and where plan runs' files and temporary files live."""

from __future__ import annotations

import stat
import tempfile

from veriloop.server.data_dir import use_data_dir


def test_the_data_dir_and_its_folders_are_private_and_take_runs_and_tmp(
    tmp_path, monkeypatch
) -> None:
    folder = tmp_path / "data"
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
