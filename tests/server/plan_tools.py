"""Python step callables for the plan service tests. Servers load them through
``VERILOOP_TOOLS=plan_tools:TOOLS`` with this folder on ``PYTHONPATH`` (or ``sys.path``).

``mark`` appends its step name to a marker file (one line per execution) and then sleeps, so a
test can tell which steps ran, how many times, and kill a server while a step is sleeping. A
python step runs in a process of its own, sandboxed unless the service's ``plan_shell`` is
``host``: only an unsandboxed step can write a marker file outside its workspace. Its
input names everything: ``{"name", "markers", "sleep"?, "first_sleep"?}``; ``first_sleep``
replaces ``sleep`` on the first execution of that name only (a step that hangs the first time
and is quick after a restart).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any


async def mark(input: Any = None, depends: dict | None = None) -> dict[str, Any]:
    """Append ``input["name"]`` to ``input["markers"]`` (when given), sleep, return the name and
    dependencies."""
    name = str(input["name"])
    first = True
    if input.get("markers"):
        markers = Path(input["markers"])
        before = markers.read_text().splitlines() if markers.exists() else []
        with markers.open("a") as file:
            file.write(f"{name}\n")
        first = name not in before
    await asyncio.sleep(
        float(input.get("first_sleep" if first else "sleep", input.get("sleep", 0)))
    )
    return {"value": name, "depends": sorted(depends or {})}


def loud(input: Any = None) -> Any:
    """An output of ``input["chars"]`` characters, or lists nested ``input["depth"]`` levels deep."""
    if "chars" in input:
        return {"text": "x" * int(input["chars"])}
    nested: list = []
    for _ in range(int(input["depth"])):
        nested = [nested]
    return nested


TOOLS = {"mark": mark, "loud": loud}
