"""The console's task page names each action's target element as a person would call it, and
keeps doing so as the task goes on (the page follows the task's event stream), in headless
Chromium against a real ``veriloop serve`` (scripted model); the stream itself."""

from __future__ import annotations

import json

import httpx
import pytest
from console_kit import sign_in
from playwright.sync_api import Page, expect
from service_testkit import Playbook, drive, goal, observation

from veriloop.llm.scripted import ANY_PURPOSE

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def api(console_server) -> httpx.Client:
    with console_server.client("key-a") as client:
        yield client


@pytest.fixture(scope="module", autouse=True)
def playbook(scripted) -> Playbook:
    book = Playbook()
    scripted.on(ANY_PURPOSE, book)
    return book


def test_each_step_names_its_target_element_live(page: Page, console_server, api) -> None:
    first = api.interact(observation(7, 0, query=goal(7, 2)))
    assert first.status_code == 200, first.text
    task_id = first.json()["taskId"]
    # The API keeps the name with the action, beside its number.
    (action,) = api.detail(task_id)["actions"]
    assert action["action"] == "click(7)" and action["target"] == "Press 7 (pressed 0)"

    sign_in(page, f"{console_server.url}/tasks/{task_id}")
    step1 = page.locator("article[data-step='0']")
    expect(step1.locator("h3")).to_have_text("Step 1: click(7) “Press 7 (pressed 0)”")
    expect(step1).to_contain_text("Not verified yet")
    page.evaluate("window.__same_document = true")

    # The next step, taken while the page is open: it shows up with its own element's name,
    # and the first step gets the verdict on it, without a reload.
    second = api.interact(observation(7, 1, taskId=task_id, stepIndex=0))
    assert second.status_code == 200, second.text
    step2 = page.locator("article[data-step='1']")
    expect(step2.locator("h3")).to_have_text(
        "Step 2: click(7) “Press 7 (pressed 1)”", timeout=10_000
    )
    expect(step1).to_contain_text("Verdict succeeded")
    assert page.evaluate("window.__same_document") is True


def test_a_task_s_event_stream_ends_with_its_status(console_server, api) -> None:
    task_id, answers = drive(api, 3, 1)
    assert answers[-1]["status"] == "completed"
    with api.stream("GET", f"/api/tasks/{task_id}/events") as response:
        assert response.status_code == 200
        events = [
            json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")
        ]
    assert [e["event"] for e in events] == ["step", "end"]
    assert events[0]["stepIndex"] == answers[-1]["stepIndex"]
    assert events[-1] == {"event": "end", "taskId": task_id, "status": "completed"}
    assert api.get("/api/tasks/no-such-task/events").status_code == 404
    with console_server.client("key-b") as other:  # another tenant's task is unknown to it
        assert other.get(f"/api/tasks/{task_id}/events").status_code == 404
