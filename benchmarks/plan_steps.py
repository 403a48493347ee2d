"""The python steps of the plan benchmarks. A python step runs in a child process that imports its
function, so they live here, at the top level of a module that imports only the standard library
(the sandbox shows the child this package, not veriloop's source)."""

from __future__ import annotations

import asyncio
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
