"""Cancelling a browser task: ``POST /api/tasks/{taskId}/cancel``.

A cancelled task takes no more steps (interact answers 409) and the active-task lookup never
offers it again. Plan runs are cancelled by ``PlanService.cancel`` (``POST
/api/plans/{runId}/cancel``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from veriloop.schemas.api import ErrorBody, TaskSummary
from veriloop.server.index import now
from veriloop.server.service import TaskConflict, TaskService
from veriloop.server.tenants import current_tenant

Tenant = Annotated[str, Depends(current_tenant)]

router = APIRouter(tags=["tasks"])


async def cancel_task(service: TaskService, tenant: str, task_id: str) -> TaskSummary:
    """Mark the task ``cancelled`` once the step in flight (if any) has committed; 409 naming the
    status of a task that already ended; a cancelled task answers again as the first cancel did."""
    await service._entry(tenant, task_id)  # 404 before queueing on the task's lock
    async with service.locks.hold(f"task:{task_id}"):
        # A step a dead process saved but never recorded is adopted first, so it cannot come
        # back as executing after the cancel.
        entry = await service._settle(await service._entry(tenant, task_id))
        if entry.status == "cancelled":
            return entry.summary()
        if entry.status != "executing":
            raise TaskConflict(
                f"task {task_id} is already {entry.status}: nothing to cancel",
                task_id=task_id,
                status=entry.status,
            )
        cancelled = entry.model_copy(update={"status": "cancelled", "updated_at": now()})
        await service.index.record(cancelled, None)
        return cancelled.summary()


@router.post(
    "/api/tasks/{task_id}/cancel",
    response_model=TaskSummary,
    response_model_exclude_none=True,
    responses={
        401: {"model": ErrorBody, "description": "Missing or unknown API key."},
        404: {"model": ErrorBody, "description": "Unknown task (or another tenant's)."},
        409: {"model": ErrorBody, "description": "The task already ended (its status is named)."},
    },
)
async def cancel(task_id: str, tenant: Tenant, request: Request) -> TaskSummary:
    """Stop the task: it is recorded `cancelled`, takes no more steps and is never offered as the
    session's active task. Cancelling it again answers the same."""
    return await cancel_task(request.app.state.service, tenant, task_id)
