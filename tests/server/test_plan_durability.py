"""kill -9 of a service process in the middle of a plan run, restart, resume: finished steps and
finished attempts are not run again (SQLite and PostgreSQL); two processes never run one run."""

from __future__ import annotations

import asyncio
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from service_testkit import KEYS, plan_events, python_step, wait_for_run, wait_until

from veriloop.llm.scripted import Delay, ScriptedRequest, ToolCalls
from veriloop.server.tenants import scoped_id

HERE = Path(__file__).parent


def database(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    # The schema fixture comes before the servers, so it is dropped after they stop.
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'plans.sqlite'}"
    return request.getfixturevalue("pg_url")


def servers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """``process_servers`` whose processes load tests/server/plan_tools.py as their tools."""
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    monkeypatch.setenv("VERILOOP_TOOLS", "plan_tools:TOOLS")
    monkeypatch.setenv("VERILOOP_WORKSPACE", str(workspace))
    # The steps mark a file outside their workspace: only an unsandboxed python step can.
    monkeypatch.setenv("VERILOOP_PLAN_SHELL", "host")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    )
    return request.getfixturevalue("process_servers")  # its env is read now


def counts(markers: Path) -> Counter:
    return Counter(markers.read_text().splitlines()) if markers.exists() else Counter()


def pending_writes(database_url: str, thread_id: str) -> list[tuple[str, str, Any]]:
    """Writes of finished tasks saved on the run's latest top-level checkpoint (not yet applied)."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async def read() -> list[tuple[str, str, Any]]:
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        if database_url.startswith("postgresql"):
            async with AsyncPostgresSaver.from_conn_string(database_url) as saver:
                found = await saver.aget_tuple(config)
        else:
            path = database_url.removeprefix("sqlite:///")
            async with AsyncSqliteSaver.from_conn_string(path) as saver:
                found = await saver.aget_tuple(config)
        return list(found.pending_writes or []) if found else []

    return asyncio.run(read())


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_kill_9_mid_run_then_resume_does_not_rerun_finished_steps(
    backend, tmp_path, request, monkeypatch
):
    database_url = database(backend, tmp_path, request)
    start = servers(request, monkeypatch, tmp_path)
    markers = tmp_path / "markers.txt"
    # Level 0: a, b. Level 1: fast (finishes) beside slow (hangs on its first run). Level 2: last.
    # The markers are outside the workspace: the steps change no file there (writes: []), so
    # they run side by side.
    manifest = {
        "goal": "survive kill -9",
        "steps": [
            python_step("a", markers, writes=[]),
            python_step("b", markers, writes=[]),
            python_step("fast", markers, sleep=0.1, depends_on=["a"], writes=[]),
            python_step("slow", markers, first_sleep=120, sleep=0.1, depends_on=["b"], writes=[]),
            python_step("last", markers, depends_on=["fast", "slow"], writes=[]),
        ],
    }
    server = start(database_url)
    client = server.client()
    response = client.post("/api/plans", json={"manifest": manifest, "concurrency": 4})
    assert response.status_code == 202, response.text
    run_id = response.json()["runId"]

    # Killed while slow sleeps, once fast's result is saved beside it (its batch is not over).
    def fast_saved() -> bool:
        return any(
            channel == "step_results" and "fast" in value
            for _, channel, value in pending_writes(database_url, scoped_id(KEYS["key-a"], run_id))
        )

    wait_until(lambda: counts(markers)["slow"] == 1, "slow to start")
    wait_until(fast_saved, "fast's result to be saved")
    server.kill9()
    assert counts(markers) == Counter({"a": 1, "b": 1, "fast": 1, "slow": 1})

    restarted = start(database_url)
    client = restarted.client()
    stopped = client.get(f"/api/plans/{run_id}").json()
    assert stopped["status"] == "paused" and stopped["executing"] is False
    assert "resume continues it" in stopped["error"]  # nothing executes it: said plainly
    # fast's saved result shows (its batch is not over); slow has no result yet.
    assert {k: s["status"] for k, s in stopped["steps"].items()} == {
        "a": "completed",
        "b": "completed",
        "fast": "completed",
        "slow": "running",  # killed mid-step: still in flight, resumed below
    }
    resumed = client.post(f"/api/plans/{run_id}/resume")
    assert resumed.status_code == 202, resumed.text
    report = wait_for_run(client, run_id)
    assert report["status"] == "completed", report
    assert all(step["status"] == "completed" for step in report["steps"].values())
    assert report["steps"]["last"]["output"]["depends"] == ["fast", "slow"]
    # Finished steps ran exactly once; only the step that was interrupted ran again.
    assert counts(markers) == Counter({"a": 1, "b": 1, "fast": 1, "slow": 2, "last": 1})
    assert [a["runNumber"] for a in report["steps"]["slow"]["attempts"]] == [1]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_kill_9_between_attempts_resumes_at_the_second_attempt(
    backend, tmp_path, request, monkeypatch
):
    database_url = database(backend, tmp_path, request)
    scripted_model = request.getfixturevalue("scripted_model")
    start = servers(request, monkeypatch, tmp_path)
    second: list[ScriptedRequest] = []
    lock = threading.Lock()

    def answer(req: ScriptedRequest) -> Any:
        """Attempt 1 answers wrong; the first attempt-2 call hangs (the process dies in it)."""
        if "Attempt: 2" not in req.text:
            return mark_step("wrong")
        with lock:
            second.append(req)
            first_time = len(second) == 1
        return Delay(120, mark_step("right")) if first_time else mark_step("right")

    scripted_model.on("execution", answer)
    manifest = {
        "agents": {"writer": {"prompt": "You answer.", "tools": []}},
        "steps": [
            {
                "id": "answer",
                "agent": "writer",
                "input": "Say right.",
                "max_retries": 2,
                "checks": [{"kind": "predicate", "expr": 'result == "right"'}],
            }
        ],
    }
    server = start(database_url)
    client = server.client()
    run_id = client.post("/api/plans", json={"manifest": manifest}).json()["runId"]
    wait_until(lambda: len(second) == 1, "attempt 2's model call")
    server.kill9()

    restarted = start(database_url)
    client = restarted.client()
    assert client.post(f"/api/plans/{run_id}/resume").status_code == 202
    report = wait_for_run(client, run_id)
    step = report["steps"]["answer"]
    assert report["status"] == "completed" and step["verificationStatus"] == "verified"
    assert [a["runNumber"] for a in step["attempts"]] == [1, 2]
    assert [a["passed"] for a in step["attempts"]] == [False, True]
    executions = [r for r in scripted_model.requests if r.purpose == "execution"]
    # Attempt 1 ran once (before the kill), attempt 2 twice (killed, then after the restart).
    assert sum("Attempt: 2" not in r.text for r in executions) == 1
    assert len(second) == 2 and len(executions) == 3
    assert step["usage"]["execution"]["calls"] == 2  # the killed call never answered


def test_two_processes_on_postgresql_never_run_one_run_twice(tmp_path, request, monkeypatch):
    database_url = request.getfixturevalue("pg_url")
    start = servers(request, monkeypatch, tmp_path)
    markers = tmp_path / "markers.txt"
    one, two = start(database_url, count=2)
    first, second = one.client(), two.client()
    manifest = {"steps": [python_step("slow", markers, sleep=5)]}
    run_id = first.post("/api/plans", json={"manifest": manifest}).json()["runId"]

    # The other process sees the run executing (the advisory lock) and refuses to run it too.
    seen = second.get(f"/api/plans/{run_id}").json()
    assert seen["executing"] is True and seen["status"] == "running"
    busy = second.post(f"/api/plans/{run_id}/resume")
    assert busy.status_code == 409, busy.text
    review = second.post(
        f"/api/plans/{run_id}/reviews", json={"decisions": {"slow": {"approved": True}}}
    )
    assert review.status_code == 409

    # Its event stream follows the run from the checkpoints until it ends.
    events = plan_events(second, run_id)
    assert [(e["event"], e.get("stepId"), e.get("status")) for e in events] == [
        ("step_finished", "slow", "completed"),
        ("end", None, "completed"),
    ]
    assert wait_for_run(second, run_id)["status"] == "completed"
    assert counts(markers) == Counter({"slow": 1})


def mark_step(output: str) -> ToolCalls:
    return ToolCalls([("mark_step", {"notes": f"[SUCCESS]: said {output}", "output": output})])
