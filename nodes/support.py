"""What every node reads from state the same way: task logger, step context, page state, plan."""

from __future__ import annotations

import asyncio
from typing import Any

from veriloop.context import Context
from veriloop.engines.log import TaskLogger, task_logger
from veriloop.engines.observation import capture_page_state
from veriloop.engines.step_context import StepContext
from veriloop.graph.io import current_verification
from veriloop.graph.state import State
from veriloop.prompts.progress import history_lines
from veriloop.schemas.plan import Plan


def task_log(state: State, component: str) -> TaskLogger:
    """This task's logger (every line carries task id and session id)."""
    return task_logger(state.get("task_id"), state.get("session_id"), component)


def page_state(state: State) -> dict[str, Any]:
    """BeforeState dump of the current observation: the one computed this run, else captured now
    (a task's first page; async nodes call this in a worker thread, as the observation's capture runs)."""
    return (
        state.get("page_state")
        or capture_page_state(state["url"], state["dom"], state.get("active_element")).model_dump()
    )


def plan_of(state: State) -> Plan | None:
    """The current plan, if any."""
    plan = state.get("plan")
    return Plan.model_validate(plan) if plan else None


async def step_context(state: State, ctx: Context, **changes: Any) -> StepContext:
    """Goal, page, this run's verdict and recent actions, for the step engines (``changes`` replace
    fields). The page is parsed here in a worker thread: lxml releases the GIL while it parses, and
    a large page parsed on the event loop would stall every other task's model calls."""
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
    await asyncio.to_thread(getattr, now, "page")  # cached on ``now`` for its engines
    return now
