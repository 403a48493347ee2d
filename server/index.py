"""The task index, kept in a LangGraph store: which tasks a tenant has, and the answers already given.

Namespaces (tenant names never contain '.'):

- ``("veriloop", "tasks", tenant)`` / task id -> :class:`TaskEntry`
- ``("veriloop", "answers", tenant)`` / ``"<scope>:<request id>"`` -> ``{"request": fingerprint,
  "response": InteractResponse dump}``; the scope is the task id, or ``new:<session id>`` for a
  request that started a task. A stored answer is only given back to a request with the same
  fingerprint (the same body), so a reused request id never answers a different request.

The entry also pins the checkpoint of the task's last answered step: the next
run starts from that checkpoint, so whatever a failed or killed run left in
the checkpointer never changes what the next request does. A step commits when
its checkpoint is saved (the fenced checkpointer admits one per parent); the
entry then records it, written by that run or, if it died first, adopted by the
next request for the task (``TaskService._settle``).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit
from weakref import WeakValueDictionary

from langgraph.store.base import BaseStore, PutOp
from pydantic import BaseModel

from veriloop.schemas.api import InteractRequest, InteractResponse, TaskStatus, TaskSummary

FOLLOW_POLL_S = 1.0
"""How soon a follower of a task reads its entry again when this process records nothing for it
(another process serves its steps); a step this process records wakes it at once."""
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


@dataclass(frozen=True)
class RetryKey:
    """Where the answer to a request with a ``requestId`` is kept, and what the request was."""

    scope: str
    """The task id, or ``new:<session id>`` for a request that starts a task."""
    request_id: str
    fingerprint: str
    """A hash of the whole request body: a retry repeats it exactly."""

    @classmethod
    def of(cls, request: InteractRequest) -> RetryKey | None:
        """The key of ``request`` (None without a requestId)."""
        if request.request_id is None:
            return None
        scope = request.task_id or f"new:{request.session_id or ''}"
        digest = hashlib.blake2b(request.model_dump_json().encode(), digest_size=16).hexdigest()
        return cls(scope, request.request_id, digest)

    @property
    def store_key(self) -> str:
        """The key in the answers namespace."""
        return f"{self.scope}:{self.request_id}"

    def task_id(self, tenant: str) -> str:
        """The id of the task this request starts: the same for every copy of the request (so
        two processes starting it run one thread), another for another tenant or body."""
        named = f"{tenant}\0{self.store_key}\0{self.fingerprint}".encode()
        return hashlib.blake2b(named, digest_size=16).hexdigest()


class TaskIndex:
    """Reads and writes the task index."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store
        self._changed: WeakValueDictionary[str, asyncio.Event] = WeakValueDictionary()
        """Per task being followed: set (and dropped) when this process records its entry; gone
        with its last follower otherwise (weakly held)."""

    async def get(self, tenant: str, task_id: str) -> TaskEntry | None:
        """The tenant's task, or None (unknown, or another tenant's)."""
        item = await self.store.aget(_tasks(tenant), task_id)
        return TaskEntry.model_validate(item.value) if item else None

    async def answer(self, tenant: str, key: RetryKey) -> InteractResponse | None:
        """The answer already given to the request ``key`` names, if it was this very request."""
        item = await self.store.aget(_answers(tenant), key.store_key)
        if item is None or item.value.get("request") != key.fingerprint:
            return None
        return InteractResponse.model_validate(item.value["response"])

    async def record(self, entry: TaskEntry, key: RetryKey | None) -> None:
        """Commit one step: the updated entry and, with a retry key, its answer (one batch)."""
        ops = [PutOp(_tasks(entry.tenant), entry.task_id, entry.model_dump())]
        if key is not None:
            answer = {"request": key.fingerprint, "response": entry.last_response}
            ops.append(PutOp(_answers(entry.tenant), key.store_key, answer))
        await self.store.abatch(ops)
        if (changed := self._changed.pop(entry.task_id, None)) is not None:
            changed.set()

    async def follow(self, tenant: str, task_id: str) -> AsyncIterator[TaskEntry]:
        """The task's entry now and after each change (a step, a cancel), until it stops executing."""
        last = None
        while True:
            # Taken before the read: a change recorded between the read and the wait still wakes it.
            changed = self._changed.setdefault(task_id, asyncio.Event())
            entry = await self.get(tenant, task_id)
            if entry is None:
                return
            if entry.updated_at != last:
                last = entry.updated_at
                yield entry
            if entry.status != "executing":
                return
            with suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), FOLLOW_POLL_S)

    async def page(self, tenant: str, *, limit: int, offset: int) -> tuple[list[TaskEntry], bool]:
        """The tenant's tasks, most recently updated first, and whether more follow."""
        items = await self.store.asearch(_tasks(tenant), limit=limit + 1, offset=offset)
        entries = [TaskEntry.model_validate(i.value) for i in items]
        return entries[:limit], len(entries) > limit

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


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()
