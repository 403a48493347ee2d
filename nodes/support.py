"""What every node reads from state the same way: task logger, step context, page state, plan."""

from __future__ import annotations

from typing import Any

from veriloop.context import Context
from veriloop.engines.dom_context import (
    cached_compact_page,
    read_compact_page,
    remember_compact_page,
)
from veriloop.engines.log import TaskLogger, task_logger
from veriloop.engines.observation import stored_page_state
from veriloop.engines.step_context import StepContext
from veriloop.graph.io import current_verification
from veriloop.graph.state import State
from veriloop.page_processes import Offload, offload_for
from veriloop.prompts.progress import history_lines
from veriloop.schemas.plan import Plan


def task_log(state: State, component: str) -> TaskLogger:
    """This task's logger (every line carries task id and session id)."""
    return task_logger(state.get("task_id"), state.get("session_id"), component)


def offload(ctx: Context) -> Offload:
    """How this run's page work leaves the event loop: a worker thread, or the page processes."""
    return offload_for(ctx.page_processes)


async def page_state(state: State, ctx: Context) -> dict[str, Any]:
    """The current observation's page state (``BeforeState.stored``): the one computed this run,
    else captured now (a task's first page) off the event loop, as the observation's is, with the
    compact page the prompts read from the same parse."""
    if state.get("page_state"):
        return state["page_state"]
    stored, page = await offload(ctx)(
        stored_page_state, state["url"], state["dom"], state.get("active_element")
    )
    if page is not None:
        remember_compact_page(state["dom"], page)
    return stored


def plan_of(state: State) -> Plan | None:
    """The current plan, if any."""
    plan = state.get("plan")
    return Plan.model_validate(plan) if plan else None


async def step_context(state: State, ctx: Context, **changes: Any) -> StepContext:
    """Goal, page, this run's verdict and recent actions, for the step engines (``changes`` replace
    fields). The page is compacted here off the event loop, unless this run's observation already
    did: a large page parsed on the event loop would stall every other task's model calls."""
    now = StepContext(
        **{
            "goal": state["goal"],
            "url": state["url"],
            "dom": state["dom"],
            "verification": current_verification(state),
            "history": history_lines(
                state.get("action_history") or [], state.get("verification_history") or []
            ),
            "max_chars": ctx.dom_context_chars,
            **changes,
        }
    )
    if cached_compact_page(now.dom) is None:  # ``now.page`` reads the cache
        remember_compact_page(now.dom, await offload(ctx)(read_compact_page, now.dom))
    return now
