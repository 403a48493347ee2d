"""Fencing: a step commits only if it still owns its task, whatever happened to its lock.

Two services on one database stand for two processes after the task's lock died: each holds
only its own in-process lock, so both run the same step from the same checkpoint at once. The
checkpointer's fence admits one of them; the other answers 503 and its resend gets the answer.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from plan_tools import TOOLS
from service_testkit import goal, observation, python_step

from veriloop.context import Context, PlanContext
from veriloop.llm.scripted import Delay
from veriloop.schemas.api import InteractRequest, PlanRunRequest
from veriloop.schemas.outputs import ActionChoice, SemanticVerdict
from veriloop.server.app import compile_graph
from veriloop.server.index import TaskIndex
from veriloop.server.locks import LocalLocks, LockLost, PostgresLocks
from veriloop.server.persistence import open_persistence
from veriloop.server.plans import PlanService
from veriloop.server.service import StepFenced, StepTimeout, TaskService
from veriloop.server.settings import Settings
from veriloop.server.tenants import scoped_id

pytestmark = pytest.mark.anyio
TENANT = "tenant_a"
SLOW_VERDICT = Delay(
    0.5,
    SemanticVerdict(action_succeeded=True, task_completed=False, confidence=0.9, reason="ok"),
)


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fence.sqlite'}"
    return request.getfixturevalue("pg_url")


@asynccontextmanager
async def services(
    database_url: str, count: int, step_deadline_s: float = 60
) -> AsyncIterator[list[TaskService]]:
    """``count`` services on one database, each with its own storage and locks (as processes)."""
    async with AsyncExitStack() as stack:
        made = []
        for _ in range(count):
            p = await stack.enter_async_context(
                open_persistence(Settings(database_url=database_url))
            )
            made.append(
                TaskService(
                    compile_graph(p.checkpointer),
                    TaskIndex(p.store),
                    LocalLocks(60),  # only in-process: as if the cross-process lock had died
                    max_dom_bytes=5_000_000,
                    step_deadline_s=step_deadline_s,
                    context=partial(Context, page_processes=0),
                )
            )
        yield made


@asynccontextmanager
async def plan_services(database_url: str, workspace: str) -> AsyncIterator[list[PlanService]]:
    """Two plan services on one database, each with only its in-process lock (as above)."""
    async with AsyncExitStack() as stack:
        made = []
        for _ in range(2):
            p = await stack.enter_async_context(
                open_persistence(Settings(database_url=database_url))
            )
            service = PlanService(
                p.checkpointer,
                p.store,
                LocalLocks(60),
                # Fencing, not confinement, is under test: the steps mark a shared file.
                context=PlanContext(tools=TOOLS, workspace=workspace, sandbox="off"),
                max_manifest_bytes=1_000_000,
                manifest_limits=Settings().manifest_limits,
            )
            stack.push_async_callback(service.aclose)
            made.append(service)
        yield made


async def _until_marked(markers: Path, name: str, timeout_s: float = 60) -> None:
    """Until a step marked ``name`` (fails, never hangs, when it never does)."""
    deadline = time.monotonic() + timeout_s
    while name not in (markers.read_text() if markers.exists() else ""):
        assert time.monotonic() < deadline, f"{name} never ran"
        await asyncio.sleep(0.02)


def siblings(database_url: str) -> int:
    """Checkpoints sharing a parent with another checkpoint of their thread and namespace."""
    sql = (
        "SELECT count(*) FROM (SELECT 1 FROM checkpoints WHERE parent_checkpoint_id IS NOT NULL "
        "GROUP BY thread_id, checkpoint_ns, parent_checkpoint_id HAVING count(*) > 1) AS s"
    )
    if database_url.startswith("sqlite"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as conn:
            return conn.execute(sql).fetchone()[0]
    with psycopg.connect(database_url) as conn:
        return conn.execute(sql).fetchone()[0]


def request(body: dict) -> InteractRequest:
    return InteractRequest.model_validate(body)


async def answer(service: TaskService, body: dict):
    """The answer, or the exception it raised."""
    try:
        return await service.interact(TENANT, request(body))
    except Exception as exc:  # noqa: BLE001 - the test looks at which one
        return exc


async def test_one_step_run_at_once_by_two_processes_commits_once(
    database_url, scripted_model, playbook
):
    async with services(database_url, 2) as (a, b):
        first = await a.interact(TENANT, request(observation(7, 0, query=goal(7, 5))))
        task_id = first.task_id
        scripted_model.script("verification", SLOW_VERDICT)
        scripted_model.script("verification", SLOW_VERDICT)
        body = observation(7, 1, taskId=task_id, stepIndex=0, requestId="step-1")

        answers = await asyncio.gather(answer(a, body), answer(b, body))

        fenced = [x for x in answers if isinstance(x, Exception)]
        assert len(fenced) == 1 and isinstance(fenced[0], StepFenced), answers
        (won,) = [x for x in answers if not isinstance(x, Exception)]
        assert won.step_index == 1
        # The refused request, sent again to either process, gets the committed answer.
        assert await a.interact(TENANT, request(body)) == won
        assert await b.interact(TENANT, request(body)) == won
        assert siblings(database_url) == 0
        nxt = await b.interact(
            TENANT, request(observation(7, 2, taskId=task_id, stepIndex=1, requestId="step-2"))
        )
        assert nxt.step_index == 2
        detail = await a.task_detail(TENANT, task_id)
        assert [x.step_index for x in detail.actions] == [0, 1, 2]
        assert [v.step_index for v in detail.verifications] == [0, 1]


async def saved_but_never_recorded(service: TaskService, body: dict, monkeypatch) -> None:
    """Send ``body`` to a process that dies between saving the step and recording it."""
    record = service.index.record

    async def die_before_recording(entry, key):
        raise asyncio.CancelledError  # the process stopped between the two writes

    monkeypatch.setattr(service.index, "record", die_before_recording)
    with pytest.raises(asyncio.CancelledError):
        await service.interact(TENANT, request(body))
    monkeypatch.setattr(service.index, "record", record)


async def test_a_step_saved_but_never_recorded_is_adopted(
    database_url, scripted_model, playbook, monkeypatch
):
    async with services(database_url, 1) as (service,):
        task_id = (
            await service.interact(TENANT, request(observation(8, 0, query=goal(8, 5))))
        ).task_id
        body = observation(8, 1, taskId=task_id, requestId="step-1")
        await saved_but_never_recorded(service, body, monkeypatch)
        verdicts = scripted_model.calls("verification")

        again = await service.interact(TENANT, request(body))

        assert again.step_index == 1
        assert scripted_model.calls("verification") == verdicts, "adopted, not run again"
        detail = await service.task_detail(TENANT, task_id)
        assert [x.step_index for x in detail.actions] == [0, 1]
        assert siblings(database_url) == 0


def checkpoints_of_started_tasks(database_url: str) -> tuple[int, int]:
    """Threads with a first checkpoint (the tasks the service started), and the checkpoints
    saved on those (their steps, finished or not)."""
    sql = (
        "SELECT count(*) FILTER (WHERE parent_checkpoint_id IS NULL), "
        "count(*) FILTER (WHERE parent_checkpoint_id IS NOT NULL) "
        "FROM checkpoints WHERE checkpoint_ns = ''"
    )
    if database_url.startswith("sqlite"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as conn:
            return conn.execute(sql).fetchone()
    with psycopg.connect(database_url) as conn:
        return conn.execute(sql).fetchone()


def tasks_started(database_url: str) -> int:
    return checkpoints_of_started_tasks(database_url)[0]


async def test_a_new_task_started_at_once_by_two_processes_is_one_task(
    database_url, scripted_model, playbook
):
    async with services(database_url, 2) as (a, b):
        body = observation(10, 0, query=goal(10, 5), requestId="start-1")

        answers = await asyncio.gather(answer(a, body), answer(b, body))

        fenced = [x for x in answers if isinstance(x, Exception)]
        assert len(fenced) == 1 and isinstance(fenced[0], StepFenced), answers
        (won,) = [x for x in answers if not isinstance(x, Exception)]
        # Sent again to either process, the refused start gets the task that was started.
        assert await a.interact(TENANT, request(body)) == won
        assert await b.interact(TENANT, request(body)) == won
        entries, _more = await a.index.page(TENANT, limit=10, offset=0)
        assert [entry.task_id for entry in entries] == [won.task_id]
        assert tasks_started(database_url) == 1
        # Another tenant's identical request is another task.
        other = await b.interact("tenant_b", request(body))
        assert other.task_id != won.task_id


async def test_a_start_saved_but_never_recorded_is_adopted(
    database_url, scripted_model, playbook, monkeypatch
):
    async with services(database_url, 1) as (service,):
        body = observation(11, 0, query=goal(11, 5), requestId="start-1")
        await saved_but_never_recorded(service, body, monkeypatch)
        calls = scripted_model.calls()

        again = await service.interact(TENANT, request(body))

        assert scripted_model.calls() == calls, "adopted, not run again"
        entries, _more = await service.index.page(TENANT, limit=10, offset=0)
        assert [entry.task_id for entry in entries] == [again.task_id]
        assert again.step_index == 0 and again.action == "click(11)"
        assert tasks_started(database_url) == 1 and siblings(database_url) == 0
        assert await service.interact(TENANT, request(body)) == again


async def test_a_start_that_failed_starts_again_as_the_same_task(
    database_url, scripted_model, playbook
):
    async with services(database_url, 1, step_deadline_s=2) as (service,):
        scripted_model.script("action", Delay(4, ActionChoice(thought="slow", action="click(12)")))
        body = observation(12, 0, query=goal(12, 5), requestId="start-1")
        assert isinstance(await answer(service, body), StepTimeout)
        assert await service.index.page(TENANT, limit=10, offset=0) == ([], False)
        # What the failed run saved is gone; the empty first checkpoint it ran from stays.
        assert checkpoints_of_started_tasks(database_url) == (1, 0)

        started = await service.interact(TENANT, request(body))

        assert started.step_index == 0 and started.action == "click(12)"
        assert checkpoints_of_started_tasks(database_url) == (1, 1)
        assert siblings(database_url) == 0
        assert (await service.interact(TENANT, request(body))) == started


async def test_a_failed_copy_of_a_start_cleaning_up_late_leaves_the_task_whole(
    database_url, scripted_model, playbook
):
    """One copy of a start fails and saves its unfinished run while the other copy, on another
    process whose lock died, is about to run; the failed copy discards its leftovers last. The
    other copy's run, pinned to the task's first checkpoint, keeps its history in its own
    checkpoint: later steps count on from it (unpinned, it resumed the leftovers and kept its
    history as writes on them, discarded with them: the next step answered stepIndex 0 again)."""
    async with services(database_url, 2, step_deadline_s=2) as (a, b):
        body = observation(13, 0, query=goal(13, 5), requestId="start-1")
        forget_late = []

        async def not_yet(*args):
            forget_late.append(args)

        run = b._invoke

        async def failed_copy_first(graph_input, config):
            scripted_model.script(
                "action", Delay(4, ActionChoice(thought="slow", action="click(13)"))
            )
            a._forget_failed_run = not_yet
            assert isinstance(await answer(a, body), StepTimeout)
            del a._forget_failed_run
            return await run(graph_input, config)

        b._invoke = failed_copy_first
        started = await answer(b, body)
        del b._invoke
        for args in forget_late:
            await a._forget_failed_run(*args)
        if isinstance(started, StepFenced):  # the leftovers held the fence: sent again
            started = await answer(b, body)
        assert not isinstance(started, Exception), repr(started)

        assert started.step_index == 0 and started.action == "click(13)"
        assert await a.interact(TENANT, request(body)) == started
        for n in (1, 2):
            step = observation(13, n, taskId=started.task_id, stepIndex=n - 1, requestId=f"s{n}")
            assert (await a.interact(TENANT, request(step))).step_index == n
        detail = await b.task_detail(TENANT, started.task_id)
        assert [x.step_index for x in detail.actions] == [0, 1, 2]
        assert tasks_started(database_url) == 1 and siblings(database_url) == 0


async def test_a_failed_run_leaves_nothing_behind(database_url, scripted_model, playbook):
    async with services(database_url, 1, step_deadline_s=2) as (service,):
        task_id = (
            await service.interact(TENANT, request(observation(9, 0, query=goal(9, 5))))
        ).task_id
        scripted_model.script("verification", Delay(4, SLOW_VERDICT.answer))
        body = observation(9, 1, taskId=task_id, requestId="step-1")
        assert isinstance(await answer(service, body), StepTimeout)
        entry = await service.index.get(TENANT, task_id)
        assert await service.checkpoints.achildren(task_id, entry.checkpoint_id) == []
        assert (await service.interact(TENANT, request(body))).step_index == 1
        assert siblings(database_url) == 0


async def test_a_dead_lock_session_cancels_the_step_holding_it(postgres_ready):
    locks = PostgresLocks(postgres_ready, 5, watch_s=0.1)
    entered = asyncio.Event()

    async def step() -> None:
        async with locks.hold(f"task:{uuid.uuid4().hex}"):
            entered.set()
            await asyncio.sleep(30)

    try:
        running = asyncio.create_task(step())
        await entered.wait()
        with psycopg.connect(postgres_ready, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (locks._conn.info.backend_pid,))
        with pytest.raises(LockLost):
            await asyncio.wait_for(running, 5)
    finally:
        await locks.aclose()


async def test_two_executions_of_one_plan_run_record_each_batch_once(database_url, tmp_path):
    markers = tmp_path / "markers.txt"
    manifest = {
        "goal": "one execution's results",
        "steps": [
            python_step("a", markers),
            python_step("slow", markers, sleep=1.0, depends_on=["a"]),
            python_step("last", markers, depends_on=["slow"]),
        ],
    }
    async with plan_services(database_url, str(tmp_path)) as (a, b):
        run_id = (await a.start(TENANT, PlanRunRequest(manifest=manifest))).run_id
        await _until_marked(markers, "slow")
        await b.resume(TENANT, run_id)  # a's lock died: b takes the run from the same checkpoint
        thread = scoped_id(TENANT, run_id)  # the run's thread: run ids are per tenant
        while await a.executing(thread) or await b.executing(thread):
            await asyncio.sleep(0.05)
        report = await b.detail(TENANT, run_id)

    assert report.status == "completed", report
    assert report.error is None
    assert [len(report.steps[step].attempts) for step in ("a", "slow", "last")] == [1, 1, 1]
    # Both executions ran the slow step (its side effects are the tool's); one recorded it.
    assert markers.read_text().splitlines().count("last") == 1
    assert siblings(database_url) == 0


async def test_a_join_taken_by_a_lane_runs_once_when_a_second_execution_resumes_the_batch(
    database_url, tmp_path
):
    # a and slow are lanes of one batch; join (needing both) is in its window: the lane that
    # completes slow takes it in a's process. b has no window (it did not dispatch the batch):
    # its copy of slow's lane ends instead. Both lanes' checkpoints are fenced, so only one of
    # the two goes on, and join runs once, in this batch or the next.
    markers = tmp_path / "markers.txt"
    manifest = {
        "goal": "one execution's window",
        "steps": [
            python_step("a", markers),
            python_step("slow", markers, sleep=1.0),
            python_step("join", markers, depends_on=["a", "slow"]),
        ],
    }
    async with plan_services(database_url, str(tmp_path)) as (a, b):
        run_id = (await a.start(TENANT, PlanRunRequest(manifest=manifest))).run_id
        await _until_marked(markers, "slow")
        await b.resume(TENANT, run_id)  # a's lock died: b takes the run from the same checkpoint
        thread = scoped_id(TENANT, run_id)
        while await a.executing(thread) or await b.executing(thread):
            await asyncio.sleep(0.05)
        report = await b.detail(TENANT, run_id)

    assert report.status == "completed", report
    assert [len(report.steps[step].attempts) for step in ("a", "slow", "join")] == [1, 1, 1]
    assert markers.read_text().splitlines().count("join") == 1
    assert report.steps["join"].output is not None
    assert siblings(database_url) == 0


async def test_a_checkpoint_gone_since_the_listing_is_neither_adopted_nor_an_error(
    database_url, scripted_model, playbook, monkeypatch
):
    """A failed run whose lock died discards its own checkpoint outside the lock, so one listed
    as saved on the pinned checkpoint may be gone when it is read."""
    async with services(database_url, 1) as (service,):
        task_id = (
            await service.interact(TENANT, request(observation(6, 0, query=goal(6, 5))))
        ).task_id
        entry = await service.index.get(TENANT, task_id)
        listed = service.checkpoints.achildren

        async def with_a_vanished_one(thread_id, parent_id):
            return ["1f0-vanished", *await listed(thread_id, parent_id)]

        monkeypatch.setattr(service.checkpoints, "achildren", with_a_vanished_one)
        assert await service._settle(entry) == entry
        reply = await service.interact(
            TENANT, request(observation(6, 1, taskId=task_id, stepIndex=0))
        )
        assert reply.step_index == 1


async def test_a_step_reads_its_checkpoint_once(
    database_url, scripted_model, playbook, monkeypatch
):
    """LangGraph reads a pinned run's checkpoint, then the thread's latest to compare their ids:
    the service's run starts at the latest, so the second read is the first one given back."""
    async with services(database_url, 1) as (service,):
        task_id = (
            await service.interact(TENANT, request(observation(6, 0, query=goal(6, 5))))
        ).task_id
        entry = await service.index.get(TENANT, task_id)
        library_saver = type(service.checkpoints).__mro__[2]
        read = library_saver.aget_tuple
        reads = []

        async def counted(self, config):
            reads.append(dict(config["configurable"]))
            return await read(self, config)

        monkeypatch.setattr(library_saver, "aget_tuple", counted)
        reply = await service.interact(
            TENANT, request(observation(6, 1, taskId=task_id, stepIndex=0))
        )
        assert reply.step_index == 1
        assert [r.get("checkpoint_id") for r in reads if r["thread_id"] == task_id] == [
            entry.checkpoint_id
        ]


async def test_the_latest_checkpoint_of_a_run_at_its_head_is_read_again_once_one_is_saved(
    database_url,
):
    async with open_persistence(Settings(database_url=database_url)) as storage:
        saver = storage.checkpointer
        thread = uuid.uuid4().hex
        root = await saver.aroot(thread)
        latest = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        pinned = {"configurable": {**latest["configurable"], "checkpoint_id": root}}
        with saver.at_head(thread, root):
            loaded = await saver.aget_tuple(pinned)
            assert await saver.aget_tuple(latest) is loaded
            # Given back once: a second ask reads the database, which answers the same.
            assert await saver.aget_tuple(latest) == loaded
            await saver.aget_tuple(pinned)
            child = empty_checkpoint()
            await saver.aput(pinned, child, {"step": 0}, {})
            assert (await saver.aget_tuple(latest)).checkpoint["id"] == child["id"]
