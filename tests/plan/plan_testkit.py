"""Manifest builders shared by the plan tests."""

from __future__ import annotations

from typing import Any

from veriloop.engines.plan.judge.checks import run_checks
from veriloop.schemas.plan_run import ExecutionResult


def py_step(step_id: str, function: str = "ok", **fields: Any) -> dict[str, Any]:
    """A python step; a ``bad`` step carries a predicate that its output fails. The kit's functions
    change no file (``writes: []``), so steps of one level run side by side."""
    step = {"id": step_id, "function": function, "input": step_id, "writes": [], **fields}
    if function == "bad" and "checks" not in fields:
        step["checks"] = [{"kind": "predicate", "expr": 'result["value"] == "right"'}]
    return step


def manifest(*steps: dict[str, Any], goal: str = "test plan") -> dict[str, Any]:
    return {"goal": goal, "steps": list(steps)}


async def judge_attempt(step: Any, workspace: Any, baseline: dict, **options: Any) -> dict:
    """The checks of one worked attempt of ``step`` (a ManifestStep), by name."""
    results = await run_checks(
        step,
        ExecutionResult(ok=True, output="done"),
        depends={},
        workspace=workspace,
        baseline=baseline,
        previous_collected=None,
        llm=None,
        review=False,
        check_timeout_s=60,
        **options,
    )
    return {result.name: result for result in results}
