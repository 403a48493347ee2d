"""veriloop: a LangGraph agent that verifies every action against what actually happened.

Public API (loaded on first use, so ``import veriloop`` stays cheap and free of import cycles)::

    from veriloop import Agent, Context, Observation, build_graph     # browser tasks
    from veriloop import run_plan, PlanRunner, PlanContext           # plans of tool-using steps
    from veriloop import run_demo, graph_png                         # the demo in one call; the graph's picture
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from veriloop.schemas import __all__ as _SCHEMA_NAMES

if TYPE_CHECKING:
    from veriloop.agent import Agent, TaskFinishedError, TaskReport, UnknownTaskError  # noqa: F401
    from veriloop.context import Context, PlanContext  # noqa: F401
    from veriloop.drawing import graph_png  # noqa: F401
    from veriloop.graph.builder import build_graph  # noqa: F401
    from veriloop.plans import (  # noqa: F401
        NoPendingReviewError,
        PlanRunner,
        UnknownRunError,
        arun_plan,
        run_plan,
    )
    from veriloop.runners.demo.run import run_demo  # noqa: F401
    from veriloop.schemas import *  # noqa: F403

_LOCATIONS: dict[str, str] = {
    "Agent": "veriloop.agent",
    "TaskReport": "veriloop.agent",
    "TaskFinishedError": "veriloop.agent",
    "UnknownTaskError": "veriloop.agent",
    "Context": "veriloop.context",
    "PlanContext": "veriloop.context",
    "PlanRunner": "veriloop.plans",
    "run_plan": "veriloop.plans",
    "arun_plan": "veriloop.plans",
    "UnknownRunError": "veriloop.plans",
    "NoPendingReviewError": "veriloop.plans",
    "build_graph": "veriloop.graph.builder",
    "graph_png": "veriloop.drawing",
    "run_demo": "veriloop.runners.demo.run",
    **{name: "veriloop.schemas" for name in _SCHEMA_NAMES},
}

__all__ = sorted(_LOCATIONS)


def __getattr__(name: str) -> Any:
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'veriloop' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
