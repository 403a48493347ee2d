"""audit_ahead node: the finish audit, run beside the verdict on the plan's last step."""

from __future__ import annotations

from langgraph.runtime import Runtime

from veriloop.context import Context
from veriloop.graph.state import State
from veriloop.nodes.completion_audit import run_audit


async def audit_ahead(state: State, runtime: Runtime[Context]) -> dict:
    """Audit the trajectory as it will be if the pending verdict says "done" (its observed changes
    are the last entry); completion_audit takes it only after such a verdict."""
    outcome = await run_audit(state, runtime, pending=state["action_observation"])
    return {"audit_ahead": outcome.result.model_dump(), "usage": outcome.usage}
