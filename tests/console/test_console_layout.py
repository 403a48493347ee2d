"""The console's pages as a person on a phone or with a screen reader meets them, in headless
Chromium (issue 45): no page scrolls sideways at 400 px, the title and the current nav link are
the page's own with API keys on, a skip link leads to the content, axe-core finds no serious or
critical violation, and a browser task's page follows the task live."""

from __future__ import annotations

import uuid

import pytest
from axe_playwright_python.sync_playwright import Axe
from console_kit import screenshot, sign_in
from playwright.sync_api import Page, expect
from service_testkit import drive, goal, observation, python_step, wait_for_run

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("playbook")]
PAGES = {"/": "Plan runs", "/reviews": "Reviews", "/new": "New run", "/tasks": "Browser tasks"}


@pytest.fixture(scope="module")
def urls(console_server, api, tmp_path_factory) -> dict[str, str]:
    """Every kind of console page, with content: a finished run with a long id, a task."""
    markers = tmp_path_factory.mktemp("markers") / "m.txt"
    run_id = f"a-rather-long-run-id-{uuid.uuid4().hex}"
    manifest = {"goal": "x " * 200, "steps": [python_step("only-step", markers)]}
    api.post("/api/plans", json={"manifest": manifest, "runId": run_id})
    wait_for_run(api, run_id)
    task_id, _ = drive(api, 5, 1)
    found = {path: f"{console_server.url}{path}" for path in PAGES}
    found["run"] = f"{console_server.url}/runs/{run_id}"
    found["task"] = f"{console_server.url}/tasks/{task_id}"
    return found


def test_no_page_scrolls_sideways_at_400_px(page: Page, urls):
    page.set_viewport_size({"width": 400, "height": 800})
    sign_in(page, urls["/"])
    for name, url in urls.items():
        page.goto(url)
        page.locator("main h1").wait_for()
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 400, f"{name} is {wide} px wide at 400 px"
        if name == "/":
            link = page.locator("tr.run a.run-link").first
            box = link.bounding_box()
            assert box is not None and box["x"] + box["width"] <= 400
            screenshot(page, "runs_400px")


def test_titles_and_the_current_nav_link_are_the_pages_own_with_keys_on(page: Page, urls):
    for path, label in PAGES.items():
        sign_in(page, urls[path])
        expect(page).to_have_title(f"{label} · veriloop")
        current = page.locator("nav a[aria-current=page]")
        expect(current).to_have_count(1)
        expect(current).to_have_text(label)
        page.evaluate("sessionStorage.clear()")


def test_a_skip_link_leads_to_the_content(page: Page, urls):
    sign_in(page, urls["/"])
    page.goto(urls["/tasks"])  # the key is kept: the page as a person opens it
    page.locator("main h1").wait_for()
    page.keyboard.press("Tab")
    skip = page.locator("a.skip")
    expect(skip).to_be_focused()
    expect(skip).to_be_visible()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()


def test_axe_finds_no_serious_or_critical_violation(page: Page, urls):
    sign_in(page, urls["/"])
    axe = Axe()
    for name, url in urls.items():
        page.goto(url)
        page.locator("main h1").wait_for()
        results = axe.run(page)
        bad = [
            (v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
            for v in results.response["violations"]
            if v["impact"] in ("serious", "critical")
        ]
        assert not bad, f"{name}: {bad}"


def test_a_browser_task_page_follows_the_task_live(page: Page, console_server, api):
    first = api.post("/api/agent/interact", json=observation(6, 0, query=goal(6, 3))).json()
    task_id = first["taskId"]
    sign_in(page, f"{console_server.url}/tasks/{task_id}")
    expect(page.locator("article[data-step]")).to_have_count(1)
    page.evaluate("window.__loaded_once = true")
    second = api.post(
        "/api/agent/interact",
        json=observation(6, 1, taskId=task_id, stepIndex=first["stepIndex"]),
    )
    assert second.status_code == 200, second.text
    expect(page.locator("article[data-step]")).to_have_count(2, timeout=10_000)
    expect(page.locator("article[data-step='0']")).to_contain_text("succeeded")
    assert page.evaluate("window.__loaded_once") is True  # updated in place, never reloaded


def test_runs_are_searched_and_filtered_by_status(page: Page, console_server, api, urls, tmp_path):
    tag = uuid.uuid4().hex[:8]
    manifest = {"goal": f"needle {tag}", "steps": [python_step("n", tmp_path / "m.txt")]}
    found = api.post("/api/plans", json={"manifest": manifest}).json()["runId"]
    wait_for_run(api, found)
    sign_in(page, urls["/"])
    page.get_by_label("Search runs (id, goal, manifest)").fill(tag)
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("tr.run")
    expect(rows).to_have_count(1)
    expect(rows).to_have_attribute("data-run", found)
    page.get_by_label("Status").select_option("failed")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("main")).to_contain_text("No plan run matches.")
    page.get_by_label("Status").select_option("completed")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    assert api.get("/", params={"status": "nonsense"}).status_code == 422
