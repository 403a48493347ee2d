"""Python step functions for the plan tests. A python step runs in a child process that imports its
function, so they live at the top level of this module, which imports nothing but the standard
library (the sandbox shows the child this file, not veriloop's source)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any


def ok(input: Any = None, depends: dict | None = None) -> Any:
    return {"value": input, "depends": sorted((depends or {}).keys())}


def bad(input: Any = None, depends: dict | None = None) -> Any:
    return {"value": "wrong"}


def right(input: Any = None, depends: dict | None = None) -> Any:
    return {"value": "right"}


async def slow(input: Any = None, depends: dict | None = None) -> Any:
    await asyncio.sleep(0.2)
    return {"value": input}


def boom(input: Any = None, depends: dict | None = None) -> Any:
    raise RuntimeError("the executor crashed")


TOOLS = {"ok": ok, "bad": bad, "right": right, "slow": slow, "boom": boom}
"""The plan tests' python steps by name: ``ok`` returns its input; ``bad`` returns a value
predicates reject, ``right`` one they accept; ``slow`` sleeps 0.2 s; ``boom`` raises."""


# -- calling conventions ----------------------------------------------------------------------------


def add_dependency(input: Any, depends: dict) -> dict:
    return {"sum": input + depends["a"], "pid": os.getpid()}


async def notes_and_output(input: Any = None, depends: dict | None = None) -> dict:
    await asyncio.sleep(0)
    return {"notes": "[SUCCESS]: computed", "output": [input, sorted(depends or {})]}


def double(data: Any) -> Any:
    return data * 2


def fixed() -> str:
    return "fixed"


async def sleeps(input: Any) -> str:
    await asyncio.sleep(30)
    return "late"


def blocks(input: Any) -> str:
    time.sleep(30)
    return "late"


# -- bad outputs --------------------------------------------------------------------------------


def a_set(input: Any = None) -> Any:
    return {1, 2}


def huge(input: Any = None) -> Any:
    return "x" * int(input)


def exits(input: Any = None) -> Any:
    os._exit(3)


def prints_then_exits_zero(input: Any = None) -> Any:
    print("3 passed in 0.01s")
    sys.stdout.flush()
    os._exit(0)


def allocates(input: Any = None) -> Any:
    return len(bytearray(int(input)))


# -- steps that try to outlive themselves or reach another step's record ---------------------------


def swap_test_file(input: Any = None) -> Any:
    """Writes the bug, then leaves a thread that swaps tautologies into the test file while the
    tests would run (input: {"test": path, "tautologies": text})."""
    target = Path(input["test"])

    def swap() -> None:
        time.sleep(0.5)
        target.write_text(input["tautologies"], encoding="utf-8")

    threading.Thread(target=swap, name="swapper", daemon=True).start()
    return {"notes": "[SUCCESS]: done", "output": "done"}


def daemon(input: Any = None) -> Any:
    """Forks a detached daemon (a new session, the double fork) that writes ``input`` later."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(1.5)
            Path(input).write_text("the daemon was here", encoding="utf-8")
        os._exit(0)
    os.wait()
    return {"notes": "[SUCCESS]: done", "output": "done"}


def mutate_dependency(input: Any = None, depends: dict | None = None) -> Any:
    """Fixes the upstream step's total in its dependency dict, hoping the record changes too."""
    data = (depends or {}).get("collect")
    data["total"] = sum(data["rows"])
    input["changed"] = True
    return {"notes": "[SUCCESS]: summarized", "output": {"seen": data}}


def collect(input: Any = None) -> Any:
    return {"notes": "[SUCCESS]: collected", "output": {"rows": [1, 2, 3], "total": 7}}


# -- steps that meet across processes ----------------------------------------------------------


async def wait_for_marker(input: Any = None, depends: dict | None = None) -> Any:
    """Waits (up to ``input["wait_s"]``) for the file ``input["marker"]`` that
    :func:`leave_marker` writes."""
    marker = Path(input["marker"])
    for _ in range(int(input["wait_s"] * 100)):
        if marker.exists():
            return {"saw": "z"}
        await asyncio.sleep(0.01)
    return {"saw": None}


def leave_marker(input: Any = None, depends: dict | None = None) -> Any:
    Path(input["marker"]).write_text("ran", encoding="utf-8")
    return {"value": "z", "depends": sorted(depends or {})}


def exists(input: Any = None) -> Any:
    """Whether the path ``input`` exists, as the step sees it."""
    return {"exists": Path(input).exists()}
