"""Fixtures for plan-graph tests: a runner on a fresh InMemorySaver, python step callables, and
manifest builders."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from veriloop.context import PlanContext
from veriloop.plans import PlanRunner

# The plan tests share builders from plan_testkit.py and python step functions from
# step_functions.py (importlib mode keeps tests/ off sys.path).
sys.path.insert(0, str(Path(__file__).parent))

import step_functions  # noqa: E402


@pytest.fixture(autouse=True)
def _light_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Test runs that steps trigger skip this venv's pytest plugins (langsmith, schemathesis):
    they load in ~6 s and the tiny projects under test need none of them."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


@pytest.fixture
def tools() -> dict[str, Callable]:
    """Python step callables (``step_functions.TOOLS``): steps run them in a child process."""
    return dict(step_functions.TOOLS)


@pytest.fixture
def runner(tools, tmp_path) -> Callable[..., PlanRunner]:
    """runner(**context_fields) -> a PlanRunner on a fresh InMemorySaver with the test tools."""

    def make(**fields: Any) -> PlanRunner:
        defaults = {"replan_cooldown_s": 0.0, "review_critical_steps": False}
        context = PlanContext(workspace=str(tmp_path), **{**defaults, **fields})
        return PlanRunner(checkpointer=InMemorySaver(), context=context, tools=tools)

    return make
