"""The web console in headless Chromium against a real ``veriloop serve`` (scripted model):
start a run with a review from the console and watch it live, approve, reject, a command
approval, the critic's findings before a run starts, tenants kept apart, untrusted text shown as
text under a Content-Security-Policy, and the review flow with the keyboard alone."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest
import yaml
from console_kit import screenshot, sign_in
from playwright.sync_api import Page, expect
from service_testkit import drive, python_step, wait_for_run

from veriloop.schemas.plan_outputs import ManifestDraft, StepDraft

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("playbook")]
XSS_SCRIPT = "<script>window.__xss = 1</script>"
XSS_IMG = '"><img src=x onerror="window.__xss = 2">'


def review_manifest(markers: Path, tag: str, *, first_sleep: float = 0) -> dict:
    return {
        "goal": f"ship build {tag}",
        "steps": [
            python_step(f"build-{tag}", markers, sleep=first_sleep),
            {
                "id": "review",
                "type": "human_review",
                "input": "Ship the build?",
                "depends_on": [f"build-{tag}"],
            },
            python_step("ship", markers, depends_on=["review"]),
        ],
    }


def start(api: httpx.Client, manifest: dict) -> str:
    response = api.post("/api/plans", json={"manifest": manifest})
    assert response.status_code == 202, response.text
    run_id = response.json()["runId"]
    assert wait_for_run(api, run_id)["status"] == "awaiting_review"
    return run_id


def test_a_run_started_from_the_console_updates_live_and_completes_once_approved(
    page: Page, console_server, api, markers
):
    tag = uuid.uuid4().hex[:6]
    manifest = review_manifest(markers, tag, first_sleep=2.0)
    sign_in(page, f"{console_server.url}/new")
    page.get_by_label("or paste it").fill(yaml.safe_dump(manifest, sort_keys=False))
    start_button = page.get_by_role("button", name="Start the run")
    expect(start_button).to_be_disabled()  # nothing runs before the check
    page.get_by_role("button", name="Check").click()
    expect(page.locator(".manifest-check")).to_contain_text("Ready to run")
    # The critic's warning, located, before anything runs.
    expect(page.locator(".finding")).to_contain_text("steps[2] (id 'ship')")
    expect(page.locator(".finding")).to_contain_text("disconnected_flow")
    screenshot(page, "new_run")
    start_button.click()

    page.wait_for_url("**/runs/*")
    page.evaluate("window.__loaded_once = true")  # gone if the page ever reloads
    build = page.locator(f"article#step-build-{tag}")
    expect(build).to_have_attribute("data-status", "running")
    expect(page.locator(f"g.step-node[data-step='build-{tag}']")).to_have_attribute(
        "data-status", "running"
    )
    screenshot(page, "run_live")
    expect(build).to_have_attribute("data-status", "completed", timeout=20_000)
    form = page.locator("form.review")
    expect(form).to_be_visible()
    expect(page.locator(".review-card pre.task")).to_have_text("Ship the build?")
    expect(page.locator(".review-card")).not_to_contain_text("STEP_RESULTS")
    screenshot(page, "run_review")
    form.get_by_label("Comment").fill("looks good")
    form.get_by_role("button", name="Approve").click()

    expect(page.locator("#run-status")).to_have_text("completed", timeout=20_000)
    expect(page.locator("article#step-ship")).to_have_attribute("data-status", "completed")
    expect(page.locator("article#step-review")).to_contain_text("approved")
    assert page.evaluate("window.__loaded_once") is True
    screenshot(page, "run_completed")
    run_id = page.url.rsplit("/", 1)[1]
    report = api.get(f"/api/plans/{run_id}").json()
    assert report["steps"]["review"]["review"] == {"approved": True, "comment": "looks good"}
    page.get_by_role("link", name="Plan runs").click()
    expect(page.locator(f"tr.run[data-run='{run_id}']")).to_contain_text("3/3")
    screenshot(page, "runs")


def test_a_rejection_with_a_comment_fails_the_step_and_blocks_what_follows(
    page: Page, console_server, api, markers
):
    run_id = start(api, review_manifest(markers, uuid.uuid4().hex[:6]))
    sign_in(page, f"{console_server.url}/reviews")
    card = page.locator(f".review-card[data-run='{run_id}']")
    screenshot(page, "reviews")
    card.get_by_label("Comment").fill("not on a Friday")
    card.get_by_role("button", name="Reject").click()
    expect(page.locator("#notice")).to_have_text(
        f"Rejected: step review of run {run_id}; the step fails; its failure policy decides "
        "what follows."
    )
    report = wait_for_run(api, run_id)
    assert report["status"] == "failed"
    assert report["steps"]["review"]["diagnosis"] == "rejected by the reviewer: not on a Friday"
    assert report["steps"]["ship"]["status"] == "blocked"
    page.goto(f"{console_server.url}/runs/{run_id}")
    expect(page.locator("#run-status")).to_have_text("failed")
    expect(page.locator("article#step-review")).to_contain_text("not on a Friday")


def test_the_review_flow_works_with_the_keyboard_alone(page: Page, console_server, api, markers):
    run_id = start(api, review_manifest(markers, uuid.uuid4().hex[:6]))
    page.goto(f"{console_server.url}/reviews")
    page.keyboard.press("Tab")  # through the navigation to the key field
    for _ in range(10):
        if page.evaluate("document.activeElement.id") == "api-key":
            break
        page.keyboard.press("Tab")
    page.keyboard.type("key-a")
    page.keyboard.press("Enter")
    comment = page.locator(f".review-card[data-run='{run_id}'] textarea")
    expect(comment).to_be_visible()
    target = comment.get_attribute("id")
    for _ in range(40):
        if page.evaluate("document.activeElement.id") == target:
            break
        page.keyboard.press("Tab")
    else:
        pytest.fail("Tab never reached the review's comment")
    page.keyboard.type("checked by keyboard")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Approve"
    page.keyboard.press("Enter")
    expect(page.locator("#notice")).to_contain_text(f"Approved: step review of run {run_id}")
    report = wait_for_run(api, run_id)
    assert report["status"] == "completed"
    assert report["steps"]["review"]["review"]["comment"] == "checked by keyboard"


def test_a_model_written_command_waits_for_approval_in_the_console(
    page: Page, console_server, api, scripted
):
    draft = ManifestDraft(
        steps=[StepDraft(id="greet", command="echo approved-by-a-person", input="Say hi.")]
    )
    scripted.script("planning", draft)
    response = api.post("/api/plans", json={"goal": f"greet {uuid.uuid4().hex[:6]}"})
    run_id = response.json()["runId"]
    paused = wait_for_run(api, run_id)
    assert paused["status"] == "awaiting_review", paused
    sign_in(page, f"{console_server.url}/reviews")
    card = page.locator(f".review-card[data-run='{run_id}']")
    expect(card.locator("h3")).to_contain_text("Command approval")
    expect(card.locator("pre.commands")).to_contain_text("echo approved-by-a-person")
    screenshot(page, "command_approval")
    card.get_by_role("button", name="Approve").click()
    expect(page.locator("#notice")).to_contain_text(f"Approved: step greet of run {run_id}")
    report = wait_for_run(api, run_id)
    assert report["status"] == "completed", report
    assert "approved-by-a-person" in str(report["steps"]["greet"]["output"])


def test_untrusted_text_shows_as_text_under_a_content_security_policy(
    page: Page, console_server, api, markers
):
    payload = f"{XSS_SCRIPT}{XSS_IMG}"
    manifest = {"goal": f"goal {payload}", "steps": [python_step(payload, markers)]}
    manifest["steps"][0]["id"] = "hostile"
    run_id = api.post("/api/plans", json={"manifest": manifest}).json()["runId"]
    wait_for_run(api, run_id)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    violations: list[str] = []
    page.on(
        "console", lambda m: violations.append(m.text) if "Content Security" in m.text else None
    )
    sign_in(page, f"{console_server.url}/runs/{run_id}")
    output = page.locator("article#step-hostile pre.output")
    expect(output).to_contain_text(XSS_SCRIPT)
    expect(output).to_contain_text("<img src=x onerror=")
    expect(page.locator("#summary")).to_contain_text(payload)
    assert page.locator("main script, main img").count() == 0
    assert page.evaluate("window.__xss") is None and dialogs == []
    assert violations == []  # the console's own pages need nothing the policy forbids
    response = page.goto(f"{console_server.url}/runs/{run_id}")
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    # The same text in the list of runs (the key is kept for the tab's session).
    page.goto(f"{console_server.url}/")
    expect(page.locator(f"tr.run[data-run='{run_id}']")).to_contain_text(payload)
    assert page.evaluate("window.__xss") is None


def test_browser_tasks_are_listed_and_detailed_per_step(page: Page, console_server, api):
    task_id, answers = drive(api, 7, 2)
    assert answers[-1]["status"] == "completed"
    sign_in(page, f"{console_server.url}/tasks")
    row = page.locator(f"tr.task[data-task='{task_id}']")
    expect(row).to_contain_text("Press button 7 exactly 2 times")
    expect(row).to_contain_text("completed")
    screenshot(page, "tasks")
    row.get_by_role("link").click()
    first = page.locator("article[data-step='0']")
    expect(first).to_contain_text("click(7)")
    expect(first).to_contain_text("Target element 7")
    expect(first).to_contain_text("confidence 0.95")
    expect(first).to_contain_text("model asked yes")
    expect(first.locator("ul.observations li").first).to_be_visible()
    screenshot(page, "task")


def test_tenant_b_sees_none_of_tenant_a(page: Page, console_server, api, markers):
    run_id = api.post(
        "/api/plans", json={"manifest": {"steps": [python_step("mine", markers)]}}
    ).json()["runId"]
    wait_for_run(api, run_id)
    task_id, _ = drive(api, 3, 1)
    sign_in(page, f"{console_server.url}/", key="key-b")
    expect(page.locator("main")).to_contain_text("No plan runs yet")
    page.goto(f"{console_server.url}/tasks")
    expect(page.locator("main")).to_contain_text("No browser tasks yet")
    page.goto(f"{console_server.url}/reviews")
    expect(page.locator("main")).to_contain_text("Nothing is waiting for a person")
    page.goto(f"{console_server.url}/runs/{run_id}")
    expect(page.locator("main [role=alert]")).to_contain_text("404")
    page.goto(f"{console_server.url}/tasks/{task_id}")
    expect(page.locator("main [role=alert]")).to_contain_text("404")
    # A wrong key is asked for again.
    page.evaluate("sessionStorage.setItem('veriloop.apiKey', 'not-a-key')")
    page.goto(f"{console_server.url}/")
    expect(page.locator("#key-error")).to_contain_text("not valid")
