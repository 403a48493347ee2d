"""Hostile manifests, shared by ``benchmarks.hostile_input`` and the tests that refuse them.

Texts are written out directly: a 10,000-level manifest is never built as Python objects here.
"""

from __future__ import annotations

from typing import Any


def alias_bomb() -> str:
    """The issue's 365 bytes: eight levels of eight aliases, 8^8 values once expanded."""
    lines = ["a0: &a0 [x,x,x,x,x,x,x,x]"]
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 8)}]" for i in range(1, 8)]
    return "\n".join([*lines, "steps:", "  - id: s", "    command: echo hi", "    input: *a7"])


def _deep_step(nested: str) -> str:
    """A manifest (JSON text) whose one step's input is ``nested``."""
    return f'{{"steps": [{{"id": "deep", "command": "true", "input": {nested}}}]}}'


def nested_lists(depth: int) -> str:
    return _deep_step("[" * depth + "]" * depth)


def nested_objects(depth: int) -> str:
    return _deep_step('{"a": ' * depth + "null" + "}" * depth)


def yaml_block(depth: int) -> str:
    """A block sequence ``depth`` levels deep, in YAML's compact form (``- - - x``)."""
    return f"steps:\n  - id: deep\n    command: 'true'\n    input:\n      {'- ' * depth}x\n"


def chained_shell_steps(count: int) -> dict[str, Any]:
    steps = [{"id": "s0", "command": "true"}]
    steps += [
        {"id": f"s{i}", "command": "true", "depends_on": [f"s{i - 1}"]} for i in range(1, count)
    ]
    return {"steps": steps}


def huge_output(megabytes: int) -> dict[str, Any]:
    command = f"head -c {megabytes * 1_000_000} /dev/zero | tr '\\0' x"
    return {"steps": [{"id": "loud", "command": command}]}
