"""The service's data directory: private to its user, and where plan runs' files live.

``veriloop serve`` keeps the default SQLite database, every plan run's folder and snapshot store
(``workspace/``) and the checks' scratch copies (``tmp/``, the process's ``TMPDIR``) in one
folder, mode 0700, never in a shared ``/tmp``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import MutableMapping
from pathlib import Path

from veriloop.plans import private_folders

WORKSPACE = "workspace"
"""Plan runs' folders (``runs/``) and snapshot stores (``snapshots/``), unless VERILOOP_WORKSPACE
names another base."""
TMP = "tmp"
"""The service's temporary files (the checks' scratch copies of a workspace)."""
MAX_TMP_CHARS = 64
"""Longest TMPDIR kept under the data dir (room for multiprocessing's socket paths below it)."""


def use_data_dir(folder: Path, environ: MutableMapping[str, str] | None = None) -> Path:
    """Make ``folder`` and its ``workspace/`` and ``tmp/`` 0700 (created when missing, an
    existing one tightened), point ``TMPDIR`` at ``tmp/`` and ``VERILOOP_WORKSPACE`` at
    ``workspace/`` unless it is set; the folder, resolved."""
    environ = os.environ if environ is None else environ
    folder = folder.expanduser().resolve()
    private_folders(folder, folder / WORKSPACE, folder / TMP)
    environ.setdefault("VERILOOP_WORKSPACE", str(folder / WORKSPACE))
    tmp = str(folder / TMP)
    if len(tmp) > MAX_TMP_CHARS:
        # multiprocessing makes its unix sockets under TMPDIR (pymp-*/listener-*), and a socket's
        # path holds 107 bytes at most: a private folder of the system's instead (mkdtemp: 0700)
        tmp = tempfile.mkdtemp(prefix="veriloop-", dir="/tmp")
    environ["TMPDIR"] = tmp
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    return folder


__all__ = ["TMP", "WORKSPACE", "use_data_dir"]
