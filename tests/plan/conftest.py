"""Fixtures for plan-graph tests: a runner on a fresh InMemorySaver, python step callables that
count their calls, and manifest builders."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from veriloop.context import PlanContext
from veriloop.plans import PlanRunner

# The plan tests share builders from plan_testkit.py (importlib mode keeps tests/ off sys.path).
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _light_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Test runs that steps trigger skip this venv's pytest plugins (langsmith, schemathesis):
    they load in ~6 s and the tiny projects under test need none of them."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


class Calls(Counter):
    """How many times each python step function ran, by name."""


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def tools(calls: Calls) -> dict[str, Callable]:
    """Python step callables: ``ok`` returns its input; ``bad`` returns a value predicates reject,
    ``right`` one they accept;
    ``slow`` sleeps 0.2 s; ``boom`` raises."""

    def ok(input: Any = None, depends: dict | None = None) -> Any:
        calls["ok"] += 1
        return {"value": input, "depends": sorted((depends or {}).keys())}

    def bad(input: Any = None, depends: dict | None = None) -> Any:
        calls["bad"] += 1
        return {"value": "wrong"}

    def right(input: Any = None, depends: dict | None = None) -> Any:
        calls["right"] += 1
        return {"value": "right"}

    async def slow(input: Any = None, depends: dict | None = None) -> Any:
        calls["slow"] += 1
        await asyncio.sleep(0.2)
        return {"value": input}

    def boom(input: Any = None, depends: dict | None = None) -> Any:
        calls["boom"] += 1
        raise RuntimeError("the executor crashed")

    return {"ok": ok, "bad": bad, "right": right, "slow": slow, "boom": boom}


@pytest.fixture
def runner(tools, tmp_path) -> Callable[..., PlanRunner]:
    """runner(**context_fields) -> a PlanRunner on a fresh InMemorySaver with the test tools."""

    def make(**fields: Any) -> PlanRunner:
        defaults = {"replan_cooldown_s": 0.0, "review_critical_steps": False}
        context = PlanContext(workspace=str(tmp_path), **{**defaults, **fields})
        return PlanRunner(checkpointer=InMemorySaver(), context=context, tools=tools)

    return make
