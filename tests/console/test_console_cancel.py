"""Cancel and Resume in the console, in headless Chromium against a real ``veriloop serve``
(issue 45): a live run cancelled from its page stops and shows ``cancelled`` on the run and its
unfinished steps; an executing browser task cancelled from its page takes no more steps; a run
stopped by a model outage offers Resume, which continues it."""

from __future__ import annotations

import uuid

import pytest
from console_kit import screenshot, sign_in
from playwright.sync_api import Page, expect
from service_testkit import goal, observation, python_step, wait_for_run

from veriloop.llm.scripted import Fail, ToolCalls

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("playbook")]


def test_a_live_run_is_cancelled_from_its_page(page: Page, console_server, api, markers):
    tag = uuid.uuid4().hex[:6]
    manifest = {
        "steps": [
            python_step(f"slow-{tag}", markers, sleep=120),
            python_step(f"next-{tag}", markers, depends_on=[f"slow-{tag}"]),
        ]
    }
    run_id = api.post("/api/plans", json={"manifest": manifest}).json()["runId"]
    sign_in(page, f"{console_server.url}/runs/{run_id}")
    slow = page.locator(f"article#step-slow-{tag}")
    expect(slow).to_have_attribute("data-status", "running")
    expect(page.get_by_role("button", name="Resume")).to_have_count(0)  # it executes
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel the run").click()

    expect(page.locator("#run-status")).to_have_text("cancelled", timeout=15_000)
    expect(page.locator("#notice")).to_contain_text("Cancelled")
    expect(slow).to_have_attribute("data-status", "cancelled")
    expect(page.locator(f"article#step-next-{tag}")).to_have_attribute("data-status", "cancelled")
    expect(page.get_by_role("button", name="Cancel the run")).to_have_count(0)
    screenshot(page, "run_cancelled")
    assert api.get(f"/api/plans/{run_id}").json()["status"] == "cancelled"


def test_a_browser_task_is_cancelled_from_its_page(page: Page, console_server, api):
    first = api.post("/api/agent/interact", json=observation(4, 0, query=goal(4, 3))).json()
    task_id = first["taskId"]
    sign_in(page, f"{console_server.url}/tasks/{task_id}")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel the task").click()
    expect(page.locator("main")).to_contain_text("cancelled")
    expect(page.locator("#notice")).to_contain_text("takes no more steps")
    expect(page.get_by_role("button", name="Cancel the task")).to_have_count(0)
    step = api.post(
        "/api/agent/interact",
        json=observation(4, 1, taskId=task_id, stepIndex=first["stepIndex"]),
    )
    assert step.status_code == 409 and step.json()["status"] == "cancelled"


def test_a_run_stopped_by_a_model_outage_offers_resume(page: Page, console_server, api, scripted):
    scripted.script("execution", Fail(400, "scripted outage"))
    manifest = {"steps": [{"id": "notes", "input": "Write one line of notes."}]}
    run_id = api.post("/api/plans", json={"manifest": manifest}).json()["runId"]
    stopped = wait_for_run(api, run_id)
    assert stopped["status"] == "paused" and "scripted outage" in stopped["error"]

    sign_in(page, f"{console_server.url}/runs/{run_id}")
    resume = page.get_by_role("button", name="Resume")
    expect(resume).to_be_visible()
    expect(page.locator("#run-status")).to_have_text("paused")
    expect(page.locator("main")).to_contain_text("scripted outage")
    expect(page.get_by_role("button", name="Cancel the run")).to_be_visible()
    notes = {"notes": "[SUCCESS]: wrote it", "output": "one line"}
    scripted.script("execution", ToolCalls([("mark_step", notes)]))
    resume.click()
    expect(page.locator("#notice")).to_contain_text("Resumed")
    expect(page.locator("#run-status")).to_have_text("completed", timeout=20_000)
    expect(page.get_by_role("button", name="Resume")).to_have_count(0)
