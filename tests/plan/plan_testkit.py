"""Manifest builders shared by the plan tests."""

from __future__ import annotations

from typing import Any


def py_step(step_id: str, function: str = "ok", **fields: Any) -> dict[str, Any]:
    """A python step; a ``bad`` step carries a predicate that its output fails."""
    step = {"id": step_id, "function": function, "input": step_id, **fields}
    if function == "bad" and "checks" not in fields:
        step["checks"] = [{"kind": "predicate", "expr": 'result["value"] == "right"'}]
    return step


def manifest(*steps: dict[str, Any], goal: str = "test plan") -> dict[str, Any]:
    return {"goal": goal, "steps": list(steps)}
