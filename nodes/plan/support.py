"""What plan nodes read the same way: the context, the manifest, tools, the step, progress events."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from langgraph.config import get_stream_writer
from langgraph.runtime import Runtime

from veriloop.context import PlanContext
from veriloop.engines.plan.manifest import dependency_levels, dependents_of
from veriloop.engines.plan.tools import load_tools
from veriloop.engines.plan.workspace import Workspace, workspace_tools
from veriloop.graph.plan_state import PlanState, StepState
from veriloop.schemas.manifest import Manifest, ManifestStep

log = logging.getLogger("veriloop.plan")


def plan_context(runtime: Runtime[PlanContext]) -> PlanContext:
    """The run's context; LangServe and bare ``invoke`` pass none, so defaults apply."""
    ctx = runtime.context
    return ctx if isinstance(ctx, PlanContext) else PlanContext()


@dataclass
class _Parsed:
    steps: list[Any]
    agents: Any
    manifest: Manifest
    levels: list[list[str]] | None = None
    dependents: dict[str, list[str]] | None = None
    by_id: dict[str, ManifestStep] | None = None


_parsed: dict[int, _Parsed] = {}
_PARSED_KEPT = 32


def _parse(plan: dict[str, Any]) -> _Parsed:
    # Every node of a run reads the same plan dump, superstep after superstep; validating a
    # 1,000-step manifest costs ~15 ms, three times a step. LangGraph hands each superstep a shallow
    # copy of the dump, so the key is its steps list: a new dump (a replan) has a new one. The entry
    # holds that list, so its id is not reused while cached; nodes never change a dump in place.
    steps, agents = plan["steps"], plan.get("agents")
    entry = _parsed.get(id(steps))
    if entry is None or entry.steps is not steps or entry.agents is not agents:
        if len(_parsed) >= _PARSED_KEPT:
            _parsed.pop(next(iter(_parsed)))
        entry = _parsed[id(steps)] = _Parsed(steps, agents, Manifest.model_validate(plan))
    return entry


def manifest_of(state: PlanState) -> Manifest:
    """The manifest being run (parsed once per plan dump)."""
    return _parse(state["plan"]).manifest


def levels_of(state: PlanState) -> list[list[str]]:
    """The manifest's dependency levels (computed once per plan dump)."""
    entry = _parse(state["plan"])
    if entry.levels is None:
        entry.levels = dependency_levels(entry.manifest)
    return entry.levels


def dependents_in(state: PlanState) -> dict[str, list[str]]:
    """Each step's dependents in the manifest (computed once per plan dump)."""
    entry = _parse(state["plan"])
    if entry.dependents is None:
        entry.dependents = dependents_of(entry.manifest)
    return entry.dependents


def steps_in(state: PlanState) -> dict[str, ManifestStep]:
    """The manifest's steps by id (``Manifest.step`` scans the list; built once per plan dump)."""
    entry = _parse(state["plan"])
    if entry.by_id is None:
        entry.by_id = {step.id: step for step in entry.manifest.steps}
    return entry.by_id


def step_of(state: StepState) -> ManifestStep:
    """The step this loop runs."""
    return ManifestStep.model_validate(state["step"])


def workspace_of(ctx: PlanContext) -> Path:
    """The directory steps work in."""
    return Path(ctx.workspace).resolve()


def tool_registry(ctx: PlanContext) -> dict[str, Any]:
    """Every tool a step may use: the configured ones plus the workspace-confined file tools."""
    tools = dict(_file_tools(str(workspace_of(ctx))))
    tools.update(load_tools(ctx.tools))
    return tools


@lru_cache(maxsize=64)
def _file_tools(workspace: str) -> dict[str, Any]:
    # Building a tool's argument schema takes ~5 ms of pydantic work: once per workspace, not per node.
    return {tool.name: tool for tool in workspace_tools(Workspace(Path(workspace)))}


def results_update(results: dict[str, Any]) -> dict[str, Any]:
    """``{"step_results": results}``, or nothing when there are none: an empty write would still be
    stored, and counted towards the channel's next whole copy."""
    return {"step_results": results} if results else {}


def emit(state: PlanState | StepState, event: str, **fields: Any) -> None:
    """Send a progress event on the custom stream (a no-op when nobody streams it)."""
    payload = {"event": event, "run_id": state.get("run_id"), **fields}
    get_stream_writer()(payload)
    log.debug("%s", payload)
