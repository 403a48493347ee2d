"""The endpoints the console reads (against a real ``veriloop serve``): paginated, per-tenant
lists of plan runs and browser tasks, the manifest check that runs nothing, the OpenAPI schema,
and the pages' key handling and security headers."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest
from service_testkit import PG_URL, Playbook, drive, python_step, wait_for_run

from veriloop.llm.scripted import ANY_PURPOSE

PAGES = ("/", "/reviews", "/new", "/tasks")


@pytest.fixture(scope="module")
def clients(console_server):
    with console_server.client("key-a") as a, console_server.client("key-b") as b:
        yield a, b


def test_plan_runs_are_listed_per_tenant_a_page_at_a_time(clients, tmp_path: Path):
    a, b = clients
    markers = tmp_path / "markers.txt"
    started = []
    for name in ("one", "two", "three"):
        manifest = {"goal": f"run {name}", "steps": [python_step(name, markers)]}
        started.append(a.post("/api/plans", json={"manifest": manifest}).json()["runId"])
        wait_for_run(a, started[-1])
    theirs = b.post("/api/plans", json={"manifest": {"steps": [python_step("b", markers)]}})
    wait_for_run(b, theirs.json()["runId"])

    first = a.get("/api/plans", params={"limit": 2}).json()
    assert first["nextOffset"] == 2 and first["limit"] == 2 and first["offset"] == 0
    rest = a.get("/api/plans", params={"limit": 2, "offset": 2}).json()
    assert "nextOffset" not in rest
    listed = [r["runId"] for r in first["items"] + rest["items"]]
    assert sorted(listed) == sorted(started)  # every run once, none of tenant B's
    row = next(r for r in first["items"] + rest["items"] if r["runId"] == started[-1])
    assert row["status"] == "completed" and row["goal"] == "run three"
    assert (row["stepsDone"], row["stepsTotal"], row["executing"]) == (1, 1, False)
    assert [r["runId"] for r in b.get("/api/plans").json()["items"]] == [theirs.json()["runId"]]
    assert a.get("/api/plans", params={"limit": 101}).status_code == 422


@pytest.mark.postgres
def test_the_lists_work_on_postgresql_too(launch, tmp_path: Path):
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        server = launch(f"{PG_URL}?options=-csearch_path%3D{schema}")
        with server.client("key-a") as a, server.client("key-b") as b:
            manifest = {"steps": [python_step("pg", tmp_path / "markers.txt")]}
            run_id = a.post("/api/plans", json={"manifest": manifest}).json()["runId"]
            assert wait_for_run(a, run_id)["status"] == "completed"
            [row] = a.get("/api/plans").json()["items"]
            assert row["runId"] == run_id and row["stepsDone"] == row["stepsTotal"] == 1
            assert b.get("/api/plans").json()["items"] == []
            assert a.get("/", headers={"X-Console": "main"}).text.count(run_id) >= 1
            assert run_id not in b.get("/", headers={"X-Console": "main"}).text
        server.stop()
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '30s'")
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_browser_tasks_are_listed_per_tenant(clients, scripted):
    a, b = clients
    scripted.on(ANY_PURPOSE, Playbook())
    task_id, _ = drive(a, 4, 1)
    listed = a.get("/api/tasks").json()
    [task] = [t for t in listed["items"] if t["taskId"] == task_id]
    assert task["status"] == "completed" and task["goal"].startswith("Press button 4")
    assert task["url"] == "http://app.test/b4/after-1"
    assert task_id not in {t["taskId"] for t in b.get("/api/tasks").json()["items"]}
    assert b.get(f"/api/tasks/{task_id}").status_code == 404


def test_a_manifest_check_reports_located_problems_and_runs_nothing(clients):
    a, _ = clients
    before = a.get("/api/plans", params={"limit": 100}).json()["items"]
    broken = a.post("/api/plans/validate", json={"manifest": "steps:\n  - id: a\n   bad: [\n"})
    assert broken.status_code == 200, broken.text
    check = broken.json()
    assert check["runnable"] is False and check["steps"] == []
    [finding] = check["critique"]["findings"]
    assert finding["severity"] == "critical" and "line" in finding["message"]

    cycle = {
        "steps": [
            {"id": "x", "command": "true", "depends_on": ["y"]},
            {"id": "y", "command": "true", "depends_on": ["x"]},
        ]
    }
    check = a.post("/api/plans/validate", json={"manifest": cycle}).json()
    assert check["runnable"] is False
    assert any(set(f["stepIds"]) == {"x", "y"} for f in check["critique"]["findings"])

    warned = {
        "steps": [
            {"id": "a", "command": "true"},
            {"id": "b", "command": "true", "depends_on": ["a"]},
        ]
    }
    check = a.post("/api/plans/validate", json={"manifest": warned}).json()
    assert check["runnable"] is True and check["steps"] == ["a", "b"]
    assert [f["rule"] for f in check["critique"]["findings"]] == ["disconnected_flow"]
    assert a.post("/api/plans/validate", json={"goal": "no manifest"}).status_code == 422
    assert a.get("/api/plans", params={"limit": 100}).json()["items"] == before


def test_the_list_endpoints_are_in_the_openapi_schema_and_the_pages_are_not(clients):
    paths = clients[0].get("/openapi.json").json()["paths"]
    assert "get" in paths["/api/plans"] and "post" in paths["/api/plans"]
    assert "get" in paths["/api/tasks"] and "post" in paths["/api/plans/validate"]
    assert {"limit", "offset"} <= {p["name"] for p in paths["/api/plans"]["get"]["parameters"]}
    assert not {"/", "/reviews", "/new", "/tasks", "/runs/{run_id}"} & set(paths)


def test_pages_ask_for_a_key_and_carry_a_content_security_policy(console_server, clients):
    a, _ = clients
    with console_server.client(None) as anonymous:
        for path in (*PAGES, f"/runs/{uuid.uuid4().hex}", "/static/console.js"):
            response = anonymous.get(path)
            assert response.status_code == 200, path
            csp = response.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp
            assert "frame-ancestors 'none'" in csp
        keyless = anonymous.get("/")
        assert 'id="key-form"' in keyless.text and 'data-needs-key="true"' in keyless.text
        assert "<script>" not in keyless.text  # the one script is a static file
        assert anonymous.get("/", headers={"X-Console": "main"}).status_code == 401
    with console_server.client("not-a-key") as stranger:
        assert stranger.get("/tasks", headers={"X-Console": "main"}).status_code == 401
    # A client that sends its key gets the whole page at once; the main part alone on request.
    whole = a.get("/tasks")
    assert 'data-needs-key="false"' in whole.text and "Browser tasks" in whole.text
    missing = a.get("/runs/nope")
    assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
    assert "unknown plan run nope" in missing.text and "content-security-policy" in missing.headers
    part = a.get("/tasks", headers={"X-Console": "main"})
    assert part.text.startswith("<h1>Browser tasks</h1>") and "<html" not in part.text
    assert part.headers["content-security-policy"] == whole.headers["content-security-policy"]
