"""Python step functions of the scheduling tests (top level, standard library only: a step's
process imports them). Each marks its start and end in the workspace and watches, for up to a
second, for its sibling running at the same time."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

WATCH_S = 1.0
"""How long a step watches for its sibling (steps that run at once both start well within it)."""


def write_module(input: Any = None) -> dict[str, Any]:
    """Write ``<name>.py`` into the workspace ``input["at"]``; ``overlap``: the sibling ``other``
    was running meanwhile."""
    name, other, workspace = input["name"], input["other"], Path(input["at"])
    marks = workspace / "marks"
    marks.mkdir(exist_ok=True)
    (marks / f"{name}.start").write_text("")
    overlap = False
    deadline = time.monotonic() + WATCH_S
    while not overlap and time.monotonic() < deadline:
        overlap = (marks / f"{other}.start").exists() and not (marks / f"{other}.end").exists()
        time.sleep(0.02)
    (workspace / f"{name}.py").write_text(f"VALUE = {name!r}\n")
    (marks / f"{name}.end").write_text("")
    return {"wrote": name, "overlap": overlap}
