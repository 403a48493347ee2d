"""Availability said plainly (issue 45): /healthz names the model and the plan-shell policy; a
service with no model answers a step 503 ``no_model`` without Retry-After (waiting does not cure
it); a run whose model fails stops ``paused`` with its reason, never ``running`` while nothing
executes it, and Resume continues it."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from service_testkit import goal, observation, python_step, wait_for_run

from veriloop.llm.scripted import Fail, ToolCalls

HERE = Path(__file__).parent


def test_healthz_names_the_model_and_the_plan_shell_policy(
    scripted_model, thread_server, sqlite_settings
) -> None:
    settings = dataclasses.replace(sqlite_settings, plan_shell="sandboxed")
    health = thread_server(settings).client().get("/healthz").json()
    assert health["status"] == "ok" and health["database"] == "sqlite"
    assert health["planShell"] == "sandboxed"
    model = health["model"]
    assert model["configured"] is True and model["scripted"] is False
    assert model["endpoint"] == "openai-compatible"
    assert model["baseUrl"] == scripted_model.base_url and model["name"]


def test_a_service_without_a_model_says_so_and_is_not_retried(
    thread_server, sqlite_settings
) -> None:
    assert not (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))
    client = thread_server(sqlite_settings).client()
    health = client.get("/healthz").json()
    assert health["model"]["configured"] is False and health["planShell"] == "off"

    step = client.interact(observation(1, 0, query=goal(1, 1)))
    assert step.status_code == 503, step.text
    assert "Retry-After" not in step.headers  # waiting does not cure it
    body = step.json()
    assert body["code"] == "no_model" and "veriloop serve --scripted" in body["detail"]
    assert len(body["detail"]) < 200


def test_a_run_whose_model_fails_is_paused_with_its_reason_then_resumed(
    monkeypatch, tmp_path, scripted_model, thread_server, sqlite_settings
) -> None:
    monkeypatch.setenv("VERILOOP_TOOLS", "plan_tools:TOOLS")
    monkeypatch.setenv("VERILOOP_WORKSPACE", str(tmp_path))
    monkeypatch.setenv("VERILOOP_LLM_MAX_RETRIES", "0")
    # The python step marks a file in its root-owned folder: only an unsandboxed step can.
    settings = dataclasses.replace(sqlite_settings, plan_shell="host")
    client = thread_server(settings).client()
    scripted_model.script("execution", Fail(400, "model gone"))
    manifest = {
        "steps": [
            python_step("first", tmp_path / "m.txt"),
            {"id": "notes", "input": "Write one line.", "depends_on": ["first"]},
        ]
    }
    run_id = client.post("/api/plans", json={"manifest": manifest}).json()["runId"]
    stopped = wait_for_run(client, run_id)
    assert stopped["status"] == "paused" and stopped["executing"] is False
    assert "model gone" in stopped["error"]
    listed = client.get("/api/plans").json()["items"]
    assert [r["status"] for r in listed if r["runId"] == run_id] == ["paused"]
    page = client.get(f"/runs/{run_id}").text
    assert "Paused: nothing executes this run now" in page and ">Resume</button>" in page

    done = {"notes": "[SUCCESS]: wrote it", "output": "a line"}
    scripted_model.script("execution", ToolCalls([("mark_step", done)]))
    assert client.post(f"/api/plans/{run_id}/resume").status_code == 202
    final = wait_for_run(client, run_id)
    assert final["status"] == "completed", final["steps"]
