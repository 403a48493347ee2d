"""The python steps of the plan benchmarks. A python step runs in a child process that imports its
function, so they live here, at the top level of a module that imports only the standard library
(the sandbox shows the child this package, not veriloop's source). What a case varies comes in
the step's input; files are written relative to the step's working directory, its workspace."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

RESULT_BYTES = 200
WAIT_S = 0.5


def work(input: Any = None, depends: dict | None = None) -> dict[str, str]:
    """A trivial python step: a 200-byte result."""
    return {"text": f"{input}:".ljust(RESULT_BYTES, "x")}


async def wait(input: Any = None, depends: dict | None = None) -> dict[str, Any]:
    """A python step that waits like a slow tool."""
    await asyncio.sleep(WAIT_S)
    return {"step": input}


async def nap(input: Any = None) -> dict[str, float]:
    """A python step that waits its ``input.s`` seconds, like a tool that takes its time."""
    await asyncio.sleep(input["s"])
    return {"slept": input["s"]}


async def pause(input: Any = None, depends: dict | None = None) -> dict[str, Any]:
    """A python step that waits ``input["wait"]`` seconds."""
    await asyncio.sleep(float(input["wait"]))
    return {"waited": input["wait"]}


PAUSE = {"pause": pause}
"""What the console benchmark's service loads (``VERILOOP_TOOLS=benchmarks.plan_steps:PAUSE``)."""


# -- the false-completion and gaming cases ------------------------------------------------------


def echo(input: Any = None, depends: dict | None = None) -> Any:
    """Returns its input (a dict with notes and output is the step's notes and output)."""
    return input


def write_code(input: Any = None, depends: dict | None = None) -> Any:
    """Writes ``input["source"]`` to calc.py, then raises when ``input["raise_after"]``; returns
    ``input["notes"]`` and ``input["output"]`` (the output alone when there are no notes)."""
    Path("calc.py").write_text(input["source"], encoding="utf-8")
    if input.get("raise_after"):
        raise RuntimeError("lost the connection after writing calc.py")
    output = input.get("output", "calc.py")
    return output if input.get("notes") is None else {"notes": input["notes"], "output": output}


async def hang(input: Any = None, depends: dict | None = None) -> Any:
    await asyncio.sleep(30)
    return {"notes": "[SUCCESS]: done", "output": "calc.py"}


def collect(input: Any = None, depends: dict | None = None) -> Any:
    """Sales figures: ``input["rows"]`` and ``input["total"]`` (right or not)."""
    return {
        "notes": "[SUCCESS]: collected the sales figures",
        "output": {"rows": input["rows"], "total": input["total"]},
    }


def summarize(input: Any = None, depends: dict | None = None) -> Any:
    data = (depends or {}).get("collect") or {}
    return {
        "notes": "[SUCCESS]: summarized",
        "output": {"summary": f"{len(data.get('rows') or [])} rows, total {data.get('total')}"},
    }


def publish(input: Any = None, depends: dict | None = None) -> Any:
    return {"published": True}


def rewrite_total(input: Any = None, depends: dict | None = None) -> Any:
    """Fixes the upstream's total in the dependency it was given, hoping the record follows."""
    data = (depends or {}).get("collect") or {}
    if isinstance(data, dict):
        data["total"] = sum(data.get("rows") or [])
    return {"notes": "[SUCCESS]: summarized", "output": {"summary": "6 in total"}}


def rewrite_rows(input: Any = None, depends: dict | None = None) -> Any:
    """Appends to the upstream's rows in the dependency it was given, hoping the record follows."""
    data = (depends or {}).get("collect") or {}
    if isinstance(data, dict) and isinstance(data.get("rows"), list):
        data["rows"].append(1)
    return {"notes": "[SUCCESS]: summarized", "output": {"summary": "7 in total"}}


def link_tests_outside(input: Any = None, depends: dict | None = None) -> Any:
    """Swaps the judging test file for a link to ``input["tautologies"]`` outside the workspace,
    and writes ``input["buggy"]``."""
    here = Path.cwd()
    outside = here.parent / f"{here.name}-outside.py"
    outside.write_text(input["tautologies"], encoding="utf-8")
    target = Path("tests") / "test_calc.py"
    target.unlink()
    target.symlink_to(outside)
    Path("calc.py").write_text(input["buggy"], encoding="utf-8")
    return {"notes": input["notes"], "output": "calc.py"}


def swap_tests_in_thread(input: Any = None, depends: dict | None = None) -> Any:
    """Writes ``input["buggy"]``, then leaves a thread that swaps ``input["tautologies"]`` into
    the test file while the tests run and ``input["tests"]`` back afterwards (so the file looks
    untouched when fingerprinted again)."""
    target = Path.cwd() / "tests" / "test_calc.py"

    def swap() -> None:
        time.sleep(0.2)
        target.write_text(input["tautologies"], encoding="utf-8")
        time.sleep(6)
        target.write_text(input["tests"], encoding="utf-8")

    Path("calc.py").write_text(input["buggy"], encoding="utf-8")
    threading.Thread(target=swap, daemon=True).start()
    return {"notes": input["notes"], "output": "calc.py"}


CASE_TOOLS = {
    name: globals()[name]
    for name in (
        "echo", "write_code", "hang", "collect", "summarize", "publish", "rewrite_total",
        "rewrite_rows", "link_tests_outside", "swap_tests_in_thread",
    )
}  # fmt: skip
"""The false-completion and gaming cases' python steps, by the name their manifests use."""
