"""The interact service: one observation in, one graph invocation, one answer out; plus task reads.

Framework-free (no FastAPI): the HTTP routes and the LangServe wrapper both
call :class:`TaskService`, so every client gets the same checks, locks and
idempotency. Errors are :class:`ServiceError` subclasses carrying their HTTP
status; ``LLMUnavailable`` and a lost database (``DATABASE_UNAVAILABLE``) propagate (503).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from veriloop.context import Context
from veriloop.graph.io import observation_to_input, state_to_response
from veriloop.llm.base import LLMUnavailable
from veriloop.schemas.api import (
    ActionSummary,
    BeforeStateSummary,
    InteractRequest,
    InteractResponse,
    TaskDetail,
    TaskSummary,
)
from veriloop.schemas.plan import Plan
from veriloop.schemas.usage import Usage, total_usage
from veriloop.schemas.verification import VerificationResult
from veriloop.server.index import RetryKey, TaskEntry, TaskIndex, now
from veriloop.server.locks import LocalLocks, LockLost
from veriloop.server.persistence import DATABASE_UNAVAILABLE, fenced_out

log = logging.getLogger("veriloop.server")


class ServiceError(Exception):
    """An answer other than 200, with its HTTP status."""

    status_code = 400

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra


class InvalidField(ServiceError):
    """A field is valid JSON but unusable (answered like a validation error)."""

    status_code = 422

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class DomTooLarge(ServiceError):
    """The DOM is over the configured limit."""

    status_code = 413


class TaskNotFound(ServiceError):
    """No such task for this tenant (unknown, or another tenant's)."""

    status_code = 404


class TaskConflict(ServiceError):
    """The task is finished, or the request names a step the task is not at."""

    status_code = 409


class StepTimeout(ServiceError):
    """The graph run passed the step deadline (a hung provider); the task is unchanged."""

    status_code = 503


class StepFailed(ServiceError):
    """An unexpected error inside a run; the task is unchanged."""

    status_code = 500


class StepFenced(ServiceError):
    """Another run committed a step from the same checkpoint first; this one was refused."""

    status_code = 503


EXPECTED_FAULTS = (LLMUnavailable, ServiceError, LockLost, *DATABASE_UNAVAILABLE)
"""Failures of a run that keep their own answer (503, ...) instead of becoming StepFailed (500)."""


class TaskService:
    """Runs and reads tasks for any tenant."""

    def __init__(
        self,
        graph: CompiledStateGraph,
        index: TaskIndex,
        locks: LocalLocks,
        *,
        max_dom_bytes: int,
        step_deadline_s: float = 60.0,
        context: Callable[[], Context] = Context,
    ) -> None:
        self.graph = graph
        self.index = index
        self.locks = locks
        self.checkpoints = graph.checkpointer  # a persistence.Fenced saver
        self.max_dom_bytes = max_dom_bytes
        self.step_deadline_s = step_deadline_s
        self.context = context

    # -- interact ---------------------------------------------------------------------------

    async def interact(self, tenant: str, request: InteractRequest) -> InteractResponse:
        """Verify the previous action (if any) and choose the next one, exactly once per observation."""
        self._check_dom(request.dom)
        key = RetryKey.of(request)
        if request.task_id is None:
            return await self._start(tenant, request, key)
        entry = await self._entry(tenant, request.task_id)  # 404 before queueing on the task's lock
        async with self.locks.hold(f"task:{request.task_id}"):
            # A step saves its checkpoint before it writes the entry: while the thread's head is
            # still the entry's checkpoint, no step has committed since the read above.
            if await self.checkpoints.ahead(entry.task_id) != entry.checkpoint_id:
                entry = await self._settle(await self._entry(tenant, request.task_id))
            replay = await self._replay(entry, request, key)
            if replay is not None:
                return replay
            if entry.status != "executing":
                ended = "was cancelled: start a new task" if entry.status == "cancelled" else ""
                raise TaskConflict(
                    f"task {entry.task_id} {ended or 'is already ' + entry.status}",
                    task_id=entry.task_id,
                    status=entry.status,
                )
            if request.step_index is not None and request.step_index != entry.step_index:
                raise TaskConflict(
                    f"stepIndex {request.step_index} is stale: task {entry.task_id} is at step {entry.step_index}",
                    task_id=entry.task_id,
                    status=entry.status,
                )
            return await self._run(tenant, entry.task_id, entry, request, key)

    async def _start(
        self, tenant: str, request: InteractRequest, key: RetryKey | None
    ) -> InteractResponse:
        if not (request.query or "").strip():
            raise InvalidField("query", "a new task (no taskId) needs a non-empty goal")
        if key is None:
            return await self._run(tenant, uuid.uuid4().hex, None, request, key)
        # The request names its task, so every copy of it (two processes whose lock died, a resend
        # after a failure) runs one thread, under the task's lock like any step, pinned to one
        # empty first checkpoint: the fence admits one step on it, and a step saved by a process
        # that died before recording it is adopted here.
        task_id = key.task_id(tenant)
        async with self.locks.hold(f"task:{task_id}"):
            stored = await self.index.answer(tenant, key)
            if stored is not None:
                return stored
            root = await self.checkpoints.aroot(task_id)
            for child, state in await self._saved_on(task_id, root):
                log.warning("task %s: adopting its first step %s", task_id, child)
                return await self._commit(tenant, None, state.values, child, request.url, key)
            return await self._run(tenant, task_id, None, request, key, root=root)

    async def _replay(
        self, entry: TaskEntry, request: InteractRequest, key: RetryKey | None
    ) -> InteractResponse | None:
        """The stored answer when ``request`` repeats one already answered."""
        if key is not None:
            stored = await self.index.answer(entry.tenant, key)
            if stored is not None:
                return stored
        if request.step_index is not None and request.step_index == entry.step_index - 1:
            return InteractResponse.model_validate(entry.last_response)
        return None

    async def _run(
        self,
        tenant: str,
        task_id: str,
        entry: TaskEntry | None,
        request: InteractRequest,
        key: RetryKey | None,
        *,
        root: str | None = None,
    ) -> InteractResponse:
        """One graph invocation from the pinned checkpoint (the entry's; for a new task, its
        ``root``); the step commits when its checkpoint is saved (the fence admits one child per
        checkpoint), then the index entry records it.

        Anything failing before the checkpoint is saved (provider down, the database lost, the
        step deadline, the lock lost, a crash) leaves the task as it was: what the run saved is
        discarded, and the index still pins the old checkpoint. The deadline covers the graph
        run, never the commit. A saved checkpoint whose entry was never written (the process
        died in between) is adopted by the next request for the task (:meth:`_settle`).
        """
        graph_input = observation_to_input(request, task_id, new_task=entry is None)
        # Addressed by id, never "the latest": LangGraph then stores the run's history records in
        # its own checkpoint instead of as writes on the start checkpoint, where a second run from
        # the same checkpoint (a step whose lock died) would have added its own beside them.
        start = entry.checkpoint_id if entry else root
        config = _pinned(task_id, start)
        if key is not None:  # read back if the step is adopted (_settle)
            config["configurable"] |= {RETRY_ID: key.request_id, RETRY_FINGERPRINT: key.fingerprint}
        try:
            # The start is the thread's latest checkpoint: the entry's once the lock is held (or
            # settled, above), the new task's root once its leftovers are gone (_start).
            with self.checkpoints.at_head(task_id, start) if start else contextlib.nullcontext():
                values, checkpoint_id = await self._invoke(graph_input, config)
        except BaseException as exc:
            try:
                await asyncio.shield(self._forget_failed_run(task_id, start))
            except Exception:  # the database is gone too: the next request's _settle cleans up
                log.warning(
                    "task %s: could not discard a failed run's checkpoint", task_id, exc_info=True
                )
            if fenced_out(exc):
                raise StepFenced(
                    f"task {task_id}: another request committed this step first; "
                    "send the same request again for its answer"
                ) from exc
            if isinstance(exc, Exception) and not isinstance(exc, EXPECTED_FAULTS):
                log.exception("task %s: step failed; the task is unchanged", task_id)
                raise StepFailed(
                    f"the step failed ({type(exc).__name__}); the task is unchanged: send the same request again"
                ) from exc
            raise
        try:
            return await self._commit(tenant, entry, values, checkpoint_id, request.url, key)
        except Exception as exc:
            if isinstance(exc, EXPECTED_FAULTS):
                raise
            log.exception("task %s: step saved, its answer not recorded", task_id)
            raise StepFailed(
                f"the step was saved but its answer could not be recorded ({type(exc).__name__}): "
                "send the same request again for it"
            ) from exc

    async def _commit(
        self,
        tenant: str,
        entry: TaskEntry | None,
        values: dict[str, Any],
        checkpoint_id: str,
        url: str,
        key: RetryKey | None,
    ) -> InteractResponse:
        """Write the index entry (and the retry key's answer) of a saved step."""
        response = state_to_response(values)
        stamp = now()
        await self.index.record(
            TaskEntry(
                tenant=tenant,
                task_id=response.task_id,
                session_id=values.get("session_id"),
                goal=values.get("goal", ""),
                url=url,
                status=response.status,
                step_index=response.step_index,
                checkpoint_id=checkpoint_id,
                created_at=entry.created_at if entry else stamp,
                updated_at=stamp,
                last_response=response.to_wire(),
            ),
            key,
        )
        return response

    async def _settle(self, entry: TaskEntry) -> TaskEntry:
        """The entry once the checkpoints saved on its pinned one are accounted for (under the lock).

        A finished run's checkpoint is a committed step whose entry a dead process never wrote:
        it is adopted (its entry and answer written now, as its own run would have). Anything
        else saved there is a failed run's leftovers, discarded.
        """
        for child, state in await self._saved_on(entry.task_id, entry.checkpoint_id):
            meta = state.metadata or {}
            key = None
            if meta.get(RETRY_ID) and meta.get(RETRY_FINGERPRINT):
                key = RetryKey(entry.task_id, meta[RETRY_ID], meta[RETRY_FINGERPRINT])
            log.warning("task %s: adopting step checkpoint %s", entry.task_id, child)
            url = state.values.get("url", entry.url)
            await self._commit(entry.tenant, entry, state.values, child, url, key)
            return await self._settle(await self._entry(entry.tenant, entry.task_id))
        return entry

    async def _saved_on(self, task_id: str, checkpoint_id: str) -> list[tuple[str, StateSnapshot]]:
        """The finished runs' checkpoints saved on ``checkpoint_id``, with their states; an
        unfinished one (LangGraph saves one when a run fails) is discarded on the way."""
        finished = []
        for child in await self.checkpoints.achildren(task_id, checkpoint_id):
            state = await self.graph.aget_state(_pinned(task_id, child))
            if state.metadata is None:
                continue  # gone since the listing: its failed run (lock lost) discarded it itself
            if state.next:
                await self.checkpoints.adiscard(task_id, child)
            else:
                finished.append((child, state))
        return finished

    async def _invoke(
        self, graph_input: dict[str, Any], config: dict[str, Any]
    ) -> tuple[dict[str, Any], str]:
        """Run the graph once within the step deadline: the state it saved at exit and that checkpoint's id."""
        deadline = asyncio.timeout(self.step_deadline_s)
        try:
            async with deadline:
                # The last checkpoint event is the checkpoint saved at exit: its values and id,
                # without reading the state back from the database.
                async for checkpoint in self.graph.astream(
                    graph_input,
                    config,
                    context=self.context(),
                    durability="exit",
                    stream_mode="checkpoints",
                ):
                    values, checkpoint_id = (
                        checkpoint["values"],
                        checkpoint["config"]["configurable"]["checkpoint_id"],
                    )
        except TimeoutError as exc:
            if not deadline.expired():
                raise
            raise StepTimeout(
                f"the step took longer than {self.step_deadline_s:g} s (VERILOOP_STEP_DEADLINE_S; "
                "usually a slow or hung model provider); the task is unchanged: send the same request again"
            ) from exc
        return values, checkpoint_id

    async def _forget_failed_run(self, task_id: str, start: str | None) -> None:
        """Leave the checkpointer as it was before a failed run from ``start`` (the index never
        saw the run)."""
        if start is None:  # a new task whose id only this request knew (no requestId)
            await self.graph.checkpointer.adelete_thread(task_id)
            return
        # A finished checkpoint stays (the run failed after it was saved, or it is another run's):
        # it is a committed step, which only the lock's holder adopts (_settle, _start).
        await self._saved_on(task_id, start)

    async def _entry(self, tenant: str, task_id: str) -> TaskEntry:
        entry = await self.index.get(tenant, task_id)
        if entry is None:  # unknown, or another tenant's: the same answer
            raise TaskNotFound(f"unknown task {task_id}", task_id=task_id)
        return entry

    def _check_dom(self, dom: str) -> None:
        if len(dom) * 4 <= self.max_dom_bytes:  # no code point takes more than 4 bytes of UTF-8
            return  # the usual case, without encoding a copy of the page to count its bytes
        size = len(dom.encode("utf-8"))
        if size > self.max_dom_bytes:
            raise DomTooLarge(
                f"dom is {size} bytes; the limit is {self.max_dom_bytes} bytes (VERILOOP_MAX_DOM_BYTES)"
            )

    # -- reads ------------------------------------------------------------------------------

    async def active_task(self, tenant: str, session_id: str, url: str | None) -> TaskSummary:
        """The session's most recent executing task (404: start fresh)."""
        entry = await self.index.active(tenant, session_id, url)
        if entry is None:
            raise TaskNotFound(f"no active task for session {session_id}")
        return entry.summary()

    async def task_events(self, tenant: str, task_id: str) -> AsyncIterator[dict[str, Any]]:
        """A ``step`` event now and at each recorded step or cancel of the task, then ``end`` with
        its status once it stops executing (404 before the first)."""
        await self._entry(tenant, task_id)
        return self._task_events(tenant, task_id)

    async def _task_events(self, tenant: str, task_id: str) -> AsyncIterator[dict[str, Any]]:
        entry = None
        async for entry in self.index.follow(tenant, task_id):
            yield {
                "event": "step",
                "taskId": task_id,
                "stepIndex": entry.step_index,
                "status": entry.status,
            }
        yield {"event": "end", "taskId": task_id, "status": entry.status if entry else "unknown"}

    async def task_detail(self, tenant: str, task_id: str) -> TaskDetail:
        """Status, plan, action and verification history, usage and cost of the last answered step."""
        entry = await self._entry(tenant, task_id)
        state = (await self.graph.aget_state(_pinned(task_id, entry.checkpoint_id))).values
        usage = state.get("usage") or {}
        return TaskDetail(
            **entry.summary().model_dump(),
            plan=Plan.model_validate(state["plan"]) if state.get("plan") else None,
            actions=[_action_summary(record) for record in state.get("action_history") or []],
            verifications=[
                VerificationResult.model_validate(v)
                for v in state.get("verification_history") or []
            ],
            usage={purpose: Usage.model_validate(u) for purpose, u in usage.items()},
            total_usage=total_usage(usage),
        )


RETRY_ID = "retry_request_id"
RETRY_FINGERPRINT = "retry_fingerprint"
"""Config keys (kept in the step's checkpoint metadata) naming the request a step answered."""


def _pinned(task_id: str, checkpoint_id: str | None) -> dict[str, Any]:
    """The graph config of a task (thread id = task id), at ``checkpoint_id`` when given."""
    configurable = {"thread_id": task_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _action_summary(record: dict[str, Any]) -> ActionSummary:
    before = record.get("before_state")
    summary = BeforeStateSummary.of(before) if before else None
    return ActionSummary(
        step_index=record["step_index"],
        action=record["action"],
        target=record.get("target"),
        thought=record.get("thought", ""),
        source=record.get("source", "action_generation"),
        plan_step_index=record.get("plan_step_index"),
        before_state=summary,
        expected_outcome=record.get("expected_outcome"),
        correction_strategy=record.get("correction_strategy"),
    )
