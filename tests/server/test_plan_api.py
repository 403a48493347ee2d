"""Plan runs over HTTP (a real server on loopback): start, report, live events, human reviews,
409 while executing, tenants, validation, a provider outage that leaves the run resumable."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from langgraph.store.sqlite.aio import AsyncSqliteStore
from service_testkit import (
    KEYS,
    Server,
    goal,
    observation,
    plan_events,
    python_step,
    wait_for_run,
)

from benchmarks.hostile_manifests import (
    alias_bomb,
    chained_shell_steps,
    nested_lists,
    nested_objects,
    yaml_block,
)
from veriloop.llm.scripted import Fail, RawBody, ToolCalls
from veriloop.schemas.plan_outputs import AgentDraft, CheckDraft, ManifestDraft, StepDraft
from veriloop.server.plans import NAMESPACE, PlanEntry
from veriloop.server.settings import Settings


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    return tmp_path / "markers.txt"


@pytest.fixture
def plan_env(monkeypatch, tmp_path, scripted_model) -> None:
    """Servers started after this load the test callables and work in a temporary workspace."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    monkeypatch.setenv("VERILOOP_TOOLS", "plan_tools:TOOLS")
    monkeypatch.setenv("VERILOOP_WORKSPACE", str(workspace))
    monkeypatch.setenv("VERILOOP_LLM_MAX_RETRIES", "0")
    monkeypatch.setenv("VERILOOP_REPLAN_COOLDOWN_S", "0")


@pytest.fixture
def server(plan_env, thread_server, sqlite_settings) -> Server:
    # The steps mark a file outside their workspace: only an unsandboxed python step can.
    return thread_server(dataclasses.replace(sqlite_settings, plan_shell="host"))


def ran(markers: Path) -> list[str]:
    return markers.read_text().splitlines() if markers.exists() else []


def test_a_run_goes_on_in_the_server_and_streams_its_events_live(server, markers):
    client = server.client()
    checked = python_step(
        "b",
        markers,
        depends_on=["a"],
        checks=[{"kind": "predicate", "expr": 'result["value"] == "b"'}],
    )
    response = client.post(
        "/api/plans",
        json={
            "manifest": {
                "goal": "two steps",
                "steps": [python_step("a", markers, sleep=0.3), checked],
            }
        },
    )
    assert response.status_code == 202, response.text
    started = response.json()
    assert started["status"] == "running" and started["runId"]
    run_id = started["runId"]

    # Subscribed while the first step sleeps: the events arrive as they happen, then `end`.
    events = plan_events(client, run_id)
    kinds = [(e["event"], e.get("stepId")) for e in events]
    assert kinds.index(("attempt_started", "a")) < kinds.index(("step_finished", "a"))
    assert kinds.index(("step_finished", "a")) < kinds.index(("attempt_started", "b"))
    assert ("check_result", "b") in kinds and ("attempt_finished", "b") in kinds
    check = next(e for e in events if e["event"] == "check_result" and e["type"] == "predicate")
    assert check["stepId"] == "b" and check["passed"] is True and check["runNumber"] == 1
    assert all(e["runId"] == run_id for e in events)
    assert events[-1] == {"event": "end", "runId": run_id, "status": "completed"}

    report = wait_for_run(client, run_id)
    assert (
        report["status"] == "completed" and report["executing"] is False and "error" not in report
    )
    assert {k: s["status"] for k, s in report["steps"].items()} == {
        "a": "completed",
        "b": "completed",
    }
    assert report["steps"]["b"]["verificationStatus"] == "verified"
    assert report["steps"]["b"]["output"] == {"value": "b", "depends": ["a"]}
    assert report["steps"]["b"]["attempts"][0]["runNumber"] == 1
    assert ran(markers) == ["a", "b"]
    # Run metadata: when it started and ended, and the wall time of the run, each step and attempt.
    assert report["startedAt"] < report["endedAt"] and report["durationS"] >= 0.3
    a = report["steps"]["a"]
    assert a["durationS"] >= 0.3 and a["attempts"][0]["durationS"] >= 0.3
    assert report["startedAt"] <= a["attempts"][0]["startedAt"] <= report["endedAt"]

    # A finished run's stream says what finished, from its checkpoint, and ends.
    again = plan_events(client, run_id)
    assert [(e["event"], e.get("stepId"), e.get("status")) for e in again] == [
        ("step_finished", "a", "completed"),
        ("step_finished", "b", "completed"),
        ("end", None, "completed"),
    ]


def test_a_human_review_pauses_the_run_and_an_answer_resumes_it(server, markers):
    client = server.client()
    review = {
        "id": "review",
        "type": "human_review",
        "input": "Ship the build?",
        "depends_on": ["a"],
    }
    manifest = {
        "steps": [
            python_step("a", markers),
            review,
            python_step("after", markers, depends_on=["review"]),
        ]
    }
    response = client.post(
        "/api/plans", json={"manifest": manifest, "goal": "ship", "runId": "ship-1"}
    )
    assert response.status_code == 202 and response.json()["runId"] == "ship-1"

    events = plan_events(client, "ship-1")
    assert events[-1] == {
        "event": "end",
        "runId": "ship-1",
        "status": "awaiting_review",
        "pendingReviews": ["review"],
    }
    report = wait_for_run(client, "ship-1")
    assert report["status"] == "awaiting_review" and report["goal"] == "ship"
    [pending] = report["pendingReviews"]
    assert pending["stepId"] == "review" and "Ship the build?" in pending["question"]
    assert "after" not in report["steps"]

    wrong = client.post(
        "/api/plans/ship-1/reviews", json={"decisions": {"nope": {"approved": True}}}
    )
    assert wrong.status_code == 400
    assert "no pending review for step nope" in wrong.json()["detail"]
    assert "waiting for: review" in wrong.json()["detail"]
    resume = client.post("/api/plans/ship-1/resume")
    assert resume.status_code == 409 and "waiting for a review of review" in resume.json()["detail"]

    answer = {"decisions": {"review": {"approved": True, "comment": "ship it"}}}
    accepted = client.post("/api/plans/ship-1/reviews", json=answer)
    assert accepted.status_code == 202, accepted.text
    assert accepted.json() == {"runId": "ship-1", "status": "running"}
    done = wait_for_run(client, "ship-1")
    assert done["status"] == "completed"
    assert done["steps"]["review"]["review"] == {"approved": True, "comment": "ship it"}
    assert done["steps"]["after"]["status"] == "completed"
    assert ran(markers) == ["a", "after"]

    late = client.post("/api/plans/ship-1/reviews", json=answer)
    assert late.status_code == 400 and "status completed" in late.json()["detail"]
    taken = client.post("/api/plans", json={"manifest": manifest, "runId": "ship-1"})
    assert taken.status_code == 409 and "exists already" in taken.json()["detail"]


def test_a_rejected_review_fails_the_step_with_the_comment(server, markers):
    client = server.client()
    review = {"id": "review", "type": "human_review", "input": "Deploy?"}
    manifest = {"steps": [review, python_step("deploy", markers, depends_on=["review"])]}
    run_id = client.post("/api/plans", json={"manifest": manifest}).json()["runId"]
    assert wait_for_run(client, run_id)["status"] == "awaiting_review"
    decision = {"decisions": {"review": {"approved": False, "comment": "not on a Friday"}}}
    assert client.post(f"/api/plans/{run_id}/reviews", json=decision).status_code == 202
    done = wait_for_run(client, run_id)
    assert done["status"] == "failed" and done["steps"]["deploy"]["status"] == "blocked"
    assert "not on a Friday" in done["steps"]["review"]["diagnosis"]
    assert ran(markers) == []


def test_an_executing_run_answers_409_and_runs_once(server, markers):
    client = server.client()
    manifest = {"steps": [python_step("slow", markers, sleep=2.5)]}
    run_id = client.post("/api/plans", json={"manifest": manifest}).json()["runId"]
    report = client.get(f"/api/plans/{run_id}").json()
    assert report["executing"] is True and report["status"] == "running"

    resumed = client.post(f"/api/plans/{run_id}/resume")
    assert resumed.status_code == 409 and "executing" in resumed.json()["detail"]
    reviewed = client.post(
        f"/api/plans/{run_id}/reviews", json={"decisions": {"slow": {"approved": True}}}
    )
    assert reviewed.status_code == 409 and "still executing" in reviewed.json()["detail"]

    done = wait_for_run(client, run_id)
    assert done["status"] == "completed" and ran(markers) == ["slow"]
    finished = client.post(f"/api/plans/{run_id}/resume")
    assert finished.status_code == 409 and "already completed" in finished.json()["detail"]


def test_runs_belong_to_their_tenant(server, markers):
    owner, other = server.client("key-a"), server.client("key-b")
    manifest = {"steps": [python_step("a", markers)]}
    run_id = owner.post("/api/plans", json={"manifest": manifest, "runId": "mine"}).json()["runId"]
    wait_for_run(owner, run_id)

    assert other.get("/api/plans/mine").status_code == 404
    assert other.get("/api/plans/mine/events").status_code == 404
    assert other.post("/api/plans/mine/resume").status_code == 404
    review = {"decisions": {"a": {"approved": True}}}
    assert other.post("/api/plans/mine/reviews", json=review).status_code == 404
    assert other.get("/api/plans/unknown-run").status_code == 404
    assert other.get("/api/plans/mine").json() == other.get("/api/plans/unknown-run").json() | {
        "detail": "unknown plan run mine"
    }
    # Run ids are per tenant: the other tenant may take "mine" too, and sees only its own run.
    assert owner.post("/api/plans", json={"manifest": manifest, "runId": "mine"}).status_code == 409
    theirs = {"steps": [python_step("b", markers)]}
    started = other.post("/api/plans", json={"manifest": theirs, "runId": "mine"})
    assert started.status_code == 202, started.text
    assert list(wait_for_run(other, "mine")["steps"]) == ["b"]
    assert list(wait_for_run(owner, "mine")["steps"]) == ["a"]
    assert [e["stepId"] for e in plan_events(other, "mine") if e["event"] == "step_finished"] == [
        "b"
    ]

    for client in (server.client(None), server.client("not-a-key")):
        assert client.get("/api/plans/mine").status_code == 401
        assert client.post("/api/plans", json={"manifest": manifest}).status_code == 401
    assert ran(markers) == ["a", "b"]


def test_a_browser_tasks_id_is_free_as_a_run_id(server, playbook, markers):
    """A task's thread and a run's never share a name: a task id tells nothing as a runId."""
    task_id = server.client().interact(observation(3, 0, query=goal(3, 2))).json()["taskId"]
    for key in ("key-a", "key-b"):
        client = server.client(key)
        body = {"manifest": {"steps": [python_step(key, markers)]}, "runId": task_id}
        assert client.post("/api/plans", json=body).status_code == 202
        assert wait_for_run(client, task_id)["status"] == "completed"
    assert server.client().detail(task_id)["stepIndex"] == 0


def test_invalid_requests_are_refused_with_a_message(server, markers):
    client = server.client()

    def refused(body: Any, status: int) -> str:
        response = client.post("/api/plans", json=body)
        assert response.status_code == status, response.text
        payload = response.json()
        return payload.get("message") or payload["detail"]

    assert "give a manifest, a goal, or both" in refused({}, 422)
    assert "concurrency" in refused({"goal": "x", "concurrency": 0}, 422)
    assert "runId" in refused({"goal": "x", "runId": "no spaces please"}, 422)
    assert "manifest" in refused({"manifest": 42}, 422)
    # Found by schemathesis: a number the store cannot hold must not get past validation.
    assert "64 bits" in refused({"manifest": {"steps": [], "n": [2**70]}}, 422)
    assert client.get("/api/plans/bad%00id").status_code == 422  # never reaches the store
    assert (
        "decisions" in client.post("/api/plans/x/reviews", json={"decisions": {}}).json()["message"]
    )

    # A manifest that does not parse, or cannot run: the run exists and is rejected, located.
    for text, problem in [
        ("steps: [a, b\nnext: 1", "line 2, column 5"),
        ("just some words", "no manifest found"),
        # Values the parsers refuse to build were a 500 at submission, then a stuck run.
        ("steps:\n  - {id: a, command: 'true', input: 2020-13-45}", "month must be in 1..12"),
        ("[" + "1" * 5000 + "]", "not valid JSON: Exceeds the limit (4300 digits)"),
    ]:
        response = client.post("/api/plans", json={"manifest": text})
        assert response.status_code == 202, response.text
        report = wait_for_run(client, response.json()["runId"])
        assert report["status"] == "rejected" and problem in report["haltReason"], report
    cycle = yaml.safe_dump(
        {
            "steps": [
                python_step("a", markers, depends_on=["b"]),
                python_step("b", markers, depends_on="a"),
            ]
        }
    )
    response = client.post("/api/plans", json={"manifest": cycle})
    assert response.status_code == 202
    report = wait_for_run(client, response.json()["runId"])
    assert report["status"] == "rejected" and "cycle" in report["haltReason"]
    assert "a" in report["haltReason"] and report["steps"] == {}
    unknown = {"steps": [python_step("a", markers, depends_on=["ghost"])]}
    report = wait_for_run(
        client, client.post("/api/plans", json={"manifest": unknown}).json()["runId"]
    )
    assert report["status"] == "rejected" and "ghost" in report["haltReason"]
    assert "steps[0]" in report["haltReason"]
    assert ran(markers) == []


def test_bodies_over_the_limit_answer_413(plan_env, thread_server, tmp_path, markers):
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'small.sqlite'}",
        api_keys={"key-a": "a"},
        max_dom_bytes=20_000,
        max_manifest_steps=1,
        plan_shell="host",  # the steps mark a file outside their workspace
    )
    client = thread_server(settings).client()
    two = {"steps": [python_step("a", markers), python_step("b", markers)]}
    response = client.post("/api/plans", json={"manifest": two})
    assert response.status_code == 413 and "more than 1 steps" in response.json()["detail"]
    one = client.post("/api/plans", json={"manifest": {"steps": [python_step("a", markers)]}})
    assert wait_for_run(client, one.json()["runId"])["status"] == "completed"
    big = python_step("a", markers) | {"notes": "x" * 30_000}
    response = client.post("/api/plans", json={"manifest": {"steps": [big]}})
    assert response.status_code == 413 and "limit is 20000 bytes" in response.json()["detail"]
    text = client.post("/api/plans", json={"manifest": "steps: []\n# " + "x" * 30_000})
    assert text.status_code == 413
    huge = client.post(
        "/api/plans",
        content=json.dumps({"goal": "x" * 1_200_000}),
        headers={"Content-Type": "application/json"},
    )
    assert huge.status_code == 413 and "request body is" in huge.json()["detail"]


@pytest.mark.parametrize(
    "outage",
    [Fail(503, "provider down"), RawBody("<html>502 Bad Gateway</html>")],
    ids=["http-503", "200-but-not-a-chat-completion"],
)
def test_a_provider_outage_leaves_the_run_resumable_never_completed(
    server, scripted_model, markers, outage
):
    client = server.client()
    right = ToolCalls([("mark_step", {"notes": "[SUCCESS]: answered", "output": "right"})])
    scripted_model.script("execution", outage)
    scripted_model.on("execution", lambda request: right)
    manifest = {
        "agents": {"writer": {"prompt": "You answer.", "tools": []}},
        "steps": [
            python_step("first", markers),
            {"id": "answer", "agent": "writer", "input": "Say right.", "depends_on": ["first"],
             "checks": [{"kind": "predicate", "expr": 'result == "right"'}]},
        ],
    }  # fmt: skip
    run_id = client.post("/api/plans", json={"manifest": manifest}).json()["runId"]
    stopped = wait_for_run(client, run_id)
    assert stopped["status"] == "paused" and stopped["executing"] is False
    assert "model provider unavailable" in stopped["error"]
    # The interrupted step is still in flight (never completed by an error).
    assert stopped["steps"]["first"]["status"] == "completed"
    assert stopped["steps"]["answer"]["status"] == "running"
    events = plan_events(client, run_id)
    assert events[-1]["status"] == "paused" and "unavailable" in events[-1]["error"]

    assert client.post(f"/api/plans/{run_id}/resume").status_code == 202
    done = wait_for_run(client, run_id)
    assert done["status"] == "completed" and "error" not in done
    assert done["steps"]["answer"]["output"] == "right"
    assert [a["runNumber"] for a in done["steps"]["answer"]["attempts"]] == [1]
    assert ran(markers) == ["first"]  # the finished step did not run again
    assert scripted_model.calls("execution") == 2


def test_a_goal_alone_has_the_meta_planner_write_the_manifest(server, scripted_model):
    client = server.client()
    draft = ManifestDraft(
        agents=[AgentDraft(name="writer", prompt="You answer.")],
        steps=[
            StepDraft(
                id="answer",
                agent="writer",
                input="Say right.",
                checks=[CheckDraft(kind="predicate", expr='result == "right"')],
            )
        ],
    )
    scripted_model.script("planning", draft)
    scripted_model.script(
        "execution", ToolCalls([("mark_step", {"notes": "[SUCCESS]: done", "output": "right"})])
    )
    response = client.post("/api/plans", json={"goal": "Answer right", "concurrency": 2})
    assert response.status_code == 202
    report = wait_for_run(client, response.json()["runId"])
    assert report["status"] == "completed" and report["goal"] == "Answer right"
    assert report["manifest"]["steps"][0]["origin"] == "model"
    assert report["steps"]["answer"]["output"] == "right"
    assert report["usage"]["planning"]["calls"] == 1


def test_a_goal_is_never_read_as_a_file_on_the_server(server, scripted_model, markers, tmp_path):
    on_disk = tmp_path / "plan.yaml"
    on_disk.write_text(yaml.safe_dump({"steps": [python_step("secret", markers)]}))
    client = server.client()
    run_id = client.post("/api/plans", json={"goal": str(on_disk)}).json()["runId"]
    report = wait_for_run(client, run_id)
    # The goal went to the meta-planner (which has no scripted answer), not to a file reader.
    assert scripted_model.calls("planning") >= 1 and report["status"] != "completed"
    assert report["goal"] == str(on_disk) and "secret" not in report["steps"]
    assert ran(markers) == []


@pytest.mark.parametrize(
    ("manifest", "problem"),
    [
        (alias_bomb(), "manifest (line 1, column 5): YAML anchors and aliases are not accepted"),
        ("a: &a {command: 'true'}\nsteps: [{id: s, <<: *a}]", "manifest (line 1, column 4): YAML"),
        (nested_lists(10_000), "manifest (line 1, column 116): lists and mappings nested deeper"),
        (yaml_block(1500), "manifest (line 5, column 129): lists and mappings nested deeper"),
        (json.loads(nested_objects(900)), "manifest at steps[0].input.a.a.a.a.a...: lists and"),
        (chained_shell_steps(501), "steps: more than 500 steps in the manifest"),
    ],
    ids=["alias-bomb", "one-alias", "lists-10k", "yaml-block-1500", "object-900", "501-steps"],
)
def test_a_manifest_past_a_reading_limit_answers_413_located(server, manifest, problem):
    client = server.client()
    response = client.post("/api/plans", json={"manifest": manifest, "runId": "bomb"})
    assert response.status_code == 413 and response.json()["detail"].startswith(problem)
    assert client.get("/api/plans/bomb").status_code == 404  # no run was created


@pytest.mark.parametrize(
    ("manifest", "problem"),
    [
        (alias_bomb(), "manifest (line 6, column 14): more than 100000 values"),
        # The store's encoder holds 254 levels: deeper was refused even before the limits.
        (json.loads(nested_objects(100)), "manifest at steps[0].input.a.a.a.a.a...: lists and"),
    ],
    ids=["alias-bomb-text", "object-100"],
)
def test_resuming_a_run_whose_manifest_is_past_the_limits_rejects_it(
    server, sqlite_settings, manifest, problem
):
    """A run stored before the limits (or by a process killed before its first checkpoint) ends
    ``rejected`` with the located problem when resumed, never ``running`` with a RecursionError."""
    stamp = "2026-01-01T00:00:00+00:00"
    entry = PlanEntry(
        tenant=KEYS["key-a"],
        run_id="old",
        request={"manifest": manifest},
        created_at=stamp,
        updated_at=stamp,
    )

    async def store_entry() -> None:
        async with AsyncSqliteStore.from_conn_string(sqlite_settings.sqlite_path) as store:
            await store.aput(NAMESPACE, entry.thread_id, entry.model_dump())

    asyncio.run(store_entry())
    client = server.client()
    assert client.post("/api/plans/old/resume").status_code == 202
    report = wait_for_run(client, "old")
    assert report["status"] == "rejected" and problem in report["haltReason"], report
    again = client.post("/api/plans/old/resume")
    assert again.status_code == 409 and "already rejected" in again.json()["detail"]


def test_a_steps_output_is_stored_capped_and_the_report_stays_small(server):
    """A 5 MB output and one nested 300 levels (past what the checkpointer can encode) are stored
    as markers with their size: the run ends, its report stays small."""
    client = server.client()
    steps = [
        {"id": "big", "function": "loud", "input": {"chars": 5_000_000}},
        {"id": "deep", "function": "loud", "input": {"depth": 300}},
        {"id": "small", "function": "loud", "input": {"chars": 10}},
    ]
    run_id = client.post("/api/plans", json={"manifest": {"steps": steps}}).json()["runId"]
    report = wait_for_run(client, run_id)
    assert report["status"] == "completed" and "error" not in report, report
    big, deep = report["steps"]["big"]["output"], report["steps"]["deep"]["output"]
    assert big["truncated"] and big["bytes"] == 5_000_011 and big["head"].startswith('{"text":"xx')
    assert deep["truncated"] and "Maximum serialization depth" in deep["reason"]
    assert report["steps"]["small"]["output"] == {"text": "x" * 10}
    assert len(client.get(f"/api/plans/{run_id}").content) < 50_000
