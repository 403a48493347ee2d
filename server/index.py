"""The task index, kept in a LangGraph store: which tasks a tenant has, and the answers already given.

Namespaces (tenant names never contain '.'):

- ``("veriloop", "tasks", tenant)`` / task id -> :class:`TaskEntry`
- ``("veriloop", "answers", tenant)`` / ``"<task id or new>:<request id>"`` -> an InteractResponse dump

The entry also pins the checkpoint of the task's last answered step: the next
run starts from that checkpoint, so whatever a failed or killed run left in
the checkpointer never changes what the next request does. Writing the entry
is the commit point of a step.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import urlsplit

from langgraph.store.base import BaseStore, PutOp
from pydantic import BaseModel

from veriloop.schemas.api import InteractResponse, TaskStatus, TaskSummary

ACTIVE_SEARCH_LIMIT = 200
"""Executing tasks of one session looked at by the recovery endpoint."""


class TaskEntry(BaseModel):
    """One task in the index (stored as a snake_case dict)."""

    tenant: str
    task_id: str
    session_id: str | None = None
    goal: str
    url: str
    status: TaskStatus
    step_index: int
    checkpoint_id: str
    created_at: str
    updated_at: str
    last_response: dict
    """The wire form of the latest answer, replayed to a retry of the request that produced it."""

    def summary(self) -> TaskSummary:
        """The client-facing view."""
        return TaskSummary.model_validate(self.model_dump())


class TaskIndex:
    """Reads and writes the task index."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store

    async def get(self, tenant: str, task_id: str) -> TaskEntry | None:
        """The tenant's task, or None (unknown, or another tenant's)."""
        item = await self.store.aget(_tasks(tenant), task_id)
        return TaskEntry.model_validate(item.value) if item else None

    async def answer(
        self, tenant: str, task_id: str | None, request_id: str
    ) -> InteractResponse | None:
        """The answer already given to ``request_id`` (for ``task_id``, or a new task when None)."""
        item = await self.store.aget(_answers(tenant), _answer_key(task_id, request_id))
        return InteractResponse.model_validate(item.value) if item else None

    async def record(
        self, entry: TaskEntry, request_task_id: str | None, request_id: str | None
    ) -> None:
        """Commit one step: the updated entry and, with a request id, its answer (one batch)."""
        ops = [PutOp(_tasks(entry.tenant), entry.task_id, entry.model_dump())]
        if request_id:
            ops.append(
                PutOp(
                    _answers(entry.tenant),
                    _answer_key(request_task_id, request_id),
                    entry.last_response,
                )
            )
        await self.store.abatch(ops)

    async def active(self, tenant: str, session_id: str, url: str | None) -> TaskEntry | None:
        """The session's most recently updated executing task (on ``url``'s origin when given)."""
        items = await self.store.asearch(
            _tasks(tenant),
            filter={"session_id": session_id, "status": "executing"},
            limit=ACTIVE_SEARCH_LIMIT,
        )
        entries = [TaskEntry.model_validate(i.value) for i in items]
        if url:
            entries = [e for e in entries if _origin(e.url) == _origin(url)]
        return max(entries, key=lambda e: e.updated_at, default=None)


def now() -> str:
    """Timestamps of the index: ISO 8601 UTC with microseconds (sortable as text)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _tasks(tenant: str) -> tuple[str, ...]:
    return ("veriloop", "tasks", tenant)


def _answers(tenant: str) -> tuple[str, ...]:
    return ("veriloop", "answers", tenant)


def _answer_key(task_id: str | None, request_id: str) -> str:
    return f"{task_id or 'new'}:{request_id}"


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()
