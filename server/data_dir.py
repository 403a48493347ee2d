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


def use_data_dir(folder: Path, environ: MutableMapping[str, str] | None = None) -> Path:
    """Make ``folder`` and its ``workspace/`` and ``tmp/`` 0700 (created when missing, an
    existing one tightened), point ``TMPDIR`` at ``tmp/`` and ``VERILOOP_WORKSPACE`` at
    ``workspace/`` unless it is set; the folder, resolved."""
    environ = os.environ if environ is None else environ
    folder = folder.expanduser().resolve()
    private_folders(folder, folder / WORKSPACE, folder / TMP)
    environ.setdefault("VERILOOP_WORKSPACE", str(folder / WORKSPACE))
    environ["TMPDIR"] = str(folder / TMP)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    return folder


__all__ = ["TMP", "WORKSPACE", "use_data_dir"]
