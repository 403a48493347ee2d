"""Plan runs over HTTP: start a run, read its report, answer its human reviews, resume it, follow it.

A plan run is a thread of the plan graph (thread id = run id) in the service's checkpointer,
driven by :class:`~veriloop.plans.PlanRunner`. The HTTP request that starts or resumes a run
answers 202 at once; the run goes on in the server process as an asyncio task that holds the
run's lock (``plan:<run id>``: in-process, plus a PostgreSQL advisory lock across processes), so
one run never executes twice at the same time, in one process or in many. Ownership lives in the
service's store: ``("veriloop", "plans")`` / run id -> :class:`PlanEntry` (its tenant, the
request that started it, the last failure). Another tenant's run is 404, like a task.

A run that stops early (the model provider is down, a step crashed, the server was killed)
keeps every finished step and attempt in the checkpointer (``durability="sync"``);
``POST /api/plans/{runId}/resume`` continues it without re-running them. Nothing resumes on its
own at start-up: in a fleet of processes, the client that owns the run decides.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Request
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from pydantic import BaseModel
from pydantic.alias_generators import to_camel
from sse_starlette import EventSourceResponse

from veriloop.context import PlanContext
from veriloop.llm.base import LLMUnavailable
from veriloop.plans import NoPendingReviewError, PlanRunner, UnknownRunError
from veriloop.schemas.api import (
    RUN_ID_PATTERN,
    ErrorBody,
    PlanReviewRequest,
    PlanRunDetail,
    PlanRunRequest,
    PlanRunStarted,
)
from veriloop.schemas.plan_run import FINISHED_STATUSES, PlanRunReport, ReviewDecision
from veriloop.server.index import now
from veriloop.server.locks import LocalLocks, LockLost, PostgresLocks, TaskBusy
from veriloop.server.persistence import fenced_out
from veriloop.server.service import InvalidField, ServiceError
from veriloop.server.tenants import current_tenant

log = logging.getLogger("veriloop.server.plans")

NAMESPACE = ("veriloop", "plans")
"""Store namespace of plan run entries (key: run id)."""
EVENT_HISTORY = 10_000
"""Progress events of one execution kept for late subscribers."""
POLL_S = 0.5
"""How often the event stream reads a run that executes in another process."""

Tenant = Annotated[str, Depends(current_tenant)]
RunId = Annotated[str, Path(description="The plan run's id.", pattern=RUN_ID_PATTERN)]


# -- errors -----------------------------------------------------------------------------------


class RunNotFound(ServiceError):
    """No such run for this tenant (unknown, or another tenant's)."""

    status_code = 404


class RunConflict(ServiceError):
    """The run is executing, finished, waiting for a review, or the id is taken."""

    status_code = 409


class BadReview(ServiceError):
    """A review answer for a step that is not waiting for one."""

    status_code = 400


class ManifestTooLarge(ServiceError):
    """The manifest is over the size limit."""

    status_code = 413


# -- the run index ----------------------------------------------------------------------------


class PlanEntry(BaseModel):
    """A plan run's owner and what started it (stored as a snake_case dict)."""

    tenant: str
    run_id: str
    goal: str = ""
    request: dict[str, Any]
    """``{"manifest": ..., "goal": ...}`` as given, to start the run again if it never got going."""
    concurrency: int = 4
    status: str = "running"
    """The status when the last execution ended (the checkpointer has the truth)."""
    error: str | None = None
    """Why the last execution stopped early; None once an execution ends normally."""
    created_at: str
    updated_at: str


# -- progress events --------------------------------------------------------------------------


class RunEvents:
    """The progress events of one execution of a run: kept for late subscribers, relayed live."""

    def __init__(self) -> None:
        self.history: deque[dict[str, Any]] = deque(maxlen=EVENT_HISTORY)
        self.queues: set[asyncio.Queue] = set()
        self.closed = False

    def publish(self, event: Mapping[str, Any]) -> None:
        wire = {to_camel(key): value for key, value in event.items()}
        self.history.append(wire)
        for queue in self.queues:
            queue.put_nowait(wire)

    def close(self) -> None:
        self.closed = True
        for queue in self.queues:
            queue.put_nowait(None)

    async def follow(self) -> AsyncIterator[dict[str, Any]]:
        """Every event of this execution so far, then each new one until it ends."""
        backlog = list(self.history)  # snapshot and subscription with no await in between
        if self.closed:
            for event in backlog:
                yield event
            return
        queue: asyncio.Queue = asyncio.Queue()
        self.queues.add(queue)
        try:
            for event in backlog:
                yield event
            while (event := await queue.get()) is not None:
                yield event
        finally:
            self.queues.discard(queue)


# -- the service ------------------------------------------------------------------------------


class PlanService:
    """Starts, reads, answers and resumes plan runs for any tenant (framework-free)."""

    def __init__(
        self,
        checkpointer: BaseCheckpointSaver,
        store: BaseStore,
        locks: LocalLocks,
        *,
        context: PlanContext,
        max_manifest_bytes: int,
    ) -> None:
        self.runner = PlanRunner(checkpointer, context=context)
        self.store = store
        self.locks = locks
        self.max_manifest_bytes = max_manifest_bytes
        self._running: set[str] = set()
        self._events: dict[str, RunEvents] = {}
        self._tasks: set[asyncio.Task] = set()

    # -- requests -------------------------------------------------------------------------

    async def start(self, tenant: str, body: PlanRunRequest) -> PlanRunStarted:
        """Create a run and start it in the background (202)."""
        request = self._run_request(body)
        run_id = body.run_id or _new_id()

        async def claim() -> None:
            if await self.store.aget(NAMESPACE, run_id) is not None or await self._has_thread(
                run_id
            ):
                raise RunConflict(f"plan run {run_id} exists already: choose another runId")
            stamp = now()
            entry = PlanEntry(
                tenant=tenant,
                run_id=run_id,
                goal=request.get("goal") or "",
                request=request,
                concurrency=body.concurrency,
                created_at=stamp,
                updated_at=stamp,
            )
            await self._save(entry)

        await self._launch(run_id, claim, lambda on_event: self._first_run(run_id, on_event))
        return PlanRunStarted(run_id=run_id, status="running")

    async def detail(self, tenant: str, run_id: str) -> PlanRunDetail:
        """The run's report as the checkpointer holds it, plus executing / error."""
        entry = await self._entry(tenant, run_id)
        report = await self._report(entry)
        return PlanRunDetail(
            **report.model_dump(),
            executing=await self.executing(run_id),
            error=entry.error,
        )

    async def review(self, tenant: str, run_id: str, body: PlanReviewRequest) -> PlanRunStarted:
        """Answer pending human reviews and continue the run in the background (202)."""
        entry = await self._entry(tenant, run_id)
        if await self.executing(run_id):
            raise RunConflict(
                f"plan run {run_id} is still executing; answer its reviews once it pauses"
            )
        decisions = dict(body.decisions)

        async def check() -> None:
            report = await self._report(entry)
            waiting = {review.step_id for review in report.pending_reviews}
            unknown = sorted(set(decisions) - waiting)
            if unknown:
                raise BadReview(
                    f"plan run {run_id} has no pending review for step {', '.join(unknown)} "
                    f"(status {report.status}; waiting for: {', '.join(sorted(waiting)) or 'none'})"
                )

        await self._launch(
            run_id,
            check,
            lambda on_event: self._answer(run_id, decisions, entry.concurrency, on_event),
        )
        return PlanRunStarted(run_id=run_id, status="running")

    async def resume(self, tenant: str, run_id: str) -> PlanRunStarted:
        """Continue a run that stopped early (a restart, a crash, a provider outage) (202)."""
        entry = await self._entry(tenant, run_id)
        if await self.executing(run_id):
            raise RunConflict(f"plan run {run_id} is executing: nothing to resume")

        async def check() -> None:
            try:
                report = await self.runner.areport(run_id)
            except UnknownRunError:
                return  # the server stopped before the run's first checkpoint: start it again
            if report.pending_reviews:
                waiting = ", ".join(sorted(r.step_id for r in report.pending_reviews))
                raise RunConflict(
                    f"plan run {run_id} is waiting for a review of {waiting}: "
                    f"POST /api/plans/{run_id}/reviews"
                )
            if report.status != "running":
                raise RunConflict(f"plan run {run_id} is already {report.status}")

        async def go(on_event: Callable[[dict], None]) -> PlanRunReport:
            if not await self._has_thread(run_id):
                return await self._first_run(run_id, on_event)
            return await self.runner.aresume(
                run_id, concurrency=entry.concurrency, on_event=on_event
            )

        await self._launch(run_id, check, go)
        return PlanRunStarted(run_id=run_id, status="running")

    async def events(self, tenant: str, run_id: str) -> AsyncIterator[dict[str, Any]]:
        """The run's progress events until it stops or pauses, then ``end`` with its status.

        404 is raised before the first event. A run executing in this process relays its events
        live (from the start of the current execution); one executing in another process is read
        from its checkpoints (a ``step_finished`` per finished step).
        """
        entry = await self._entry(tenant, run_id)
        return self._follow(entry)

    # -- running --------------------------------------------------------------------------

    async def _launch(
        self,
        run_id: str,
        check: Callable[[], Awaitable[None]],
        run: Callable[[Callable[[dict], None]], Awaitable[PlanRunReport]],
    ) -> None:
        """Start ``run`` in a background task once it holds the run's lock and ``check`` passed;
        a busy lock or a failed check is raised here (the request's answer), not in the task."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(self._drive(run_id, check, run, ready), name=f"plan:{run_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        await asyncio.shield(ready)

    async def _drive(
        self,
        run_id: str,
        check: Callable[[], Awaitable[None]],
        run: Callable[[Callable[[dict], None]], Awaitable[PlanRunReport]],
        ready: asyncio.Future[None],
    ) -> None:
        try:
            async with self._exclusive(run_id):
                await check()
                events = self._events[run_id] = RunEvents()
                ready.set_result(None)
                try:
                    report = await run(events.publish)
                except LLMUnavailable as exc:
                    log.warning(
                        "plan run %s: model provider unavailable (%s); resumable", run_id, exc
                    )
                    await self._finished(run_id, None, f"model provider unavailable ({exc})")
                except Exception as exc:
                    if fenced_out(exc):  # another execution saved this batch first: no record
                        log.warning("plan run %s: executed elsewhere meanwhile; stopped", run_id)
                    else:
                        log.exception("plan run %s: stopped by an error; resumable", run_id)
                        await self._finished(run_id, None, f"{type(exc).__name__}: {exc}")
                else:
                    await self._finished(run_id, report.status, None)
                finally:
                    events.close()
                    if self._events.get(run_id) is events:
                        del self._events[run_id]
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as exc:  # a busy lock, a failed check, the database
            if not ready.done():
                ready.set_exception(exc)
            elif isinstance(exc, LockLost):  # another process may execute the run now: no record
                log.warning("plan run %s: its lock's connection died; stopped, resumable", run_id)
            else:
                log.exception("plan run %s: could not record the end of the run", run_id)

    async def _first_run(self, run_id: str, on_event: Callable[[dict], None]) -> PlanRunReport:
        item = await self.store.aget(NAMESPACE, run_id)
        entry = PlanEntry.model_validate(item.value)
        # The body says which it is: a goal that names a file on the server is never read as one.
        return await self.runner.arun(
            manifest=entry.request.get("manifest"),
            goal=entry.request.get("goal"),
            run_id=run_id,
            concurrency=entry.concurrency,
            on_event=on_event,
        )

    async def _answer(
        self,
        run_id: str,
        decisions: Mapping[str, ReviewDecision],
        concurrency: int,
        on_event: Callable[[dict], None],
    ) -> PlanRunReport:
        try:
            return await self.runner.aresume(
                run_id, decisions, concurrency=concurrency, on_event=on_event
            )
        except NoPendingReviewError as exc:  # checked under the lock; kept for safety
            raise BadReview(str(exc)) from exc

    async def _finished(self, run_id: str, status: str | None, error: str | None) -> None:
        item = await self.store.aget(NAMESPACE, run_id)
        if item is None:
            return
        entry = PlanEntry.model_validate(item.value)
        update: dict[str, Any] = {"error": error, "updated_at": now()}
        if status is not None:
            update["status"] = status
        await self._save(entry.model_copy(update=update))

    @asynccontextmanager
    async def _exclusive(self, run_id: str) -> AsyncIterator[None]:
        """Hold the run's lock now, or raise RunConflict (no waiting: the run may take hours).

        In this process a set of executing runs; across processes (PostgreSQL) the advisory lock
        that ``locks.hold("plan:<run id>")`` would take, tried instead of waited for, and released
        at the end (or with a killed process's session).
        """
        busy = RunConflict(f"plan run {run_id} is executing; try again once it stops or pauses")
        if run_id in self._running:
            raise busy
        self._running.add(run_id)
        try:
            async with AsyncExitStack() as held:
                if isinstance(self.locks, PostgresLocks):
                    try:
                        await held.enter_async_context(
                            self.locks.holding(_lock_key(run_id), wait=False)
                        )
                    except TaskBusy as exc:  # only the lock's own wait: the run's errors pass
                        raise busy from exc
                yield
        finally:
            self._running.discard(run_id)

    async def executing(self, run_id: str) -> bool:
        """True when a server process is executing the run right now."""
        if run_id in self._running:
            return True
        if not isinstance(self.locks, PostgresLocks):
            return False  # SQLite: one process
        return await self.locks.held(_lock_key(run_id))

    async def aclose(self) -> None:
        """Stop executing runs (they stay resumable) before the storage closes."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- reading --------------------------------------------------------------------------

    async def _follow(self, entry: PlanEntry) -> AsyncIterator[dict[str, Any]]:
        run_id = entry.run_id
        events = self._events.get(run_id)
        if events is not None:
            async for event in events.follow():
                yield event
        else:
            seen: set[str] = set()
            while True:
                executing = await self.executing(run_id)
                report = await self._report(entry)
                for step_id, result in report.steps.items():
                    if step_id not in seen and result.status in FINISHED_STATUSES:
                        seen.add(step_id)
                        yield {
                            "event": "step_finished",
                            "runId": run_id,
                            "stepId": step_id,
                            "status": result.status,
                            "verificationStatus": result.verification_status,
                            "attempts": len(result.attempts),
                            "diagnosis": result.diagnosis,
                        }
                if not executing:
                    break
                await asyncio.sleep(POLL_S)
        item = await self.store.aget(NAMESPACE, run_id)
        latest = PlanEntry.model_validate(item.value) if item else entry
        report = await self._report(latest)
        end = {"event": "end", "runId": run_id, "status": report.status}
        if report.pending_reviews:
            end["pendingReviews"] = [r.step_id for r in report.pending_reviews]
        if latest.error:
            end["error"] = latest.error
        yield end

    async def _report(self, entry: PlanEntry) -> PlanRunReport:
        try:
            return await self.runner.areport(entry.run_id)
        except UnknownRunError:  # created, but stopped before its first checkpoint
            return PlanRunReport(run_id=entry.run_id, status="running", goal=entry.goal)

    async def _entry(self, tenant: str, run_id: str) -> PlanEntry:
        item = await self.store.aget(NAMESPACE, run_id)
        entry = PlanEntry.model_validate(item.value) if item else None
        if entry is None or entry.tenant != tenant:  # unknown, or another tenant's: the same answer
            raise RunNotFound(f"unknown plan run {run_id}")
        return entry

    async def _save(self, entry: PlanEntry) -> None:
        await self.store.aput(NAMESPACE, entry.run_id, entry.model_dump())

    async def _has_thread(self, run_id: str) -> bool:
        config = {"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}
        return await self.runner.checkpointer.aget_tuple(config) is not None

    def _run_request(self, body: PlanRunRequest) -> dict[str, Any]:
        """``{"manifest"?, "goal"?}`` for the graph; 422 / 413 for what cannot start. Whether the
        manifest parses and can run is the plan node's call: a run rejected with located problems."""
        goal = (body.goal or "").strip()
        manifest = body.manifest
        if manifest is None:
            if not goal:
                raise InvalidField("goal", "give a manifest, a goal, or both")
            return {"goal": goal}
        if isinstance(manifest, str):
            if not manifest.strip():
                raise InvalidField("manifest", "the manifest text is empty")
            size = len(manifest.encode("utf-8"))
        else:
            size = len(json.dumps(manifest, default=str).encode("utf-8"))
        if size > self.max_manifest_bytes:
            raise ManifestTooLarge(
                f"manifest is {size} bytes; the limit is {self.max_manifest_bytes} bytes "
                "(VERILOOP_MAX_DOM_BYTES)"
            )
        return {"manifest": manifest, **({"goal": goal} if goal else {})}


def _lock_key(run_id: str) -> str:
    return f"plan:{run_id}"


def _new_id() -> str:
    return uuid.uuid4().hex


# -- routes -----------------------------------------------------------------------------------

ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing or unknown API key."},
    404: {"model": ErrorBody, "description": "Unknown plan run (or another tenant's)."},
    503: {"model": ErrorBody, "description": "The database is busy; send the request again."},
}

router = APIRouter(prefix="/api/plans", tags=["plans"])


def plan_service(request: Request) -> PlanService:
    """The app's PlanService (set up in the lifespan)."""
    return request.app.state.plans


@router.post(
    "",
    status_code=202,
    response_model=PlanRunStarted,
    response_model_exclude_none=True,
    responses={
        **ERRORS,
        409: {"model": ErrorBody, "description": "The runId is taken."},
        413: {"model": ErrorBody, "description": "The manifest (or body) is over the size limit."},
    },
)
async def start_plan_run(
    body: Annotated[PlanRunRequest, Body()], tenant: Tenant, request: Request
) -> PlanRunStarted:
    """Start a plan run from a manifest (object or YAML/JSON text) and/or a goal; it goes on in
    the server. A manifest that does not parse or cannot run makes a run that is `rejected` at
    once, with the located problems in `haltReason`."""
    return await plan_service(request).start(tenant, body)


@router.get(
    "/{run_id}",
    response_model=PlanRunDetail,
    response_model_exclude_none=True,
    responses=ERRORS,
)
async def plan_run(run_id: RunId, tenant: Tenant, request: Request) -> PlanRunDetail:
    """The run's report: status (running, awaiting_review, completed, failed, rejected), steps
    with attempts and checks, pending reviews, replans, usage; whether it is executing now."""
    return await plan_service(request).detail(tenant, run_id)


@router.post(
    "/{run_id}/reviews",
    status_code=202,
    response_model=PlanRunStarted,
    response_model_exclude_none=True,
    responses={
        **ERRORS,
        400: {"model": ErrorBody, "description": "A step that is not waiting for a review."},
        409: {"model": ErrorBody, "description": "The run is still executing."},
    },
)
async def review_plan_run(
    run_id: RunId, body: PlanReviewRequest, tenant: Tenant, request: Request
) -> PlanRunStarted:
    """Answer pending human reviews (`{"decisions": {stepId: {approved, comment}}}`); the run
    continues in the server."""
    return await plan_service(request).review(tenant, run_id, body)


@router.post(
    "/{run_id}/resume",
    status_code=202,
    response_model=PlanRunStarted,
    response_model_exclude_none=True,
    responses={
        **ERRORS,
        409: {
            "model": ErrorBody,
            "description": "Executing, finished, or waiting for a review.",
        },
    },
)
async def resume_plan_run(run_id: RunId, tenant: Tenant, request: Request) -> PlanRunStarted:
    """Continue a run that stopped early (server restart, crash, model outage) from its last
    checkpoint: finished steps and attempts are not run again."""
    return await plan_service(request).resume(tenant, run_id)


@router.get(
    "/{run_id}/events",
    responses={
        **ERRORS,
        200: {
            "description": "Server-Sent Events: attempt_started, check_result, attempt_finished, "
            "step_finished, replan ... then `end` with the run's status.",
            "content": {"text/event-stream": {}},
        },
    },
)
async def plan_run_events(run_id: RunId, tenant: Tenant, request: Request) -> EventSourceResponse:
    """The run's progress as Server-Sent Events, ending when the run stops or pauses."""
    events = await plan_service(request).events(tenant, run_id)

    async def stream() -> AsyncIterator[dict[str, str]]:
        async for event in events:
            yield {"event": str(event["event"]), "data": json.dumps(event, default=str)}

    return EventSourceResponse(stream())
