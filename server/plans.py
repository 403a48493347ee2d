"""Plan runs over HTTP: start a run, read its report, answer its human reviews, resume it, follow it.

A plan run is a thread of the plan graph in the service's checkpointer, driven by
:class:`~veriloop.plans.PlanRunner`. Run ids are per tenant: the thread id is ``<tenant>:<run
id>`` (:func:`~veriloop.server.tenants.scoped_id`), so two tenants may use one run id and neither
learns that the other did. The HTTP request that starts or resumes a run answers 202 at once; the
run goes on in the server process as an asyncio task that holds the run's lock (``plan:<thread
id>``: in-process, plus a PostgreSQL advisory lock across processes), so one run never executes
twice at the same time, in one process or in many. Ownership lives in the service's store:
``("veriloop", "plans")`` / thread id -> :class:`PlanEntry` (its tenant, the request that
started it, the last failure). Another tenant's run is 404, like a task.

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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query, Request
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from pydantic import BaseModel
from pydantic.alias_generators import to_camel
from sse_starlette import EventSourceResponse

from veriloop.context import PlanContext
from veriloop.engines.plan.confinement.limits import timeout_refusals
from veriloop.engines.plan.confinement.sandbox import bwrap_problem
from veriloop.engines.plan.judge.checks import truncate_middle
from veriloop.engines.plan.manifest import ManifestError, ManifestLimits, load_manifest
from veriloop.engines.plan.requirements import why_model_needed
from veriloop.llm.base import LLMUnavailable
from veriloop.plans import (
    NoPendingReviewError,
    PlanRunner,
    RunFiles,
    UnknownRunError,
    check_manifest,
)
from veriloop.schemas.api import (
    RUN_ID_PATTERN,
    ErrorBody,
    ManifestCheck,
    PlanReviewRequest,
    PlanRunDetail,
    PlanRunList,
    PlanRunRequest,
    PlanRunStarted,
    PlanRunSummary,
)
from veriloop.schemas.manifest import AgentSpec, Manifest, ManifestStep, PlanShell
from veriloop.schemas.plan_run import (
    ENDED_STATUSES,
    FINISHED_STATUSES,
    CriticFinding,
    PlanRunReport,
    ReviewDecision,
)
from veriloop.schemas.usage import total_usage
from veriloop.server.availability import NO_MODEL_HELP
from veriloop.server.index import now
from veriloop.server.locks import LocalLocks, LockLost, SharedLocks, TaskBusy
from veriloop.server.persistence import fenced_out
from veriloop.server.service import InvalidField, ServiceError
from veriloop.server.tenants import current_tenant, scoped_id

log = logging.getLogger("veriloop.server.plans")

NAMESPACE = ("veriloop", "plans")
"""Store namespace of plan run entries (key: thread id, the run id in its tenant's namespace)."""
EVENT_HISTORY = 10_000
"""Progress events of one execution kept for late subscribers."""
EVENT_TEXT_CHARS = 2_000
"""A longer text in an event (a diagnosis, an error) keeps its head and tail."""
POLL_S = 0.5
"""How often the event stream reads a run that executes in another process, and an executing run
its entry for a cancel."""
SEARCH_SCAN = 500
"""Runs a text search of the list reads (the latest first)."""
CANCEL_WAIT_S = 30.0
"""How long a cancel waits for the process executing the run to stop it (it polls every POLL_S)."""
CANCEL_REASON = "cancelled by a person before this step finished"
STOPPED_UNRECORDED = (
    "the service stopped while the run executed (a restart or a crash); resume continues it"
)
SERVICE_RUN_FILES = RunFiles(keep=False)
"""A finished run's folder and snapshot store are removed (``veriloop serve --keep-workspaces``)."""

Tenant = Annotated[str, Depends(current_tenant)]
RunId = Annotated[str, Path(description="The plan run's id.", pattern=RUN_ID_PATTERN)]
Limit = Annotated[int, Query(ge=1, le=100, description="Items per page.")]
Offset = Annotated[int, Query(ge=0, le=1_000_000, description="Items to skip (nextOffset).")]


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
    """The manifest is past a limit: bytes, steps, nesting, values once read, YAML aliases."""

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
    halt_reason: str = ""
    """Why the run was rejected before its first checkpoint (a manifest past the reading limits)."""
    cancel_requested: bool = False
    """Someone asked to cancel the run: the process executing it stops it (see PlanService.cancel)."""
    created_at: str
    updated_at: str

    @property
    def thread_id(self) -> str:
        """The run's thread in the checkpointer and the key of this entry."""
        return scoped_id(self.tenant, self.run_id)


# -- progress events --------------------------------------------------------------------------


class RunEvents:
    """The progress events of one execution of a run: kept for late subscribers, relayed live."""

    def __init__(self) -> None:
        self.history: deque[dict[str, Any]] = deque(maxlen=EVENT_HISTORY)
        self.queues: set[asyncio.Queue] = set()
        self.closed = False

    def publish(self, event: Mapping[str, Any]) -> None:
        wire = {
            to_camel(key): truncate_middle(value, EVENT_TEXT_CHARS)
            if isinstance(value, str)
            else value
            for key, value in event.items()
        }
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
        manifest_limits: ManifestLimits,
        plan_shell: PlanShell = "off",
        model_ready: bool = True,
        files: RunFiles = SERVICE_RUN_FILES,
    ) -> None:
        """``model_ready``: the service has a model (steps that need one can run)."""
        self.model_ready = model_ready
        # Each run in a folder of its own: one tenant's run never sees another's files.
        self.runner = PlanRunner(
            checkpointer, context=context, workspace_per_run=True, run_files=files
        )
        self.plan_shell = plan_shell
        if plan_shell == "sandboxed" and (why := bwrap_problem()):
            log.warning("plan_shell=sandboxed, but %s: plan steps that start processes fail", why)
        self.store = store
        self.locks = locks
        self.max_manifest_bytes = max_manifest_bytes
        self.manifest_limits = manifest_limits
        self._running: set[str] = set()
        self._events: dict[str, RunEvents] = {}
        self._tasks: set[asyncio.Task] = set()
        self._executions: dict[str, asyncio.Task] = {}
        """Thread id -> the task executing the run in this process (what a cancel stops)."""
        self._cancelling: set[str] = set()
        """Threads whose execution here is being stopped by a cancel (not by a shutdown)."""

    # -- requests -------------------------------------------------------------------------

    async def start(self, tenant: str, body: PlanRunRequest) -> PlanRunStarted:
        """Create a run and start it in the background (202)."""
        request = await asyncio.to_thread(self._run_request, body)  # parsing takes up to ~1 s
        if "manifest" in request:
            await asyncio.to_thread(self._check_operator_settings, request["manifest"])
        elif not self.model_ready:
            raise InvalidField(
                "goal", f"the planner writes a plan from a goal, but {NO_MODEL_HELP}"
            )
        run_id = body.run_id or _new_id()
        thread = scoped_id(tenant, run_id)

        async def claim() -> None:
            if await self.store.aget(NAMESPACE, thread) is not None or await self._has_thread(
                thread
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

        await self._launch(thread, claim, lambda on_event: self._first_run(thread, on_event))
        return PlanRunStarted(run_id=run_id, status="running")

    async def detail(self, tenant: str, run_id: str) -> PlanRunDetail:
        """The run's report as the checkpointer holds it, plus executing / error."""
        # Whether it executes is read first: a run that stops after this read has already
        # recorded its end (its error) by the time the entry is read below.
        executing = await self.executing(scoped_id(tenant, run_id))
        entry = await self._entry(tenant, run_id)
        report = paused(await self._report(entry), entry, executing=executing).within()
        error = entry.error or (STOPPED_UNRECORDED if report.status == "paused" else None)
        return PlanRunDetail(**report.model_dump(), executing=executing, error=error)

    async def review(self, tenant: str, run_id: str, body: PlanReviewRequest) -> PlanRunStarted:
        """Answer pending human reviews and continue the run in the background (202)."""
        entry = await self._entry(tenant, run_id)
        if await self.executing(entry.thread_id):
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
            entry.thread_id,
            check,
            lambda on_event: self._answer(entry.thread_id, decisions, entry.concurrency, on_event),
        )
        return PlanRunStarted(run_id=run_id, status="running")

    async def resume(self, tenant: str, run_id: str) -> PlanRunStarted:
        """Continue a run that stopped early (a restart, a crash, a provider outage) (202)."""
        entry = await self._entry(tenant, run_id)
        thread = entry.thread_id
        if entry.status == "cancelled" or entry.cancel_requested:
            raise RunConflict(
                f"plan run {run_id} is cancelled: nothing to resume", status="cancelled"
            )
        if await self.executing(thread):
            raise RunConflict(f"plan run {run_id} is executing: nothing to resume")

        async def check() -> None:
            try:
                report = await self.runner.areport(thread)
            except UnknownRunError:
                if entry.halt_reason:
                    raise RunConflict(f"plan run {run_id} is already rejected") from None
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
            if not await self._has_thread(thread):
                return await self._first_run(thread, on_event)
            return await self.runner.aresume(
                thread, concurrency=entry.concurrency, on_event=on_event
            )

        await self._launch(thread, check, go)
        return PlanRunStarted(run_id=run_id, status="running")

    async def cancel(self, tenant: str, run_id: str) -> PlanRunStarted:
        """Stop the run wherever it executes (its steps' processes are killed) and record it as
        ``cancelled`` with its unfinished steps; a run that already ended is a 409 naming its
        status, one already cancelled answers again as the first cancel did."""
        entry = await self._entry(tenant, run_id)
        thread = entry.thread_id
        if entry.status != "cancelled":
            status = (await self._report(entry)).status
            if status in ENDED_STATUSES and status != "cancelled":
                raise RunConflict(
                    f"plan run {run_id} is already {status}: nothing to cancel", status=status
                )
            await self._save(entry.model_copy(update={"cancel_requested": True}))
            execution = self._executions.get(thread)
            if execution is not None:  # executing here: no need to wait for the watcher
                self._cancelling.add(thread)
                execution.cancel()
            await self._settle_cancel(tenant, run_id)
        return PlanRunStarted(run_id=run_id, status="cancelled")

    async def _settle_cancel(self, tenant: str, run_id: str) -> None:
        """Wait until no process executes the run, then record its cancel unless the process that
        executed it already did."""
        thread = scoped_id(tenant, run_id)
        deadline = asyncio.get_running_loop().time() + CANCEL_WAIT_S
        while True:
            if (await self._entry(tenant, run_id)).status == "cancelled":
                return
            if not await self.executing(thread):
                try:
                    async with self._exclusive(thread):
                        entry = await self._entry(tenant, run_id)
                        status = (await self._report(entry)).status
                        if status in ENDED_STATUSES and status != "cancelled":
                            # It ended on its own before the cancel reached it: say so.
                            raise RunConflict(
                                f"plan run {run_id} is already {status}: nothing to cancel",
                                status=status,
                            )
                        if entry.status != "cancelled":
                            await self._record_cancel(thread)
                        return
                except RunConflict as exc:
                    if exc.extra.get("status"):
                        raise
                    # It started executing again (a resume): its watcher stops it.
            if asyncio.get_running_loop().time() > deadline:
                raise RunConflict(
                    f"plan run {run_id} did not stop within {CANCEL_WAIT_S:g} s; "
                    "send the cancel again"
                )
            await asyncio.sleep(POLL_S / 5)

    async def events(self, tenant: str, run_id: str) -> AsyncIterator[dict[str, Any]]:
        """The run's progress events until it stops or pauses, then ``end`` with its status.

        404 is raised before the first event. A run executing in this process relays its events
        live (from the start of the current execution); one executing in another process is read
        from its checkpoints (a ``step_finished`` per finished step).
        """
        entry = await self._entry(tenant, run_id)
        return self._follow(entry)

    async def list(
        self,
        tenant: str,
        *,
        limit: int = 20,
        offset: int = 0,
        status: str | None = None,
        text: str | None = None,
    ) -> PlanRunList:
        """The tenant's runs, most recently started or ended first, each summed up from its report;
        only those whose last execution ended with ``status``, and whose id, goal or manifest
        contains ``text`` (case-insensitive, among the latest SEARCH_SCAN runs), when given."""
        where = {"tenant": tenant, **({"status": status} if status else {})}
        if text:
            items = await self.store.asearch(NAMESPACE, filter=where, limit=SEARCH_SCAN)
            needle = text.casefold()
            found = [item for item in items if needle in _searchable(item.value)]
            items = found[offset : offset + limit + 1]
        else:
            items = await self.store.asearch(
                NAMESPACE, filter=where, limit=limit + 1, offset=offset
            )
        entries = [PlanEntry.model_validate(item.value) for item in items]
        summaries = [await self._summary(entry) for entry in entries[:limit]]
        more = len(entries) > limit
        return PlanRunList(
            items=summaries,
            offset=offset,
            limit=limit,
            next_offset=offset + limit if more else None,
        )

    async def reports(self, tenant: str, *, status: str, limit: int) -> list[PlanRunReport]:
        """The reports of the tenant's runs whose last execution ended with ``status``."""
        items = await self.store.asearch(
            NAMESPACE, filter={"tenant": tenant, "status": status}, limit=limit
        )
        return [await self._report(PlanEntry.model_validate(i.value)) for i in items]

    async def check(self, body: PlanRunRequest) -> ManifestCheck:
        """What the parser and the static critic say of a manifest, before anything runs (in a
        thread: a large manifest's parse must not hold up the event loop)."""
        request = await asyncio.to_thread(self._run_request, body)
        if "manifest" not in request:
            raise InvalidField("manifest", "give the manifest to check")
        return await asyncio.to_thread(self._check, request["manifest"])

    def _check(self, raw: Any) -> ManifestCheck:
        """The parser's and the critic's findings, plus what this service would refuse (one
        critical finding each), so that ``runnable`` is what POST /api/plans would do."""
        check = check_manifest(raw, self.runner.context)
        found = {finding.message for finding in check.critique.findings}
        # check_manifest already names what every runner refuses (the timeout maximum)
        refused = [message for message in self._refusals_of(raw) if message not in found]
        if not refused:
            return check
        findings = [
            CriticFinding(rule="not_allowed_here", severity="critical", message=message)
            for message in refused
        ]
        summary = (
            f"This service will not run it as configured ({len(refused)} not_allowed_here "
            f"finding{'s' if len(refused) > 1 else ''}). The critic: {check.critique.summary}"
        )
        critique = check.critique.model_copy(
            update={"findings": [*findings, *check.critique.findings], "summary": summary}
        )
        return check.model_copy(update={"runnable": False, "critique": critique})

    def refusals(self, manifest: Manifest) -> list[str]:
        """Everything in ``manifest`` this service will not run, one located sentence each: the
        operator's settings (:func:`operator_refusals`) and steps needing a model it does not
        have. POST /api/plans answers 422 with them; POST /api/plans/validate says not runnable."""
        context = self.runner.context
        passed = {name.strip() for name in context.pass_env.split(",")}
        refused = operator_refusals(manifest, self.plan_shell, passed)
        refused += timeout_refusals(manifest, context.max_timeout_s)
        if not self.model_ready:
            for where, step in _all_steps(manifest):
                why = why_model_needed(step, review=context.review_critical_steps)
                if why is not None:
                    refused.append(f"{where}step {step.id!r} {why}, but {NO_MODEL_HELP}")
        return refused

    def _refusals_of(self, raw: Any) -> list[str]:
        """:meth:`refusals` of a manifest as sent ([] when it does not parse: the plan node
        rejects it, with located problems)."""
        context = self.runner.context
        try:
            manifest = load_manifest(
                raw, origin="user", max_depth=context.max_depth, limits=self.manifest_limits
            )
        except ManifestError:
            return []
        return self.refusals(manifest)

    # -- running --------------------------------------------------------------------------

    async def _launch(
        self,
        thread: str,
        check: Callable[[], Awaitable[None]],
        run: Callable[[Callable[[dict], None]], Awaitable[PlanRunReport]],
    ) -> None:
        """Start ``run`` in a background task once it holds the run's lock and ``check`` passed;
        a busy lock or a failed check is raised here (the request's answer), not in the task."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(self._drive(thread, check, run, ready), name=f"plan:{thread}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        await asyncio.shield(ready)

    async def _drive(
        self,
        thread: str,
        check: Callable[[], Awaitable[None]],
        run: Callable[[Callable[[dict], None]], Awaitable[PlanRunReport]],
        ready: asyncio.Future[None],
    ) -> None:
        try:
            async with self._exclusive(thread):
                await check()
                events = self._events[thread] = RunEvents()
                ready.set_result(None)
                execution = self._executions[thread] = asyncio.create_task(run(events.publish))
                watcher = asyncio.create_task(self._watch_cancel(thread, execution))
                try:
                    report = await execution
                except asyncio.CancelledError:
                    if thread not in self._cancelling or not execution.cancelled():
                        raise  # a shutdown: the run stays resumable
                    await self._record_cancel(thread)
                except ManifestError as exc:  # data the checkpointer could never hold
                    await self._finished(thread, "rejected", None, halt_reason=str(exc))
                except LLMUnavailable as exc:
                    log.warning(
                        "plan run %s: model provider unavailable (%s); resumable", thread, exc
                    )
                    await self._finished(thread, None, f"model provider unavailable ({exc})")
                except Exception as exc:
                    if fenced_out(exc):  # another execution saved this batch first: no record
                        log.warning("plan run %s: executed elsewhere meanwhile; stopped", thread)
                    else:
                        log.exception("plan run %s: stopped by an error; resumable", thread)
                        await self._finished(thread, None, f"{type(exc).__name__}: {exc}")
                else:
                    await self._finished(thread, report.status, None)
                finally:
                    watcher.cancel()
                    self._executions.pop(thread, None)
                    self._cancelling.discard(thread)
                    events.close()
                    if self._events.get(thread) is events:
                        del self._events[thread]
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as exc:  # a busy lock, a failed check, the database
            if not ready.done():
                ready.set_exception(exc)
            elif isinstance(exc, LockLost):  # another process may execute the run now: no record
                log.warning("plan run %s: its lock's connection died; stopped, resumable", thread)
            else:
                log.exception("plan run %s: could not record the end of the run", thread)

    async def _watch_cancel(self, thread: str, execution: asyncio.Task) -> None:
        """Stop ``execution`` once the run's entry asks for a cancel (set by any process)."""
        while True:
            await asyncio.sleep(POLL_S)
            try:
                item = await self.store.aget(NAMESPACE, thread)
            except Exception:  # the database is away for a moment: read again at the next poll
                log.debug(
                    "plan run %s: could not read its entry for a cancel", thread, exc_info=True
                )
                continue
            if item is not None and item.value.get("cancel_requested"):
                self._cancelling.add(thread)
                execution.cancel()
                return

    async def _record_cancel(self, thread: str) -> None:
        """Write the end of a cancelled run (under its lock): the checkpointer's state, its entry."""
        item = await self.store.aget(NAMESPACE, thread)
        if item is None:
            return
        entry = PlanEntry.model_validate(item.value)
        if await self._has_thread(thread):
            await self.runner.acancel(thread, CANCEL_REASON)
        update = {"status": "cancelled", "error": None, "updated_at": now()}
        await self._save(entry.model_copy(update=update))

    async def _first_run(self, thread: str, on_event: Callable[[dict], None]) -> PlanRunReport:
        item = await self.store.aget(NAMESPACE, thread)
        entry = PlanEntry.model_validate(item.value)
        # The body says which it is: a goal that names a file on the server is never read as one.
        return await self.runner.arun(
            manifest=entry.request.get("manifest"),
            goal=entry.request.get("goal"),
            run_id=entry.run_id,
            thread_id=thread,
            concurrency=entry.concurrency,
            on_event=on_event,
        )

    async def _answer(
        self,
        thread: str,
        decisions: Mapping[str, ReviewDecision],
        concurrency: int,
        on_event: Callable[[dict], None],
    ) -> PlanRunReport:
        try:
            return await self.runner.aresume(
                thread, decisions, concurrency=concurrency, on_event=on_event
            )
        except NoPendingReviewError as exc:  # checked under the lock; kept for safety
            raise BadReview(str(exc)) from exc

    async def _finished(
        self, thread: str, status: str | None, error: str | None, *, halt_reason: str = ""
    ) -> None:
        item = await self.store.aget(NAMESPACE, thread)
        if item is None:
            return
        entry = PlanEntry.model_validate(item.value)
        update: dict[str, Any] = {"error": error, "halt_reason": halt_reason, "updated_at": now()}
        if status is not None:
            update["status"] = status
        await self._save(entry.model_copy(update=update))

    @asynccontextmanager
    async def _exclusive(self, thread: str) -> AsyncIterator[None]:
        """Hold the run's lock now, or raise RunConflict (no waiting: the run may take hours).

        In this process a set of executing runs; across processes the shared lock that
        ``locks.hold("plan:<thread id>")`` would take, tried instead of waited for, and released
        at the end (or with a killed process).
        """
        busy = RunConflict("the plan run is executing; try again once it stops or pauses")
        if thread in self._running:
            raise busy
        self._running.add(thread)
        try:
            async with AsyncExitStack() as held:
                if isinstance(self.locks, SharedLocks):
                    try:
                        await held.enter_async_context(
                            self.locks.holding(_lock_key(thread), wait=False)
                        )
                    except TaskBusy as exc:  # only the lock's own wait: the run's errors pass
                        raise busy from exc
                yield
        finally:
            self._running.discard(thread)

    async def executing(self, thread: str) -> bool:
        """True when a server process is executing the run right now."""
        if thread in self._running:
            return True
        if not isinstance(self.locks, SharedLocks):
            return False  # one process (an in-memory database)
        return await self.locks.held(_lock_key(thread))

    async def aclose(self) -> None:
        """Stop executing runs (they stay resumable) before the storage closes."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- reading --------------------------------------------------------------------------

    async def _follow(self, entry: PlanEntry) -> AsyncIterator[dict[str, Any]]:
        run_id = entry.run_id
        events = self._events.get(entry.thread_id)
        if events is not None:
            async for event in events.follow():
                yield event
        else:
            seen: set[str] = set()
            while True:
                executing = await self.executing(entry.thread_id)
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
                            "diagnosis": truncate_middle(result.diagnosis, EVENT_TEXT_CHARS),
                        }
                if not executing:
                    break
                await asyncio.sleep(POLL_S)
        item = await self.store.aget(NAMESPACE, entry.thread_id)
        latest = PlanEntry.model_validate(item.value) if item else entry
        executing = await self.executing(entry.thread_id)
        report = paused(await self._report(latest), latest, executing=executing)
        end = {"event": "end", "runId": run_id, "status": report.status}
        if report.pending_reviews:
            end["pendingReviews"] = [r.step_id for r in report.pending_reviews]
        if latest.error:
            end["error"] = latest.error
        yield end

    async def _summary(self, entry: PlanEntry) -> PlanRunSummary:
        executing = await self.executing(entry.thread_id)
        report = paused(await self._report(entry), entry, executing=executing)
        steps = report.manifest.steps if report.manifest else report.steps
        done = sum(1 for r in report.steps.values() if r.status in FINISHED_STATUSES)
        return PlanRunSummary(
            run_id=entry.run_id,
            goal=report.goal or entry.goal,
            status=report.status,
            executing=executing,
            steps_total=len(steps),
            steps_done=done,
            pending_reviews=len(report.pending_reviews),
            cost_usd=total_usage(report.usage).cost_usd,
            created_at=entry.created_at,
            updated_at=entry.updated_at,
        )

    async def _report(self, entry: PlanEntry) -> PlanRunReport:
        try:
            return await self.runner.areport(entry.thread_id)
        except UnknownRunError:  # created, but stopped (or rejected) before its first checkpoint
            status = "rejected" if entry.halt_reason else "running"
            status = "cancelled" if entry.status == "cancelled" else status
            return PlanRunReport(
                run_id=entry.run_id, status=status, goal=entry.goal, halt_reason=entry.halt_reason
            )

    async def _entry(self, tenant: str, run_id: str) -> PlanEntry:
        item = await self.store.aget(NAMESPACE, scoped_id(tenant, run_id))
        entry = PlanEntry.model_validate(item.value) if item else None
        if entry is None or entry.tenant != tenant:  # unknown, or another tenant's: the same answer
            raise RunNotFound(f"unknown plan run {run_id}")
        return entry

    async def _save(self, entry: PlanEntry) -> None:
        await self.store.aput(NAMESPACE, entry.thread_id, entry.model_dump())

    async def _has_thread(self, thread: str) -> bool:
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        return await self.runner.checkpointer.aget_tuple(config) is not None

    def _run_request(self, body: PlanRunRequest) -> dict[str, Any]:
        """``{"manifest"?, "goal"?}`` for the graph; 422 / 413 for what cannot start (413: a
        manifest past a size or reading limit, located). Whether the manifest parses and can run
        is the plan node's call: a run rejected with located problems."""
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
        try:  # bounded: what is past a limit is refused here, the rest is the plan node's call
            load_manifest(manifest, origin="user", limits=self.manifest_limits)
        except ManifestError as exc:
            too_large = [p.message for p in exc.problems if p.rule == "too_large"]
            if too_large:
                raise ManifestTooLarge("; ".join(too_large)) from None
        return {"manifest": manifest, **({"goal": goal} if goal else {})}

    def _check_operator_settings(self, raw: Any) -> None:
        """422 for a manifest that asks for what this service does not allow (:meth:`refusals`)."""
        refused = self._refusals_of(raw)
        if refused:
            raise InvalidField("manifest", "; ".join(refused))


def operator_refusals(manifest: Manifest, plan_shell: PlanShell, pass_env: set[str]) -> list[str]:
    """What ``manifest`` asks for that the service's ``plan_shell`` setting does not allow, one
    located sentence each: processes under ``off``; under ``sandboxed`` the network or no sandbox;
    in any mode environment variables the operator does not pass (``VERILOOP_PASS_ENV``)."""
    setting = f"this service's plan_shell={plan_shell} (veriloop serve --plan-shell)"
    refused = []
    if plan_shell == "sandboxed" and manifest.sandbox == "off":
        refused.append(f"the manifest asks for sandbox: off, but {setting} sandboxes every step")
    for where, agent_name, agent in _all_agents(manifest):
        hidden = sorted(set(agent.env) - pass_env)
        if hidden:
            refused.append(
                f"{where}agent {agent_name!r} declares env {', '.join(hidden)}, which this service "
                "does not pass to steps (VERILOOP_PASS_ENV)"
            )
    for where, step in _all_steps(manifest):
        label = f"{where}step {step.id!r}"
        if plan_shell == "off":
            runs = [
                *([f"the shell command `{step.command}`"] if step.executor == "shell" else []),
                *[f"the command check `{c.command}`" for c in step.checks if c.kind == "command"],
                *([f"the test command `{step.test_command}`"] if step.test_command else []),
                *(["a test run (requires_testing)"] if step.requires_testing else []),
            ]
            if runs:
                refused.append(
                    f"{label} runs {', '.join(runs)}, but {setting} runs no processes for plans"
                )
        if plan_shell == "sandboxed" and step.network:
            refused.append(f"{label} declares network: true, but {setting} gives steps no network")
        hidden = sorted(set(step.env) - pass_env)
        if hidden:
            refused.append(
                f"{label} declares env {', '.join(hidden)}, which this service does not pass to "
                "steps (VERILOOP_PASS_ENV)"
            )
    return refused


def _all_steps(manifest: Manifest, where: str = "") -> Iterator[tuple[str, ManifestStep]]:
    for step in manifest.steps:
        yield where, step
        if step.plan is not None:
            yield from _all_steps(step.plan, f"{where}plan step {step.id!r}: ")


def _all_agents(manifest: Manifest, where: str = "") -> Iterator[tuple[str, str, AgentSpec]]:
    for name, agent in manifest.agents.items():
        yield where, name, agent
    for step in manifest.steps:
        if step.plan is not None:
            yield from _all_agents(step.plan, f"{where}plan step {step.id!r}: ")


def paused(report: PlanRunReport, entry: PlanEntry, *, executing: bool) -> PlanRunReport:
    """``report`` as the service shows it: a run still ``running`` in its checkpoints that nothing
    executes stopped early (its entry's error says why), so it is ``paused`` until resumed."""
    if report.status != "running" or executing:
        return report
    return report.model_copy(update={"status": "paused"})


def _searchable(entry: Mapping[str, Any]) -> str:
    """A run entry's id, goal and manifest (as sent) as one case-folded text."""
    manifest = entry.get("request", {}).get("manifest")
    text = manifest if isinstance(manifest, str) else json.dumps(manifest, default=str)
    return f"{entry.get('run_id', '')} {entry.get('goal', '')} {text}".casefold()


def _lock_key(thread: str) -> str:
    return f"plan:{thread}"


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


@router.get("", response_model=PlanRunList, response_model_exclude_none=True, responses=ERRORS)
async def list_plan_runs(
    tenant: Tenant, request: Request, limit: Limit = 20, offset: Offset = 0
) -> PlanRunList:
    """The tenant's plan runs, most recently started or ended first: status, goal, steps done of
    total, pending reviews, cost. Page with `offset` = the answer's `nextOffset`."""
    return await plan_service(request).list(tenant, limit=limit, offset=offset)


@router.post(
    "/validate",
    response_model=ManifestCheck,
    response_model_exclude_none=True,
    responses={
        **ERRORS,
        413: {"model": ErrorBody, "description": "The manifest (or body) is over the size limit."},
    },
)
async def validate_manifest(
    body: Annotated[PlanRunRequest, Body()], tenant: Tenant, request: Request
) -> ManifestCheck:
    """Parse a manifest and run the static critic, without starting anything: every parse error
    and finding, located (`steps[1] (id 'b'): ...`), and whether POST /api/plans would run it."""
    return await plan_service(request).check(body)


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


@router.post(
    "/{run_id}/cancel",
    response_model=PlanRunStarted,
    response_model_exclude_none=True,
    responses={
        **ERRORS,
        409: {"model": ErrorBody, "description": "The run already ended (its status is named)."},
    },
)
async def cancel_plan_run(run_id: RunId, tenant: Tenant, request: Request) -> PlanRunStarted:
    """Cancel the run: its executing steps stop (their processes are killed), and the run and its
    unfinished steps are recorded `cancelled`. Cancelling a cancelled run answers the same again."""
    return await plan_service(request).cancel(tenant, run_id)


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
