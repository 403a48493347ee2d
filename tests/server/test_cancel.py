"""Cancel, end to end over HTTP (issue 45): a cancelled task takes no more steps and is never
offered again; a cancelled plan run stops where it executes (its processes killed, in this process
or another one on PostgreSQL) and records ``cancelled`` on the run and its unfinished steps.
Real servers on loopback, real SQLite and PostgreSQL savers."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest
from service_testkit import drive, goal, observation, python_step, wait_for_run, wait_until
from typer.testing import CliRunner, Result

from veriloop.cli import app

HERE = Path(__file__).parent


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.fixture
def plan_tools(monkeypatch, tmp_path, scripted_model) -> Path:
    """The service's workspace, with tests/server/plan_tools.py as its tools."""
    root = tmp_path / "workspace"
    root.mkdir()
    monkeypatch.setenv("VERILOOP_TOOLS", "plan_tools:TOOLS")
    monkeypatch.setenv("VERILOOP_WORKSPACE", str(root))
    # The steps mark a file outside their workspace: only an unsandboxed python step can.
    monkeypatch.setenv("VERILOOP_PLAN_SHELL", "host")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    )
    return root


@pytest.fixture
def marking_settings(sqlite_settings):
    """``sqlite_settings`` whose python steps can mark a file outside their workspace."""
    return dataclasses.replace(sqlite_settings, plan_shell="host")


# -- browser tasks ----------------------------------------------------------------------------


def test_a_cancelled_task_takes_no_more_steps_and_is_never_offered_again(
    playbook, thread_server, sqlite_settings
) -> None:
    client = thread_server(sqlite_settings).client()
    first = client.interact(observation(1, 0, query=goal(1, 3), sessionId="s1")).json()
    task_id = first["taskId"]
    assert first["status"] == "executing"
    assert client.get("/api/session/s1/task/active").json()["taskId"] == task_id

    cancelled = client.post(f"/api/tasks/{task_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    again = client.post(f"/api/tasks/{task_id}/cancel")
    assert (again.status_code, again.json()) == (200, cancelled.json())

    step = client.interact(observation(1, 1, taskId=task_id, stepIndex=first["stepIndex"]))
    assert step.status_code == 409, step.text
    assert step.json()["status"] == "cancelled"
    assert "cancelled" in step.json()["detail"] and "new task" in step.json()["detail"]
    assert client.get("/api/session/s1/task/active").status_code == 404
    assert client.detail(task_id)["status"] == "cancelled"
    listed = client.get("/api/tasks").json()["items"]
    assert [t["status"] for t in listed if t["taskId"] == task_id] == ["cancelled"]


def test_task_cancel_is_per_tenant_and_refuses_an_ended_task(
    playbook, thread_server, sqlite_settings
) -> None:
    server = thread_server(sqlite_settings)
    client = server.client()
    task_id, answers = drive(client, 2, 1)
    assert answers[-1]["status"] == "completed"

    ended = client.post(f"/api/tasks/{task_id}/cancel")
    assert ended.status_code == 409, ended.text
    assert ended.json()["status"] == "completed" and "already completed" in ended.json()["detail"]
    assert client.detail(task_id)["status"] == "completed"

    foreign = server.client("key-b").post(f"/api/tasks/{task_id}/cancel")
    unknown = client.post("/api/tasks/no-such-task/cancel")
    assert foreign.status_code == unknown.status_code == 404
    assert server.client("key-c").post(f"/api/tasks/{task_id}/cancel").status_code == 401


# -- plan runs --------------------------------------------------------------------------------


def test_a_cancelled_plan_run_stops_and_records_its_unfinished_steps(
    plan_tools, tmp_path, thread_server, marking_settings
) -> None:
    client = thread_server(marking_settings).client()
    markers = tmp_path / "markers.txt"
    manifest = {
        "steps": [
            python_step("quick", markers),
            python_step("slow", markers, sleep=120, depends_on=["quick"]),
            python_step("after", markers, depends_on=["slow"]),
        ]
    }
    started = client.post("/api/plans", json={"manifest": manifest, "runId": "c1"})
    assert started.status_code == 202, started.text
    wait_until(lambda: "slow" in markers.read_text() if markers.exists() else False, "slow")

    began = time.monotonic()
    cancelled = client.post("/api/plans/c1/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json() == {"runId": "c1", "status": "cancelled"}
    assert time.monotonic() - began < 10  # not the step's 120 s

    report = wait_for_run(client, "c1")
    assert report["status"] == "cancelled" and not report["executing"]
    statuses = {step_id: step["status"] for step_id, step in report["steps"].items()}
    assert statuses == {"quick": "completed", "slow": "cancelled", "after": "cancelled"}
    assert markers.read_text().splitlines() == ["quick", "slow"]  # "after" never ran
    listed = client.get("/api/plans").json()["items"]
    assert [r["status"] for r in listed if r["runId"] == "c1"] == ["cancelled"]

    again = client.post("/api/plans/c1/cancel")
    assert (again.status_code, again.json()) == (200, cancelled.json())
    resumed = client.post("/api/plans/c1/resume")
    assert resumed.status_code == 409 and "cancelled" in resumed.json()["detail"]


def test_plan_cancel_is_per_tenant_and_refuses_an_ended_run(
    plan_tools, tmp_path, thread_server, marking_settings
) -> None:
    server = thread_server(marking_settings)
    client = server.client()
    manifest = {"steps": [python_step("only", tmp_path / "m.txt")]}
    client.post("/api/plans", json={"manifest": manifest, "runId": "done"})
    assert wait_for_run(client, "done")["status"] == "completed"

    ended = client.post("/api/plans/done/cancel")
    assert ended.status_code == 409, ended.text
    assert ended.json()["status"] == "completed" and "already completed" in ended.json()["detail"]
    foreign = server.client("key-b").post("/api/plans/done/cancel")
    unknown = client.post("/api/plans/nope/cancel")
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json() == {"detail": "unknown plan run done"}


def test_a_run_waiting_for_a_review_can_be_cancelled(
    plan_tools, tmp_path, thread_server, sqlite_settings
) -> None:
    client = thread_server(sqlite_settings).client()
    manifest = {
        "steps": [
            {"id": "approve", "type": "human_review", "input": "ok?"},
            python_step("after", tmp_path / "m.txt", depends_on=["approve"]),
        ]
    }
    client.post("/api/plans", json={"manifest": manifest, "runId": "rv"})
    assert wait_for_run(client, "rv")["status"] == "awaiting_review"
    assert client.post("/api/plans/rv/cancel").status_code == 200
    report = client.get("/api/plans/rv").json()
    assert report["status"] == "cancelled" and report["pendingReviews"] == []
    assert {s: r["status"] for s, r in report["steps"].items()} == {
        "approve": "cancelled",
        "after": "cancelled",
    }


def test_cancel_kills_the_process_tree_of_a_running_shell_step(
    plan_tools, tmp_path, thread_server, sqlite_settings
) -> None:
    client = thread_server(dataclasses.replace(sqlite_settings, plan_shell="host")).client()
    pids = tmp_path / "pids"
    # The shell and a grandchild in the background: the whole tree must go.
    command = f"sh -c 'sleep 300 & echo $! >> {pids}; wait' & echo $$ >> {pids}; wait"
    manifest = {"steps": [{"id": "hang", "command": command, "timeout_s": 600}]}
    assert client.post("/api/plans", json={"manifest": manifest, "runId": "sh"}).status_code == 202
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2, "the processes")
    started = [int(pid) for pid in pids.read_text().split()]
    assert all(alive(pid) for pid in started)

    assert client.post("/api/plans/sh/cancel").status_code == 200
    wait_until(lambda: not any(alive(pid) for pid in started), "the processes to die", 10)
    assert wait_for_run(client, "sh")["steps"]["hang"]["status"] == "cancelled"


def test_a_run_executing_in_another_process_is_cancelled_through_postgresql(
    plan_tools, tmp_path, request
) -> None:
    database_url = request.getfixturevalue("pg_url")
    start = request.getfixturevalue("process_servers")  # its env is read now
    one, two = start(database_url, count=2)
    markers = tmp_path / "markers.txt"
    manifest = {"steps": [python_step("slow", markers, sleep=120)]}
    started = one.client().post("/api/plans", json={"manifest": manifest, "runId": "pg"})
    assert started.status_code == 202, started.text
    wait_until(lambda: markers.exists(), "the step to start")

    other = two.client()
    assert other.get("/api/plans/pg").json()["executing"] is True
    cancelled = other.post("/api/plans/pg/cancel")
    assert cancelled.status_code == 200, cancelled.text
    report = wait_for_run(one.client(), "pg", timeout=10)
    assert report["status"] == "cancelled"
    assert report["steps"]["slow"]["status"] == "cancelled"
    assert other.post("/api/plans/pg/cancel").json() == cancelled.json()


def test_the_cli_cancels_a_run_of_the_service(
    plan_tools, tmp_path, thread_server, marking_settings
) -> None:
    server = thread_server(marking_settings)
    client = server.client()
    markers = tmp_path / "markers.txt"
    manifest = {"steps": [python_step("slow", markers, sleep=120)]}
    client.post("/api/plans", json={"manifest": manifest, "runId": "cli"})
    wait_until(markers.exists, "the step to start")

    def cancel(key: str) -> Result:
        args = ["plan", "cancel", "cli", "--server", server.url, "--api-key", key]
        return CliRunner().invoke(app, args, catch_exceptions=False)

    assert cancel("key-b").exit_code == 2  # another tenant's run: unknown
    done = cancel("key-a")
    assert done.exit_code == 0, done.output
    assert "cli: cancelled" in done.output
    assert wait_for_run(client, "cli")["status"] == "cancelled"
