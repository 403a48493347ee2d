"""The extension in Chromium against a real `veriloop serve`: the demo tasks, judged by the demo
app's own data, then the ways a task gets interrupted."""

from __future__ import annotations

import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from extension_kit import (
    API_KEY,
    DOCS_IMAGES,
    Extension,
    Service,
    assert_each_step_once,
    chromium,
    free_port,
    start_task,
    task_in_new_tab,
    wait_final,
    wait_forgotten,
    wait_steps,
)
from playwright.sync_api import Playwright

from veriloop.extension_bundle import launch_with_extension, write_extension
from veriloop.llm.scripted import Fail, ScriptedModelServer
from veriloop.runners.demo.run import ADD_PATIENT, APP_CHECKS, DEMO_GOALS, SEARCH_PATIENT, app_state
from veriloop.runners.demo.server import DemoAppServer

pytestmark = pytest.mark.browser


def _jas_count(app: DemoAppServer) -> int:
    return sum(p["name"] == "Jas" for p in app_state(app.url)["patients"])


def test_the_demo_tasks_are_done_and_the_app_confirms_it(
    extension: Extension, service: Service, demo_app: DemoAppServer
) -> None:
    extension.configure(service.url)
    for goal in DEMO_GOALS:
        page, tab_id = extension.open_app(demo_app.url)
        panel = extension.panel(tab_id)
        start_task(panel, goal)
        assert wait_final(panel) == "completed", extension.record(tab_id)["task"]["message"]
        passed, detail = APP_CHECKS[goal](app_state(demo_app.url))
        assert passed, detail
        assert_each_step_once(extension.record(tab_id))
        if goal == ADD_PATIENT:
            # The deliberate no-op click: failed without a model call, then a correction.
            first, second = panel.locator("#steps > li").nth(0), panel.locator("#steps > li").nth(1)
            assert "no model call" in first.locator(".verdict").text_content()
            assert "(no_effect)" in first.locator(".verdict").text_content()
            assert first.locator(".target").text_content() == "“Patients”"
            assert "correction: alternative_element" in second.text_content()
            assert "model asked" in second.locator(".verdict").text_content()
            assert "tokens" in panel.text_content("#usage")
            panel.screenshot(path=str(DOCS_IMAGES / "extension_panel.png"), full_page=True)
        page.close()
        panel.close()
    assert _jas_count(demo_app) == 1


def test_a_wrong_api_key_is_a_plain_message_and_nothing_runs(
    extension: Extension, service: Service, demo_app: DemoAppServer, model: ScriptedModelServer
) -> None:
    extension.configure(service.url, api_key="not-the-key")
    calls = model.calls()
    with task_in_new_tab(extension, demo_app.url, ADD_PATIENT) as (_page, tab_id, panel):
        assert wait_final(panel) == "paused"
        assert "refused the API key (401" in panel.text_content("#message")
        assert model.calls() == calls and _jas_count(demo_app) == 0
        assert extension.record(tab_id)["task"]["steps"] == []
        # The right key, then Resume: the same task goes on from where it stopped.
        extension.configure(service.url)
        panel.click("#resume")
        assert wait_final(panel) == "completed"
        assert _jas_count(demo_app) == 1


def test_a_chrome_page_is_refused_in_the_panel_and_nothing_is_sent(
    extension: Extension, service: Service, model: ScriptedModelServer
) -> None:
    extension.configure(service.url)
    calls = model.calls()
    page = extension.context.new_page()
    page.goto("chrome://version")
    tab_id = extension.worker.evaluate(
        "async () => (await chrome.tabs.query({})).find(t => t.url.startsWith('chrome://version')).id"
    )
    panel = extension.panel(tab_id)
    start_task(panel, "Change the theme setting to Dark")
    assert wait_final(panel) == "paused"
    assert "does not let extensions run scripts" in panel.text_content("#message")
    assert model.calls() == calls
    panel.screenshot(
        path=str(DOCS_IMAGES / "extension_forbidden_page.png"),
        clip={"x": 0, "y": 0, "width": 420, "height": 180},
    )
    page.close()
    panel.close()


def test_a_burst_of_503s_is_retried_with_the_same_request(
    extension: Extension, service: Service, demo_app: DemoAppServer, model: ScriptedModelServer
) -> None:
    extension.configure(service.url)
    model.script("verification", *[Fail(503, "overloaded", retry_after_s=0.01)] * 3)
    with task_in_new_tab(extension, demo_app.url, SEARCH_PATIENT) as (_page, tab_id, panel):
        panel.wait_for_selector("#retry:not([hidden])", timeout=60000)
        assert "503" in panel.text_content("#retry")
        assert wait_final(panel) == "completed"
        assert APP_CHECKS[SEARCH_PATIENT](app_state(demo_app.url))[0]
        assert_each_step_once(extension.record(tab_id))


def test_the_task_survives_a_service_restart(
    extension: Extension, service: Service, demo_app: DemoAppServer
) -> None:
    extension.configure(service.url)
    with task_in_new_tab(extension, demo_app.url, ADD_PATIENT) as (_page, tab_id, panel):
        wait_steps(panel, 2)
        service.stop(signal.SIGKILL)
        time.sleep(1.5)  # the extension meets a closed port and backs off
        service.start()
        assert wait_final(panel) == "completed", extension.record(tab_id)["task"]["message"]
        assert _jas_count(demo_app) == 1
        assert_each_step_once(extension.record(tab_id))


def test_the_task_survives_a_service_worker_restart(
    extension: Extension, service: Service, demo_app: DemoAppServer
) -> None:
    extension.configure(service.url)
    with task_in_new_tab(extension, demo_app.url, ADD_PATIENT) as (_page, tab_id, panel):
        wait_steps(panel, 2)
        marker = extension.worker.evaluate("globalThis.veriloopTestMarker = Math.random()")
        cdp = extension.context.new_cdp_session(panel)
        cdp.send("ServiceWorker.enable")
        cdp.send("ServiceWorker.stopAllWorkers")
        panel.reload()  # the panel wakes the worker, which picks the task up from storage
        assert wait_final(panel) == "completed", extension.record(tab_id)["task"]["message"]
        assert extension.worker.evaluate("globalThis.veriloopTestMarker") != marker  # a new worker
        assert _jas_count(demo_app) == 1  # Save was never clicked twice
        assert_each_step_once(extension.record(tab_id))


def test_a_navigation_mid_task_is_followed_on_the_new_page(
    extension: Extension, service: Service, demo_app: DemoAppServer
) -> None:
    extension.configure(service.url)
    with task_in_new_tab(extension, demo_app.url, SEARCH_PATIENT) as (page, tab_id, panel):
        wait_steps(panel, 1)
        # Between two actions (the first one typed, its execution over), never in the middle of
        # one: a page torn down under a trusted keystroke is another test's subject.
        page.wait_for_function("() => document.querySelector('#search')?.value === 'Maria'")
        deadline = time.monotonic() + 30
        while extension.record(tab_id)["task"]["phase"] == "act" and time.monotonic() < deadline:
            time.sleep(0.02)
        page.goto(demo_app.url + "?moved")  # the user (or the page) goes elsewhere mid-task
        assert wait_final(panel) == "completed", extension.record(tab_id)["task"]["message"]
        assert APP_CHECKS[SEARCH_PATIENT](app_state(demo_app.url))[0]
        assert extension.record(tab_id)["task"]["url"].endswith("?moved")


def test_a_closed_tab_leaves_no_task_behind(
    extension: Extension, service: Service, demo_app: DemoAppServer
) -> None:
    extension.configure(service.url)
    with task_in_new_tab(extension, demo_app.url, ADD_PATIENT) as (page, tab_id, panel):
        wait_steps(panel, 1)
        page.close()
        # Its records go (a later tab may be given the same id); the service still has the task.
        wait_forgotten(extension, tab_id)
        panel.wait_for_selector("#task[hidden]", state="attached")


TRUSTED_PAGE = """<!doctype html><html><body>
<button id="go">Go</button>
<input id="name">
<input id="agree" type="checkbox">
<select id="colour"><option value="r">Red</option><option value="b">Blue</option></select>
<p id="log"></p>
<script>
  // Like a framework that ignores synthetic events: only trusted ones count.
  const log = [];
  const note = (entry) => { log.push(entry); document.getElementById("log").textContent = log.join(","); };
  document.getElementById("go").addEventListener("click", (e) => e.isTrusted && note("click"));
  const name = document.getElementById("name");
  name.addEventListener("input", (e) => e.isTrusted && note("input:" + name.value));
  name.addEventListener("keydown", (e) => e.isTrusted && e.key === "Enter" && note("enter"));
  const agree = document.getElementById("agree");
  agree.addEventListener("change", (e) => e.isTrusted && note("agree:" + agree.checked));
  document.getElementById("colour").addEventListener("change", (e) => note("colour:" + e.target.value));
</script></body></html>"""


def test_actions_reach_a_page_that_ignores_untrusted_events(extension: Extension) -> None:
    extension.context.route(
        "http://trusted.test/**",
        lambda route: route.fulfill(body=TRUSTED_PAGE, content_type="text/html"),
    )
    page, tab_id = extension.open_app("http://trusted.test/")
    worker = extension.worker
    worker.evaluate("id => veriloop.pageCall(id, 'snapshot', {wait: false})", tab_id)
    ids = page.evaluate(
        "() => Object.fromEntries([...document.querySelectorAll('[data-veriloop-id]')]"
        ".map(e => [e.id, Number(e.dataset.veriloopId)]))"
    )
    page.evaluate("() => document.getElementById('go').click()")  # synthetic: ignored by the page
    assert page.text_content("#log") == ""

    def run(action: dict) -> dict:
        return worker.evaluate("([id, a]) => veriloop.execute(id, a)", [tab_id, action])

    assert run({"kind": "click", "elementId": ids["go"]}) == {"ok": True}
    assert run({"kind": "set_value", "elementId": ids["name"], "text": "Jas"}) == {"ok": True}
    assert run({"kind": "press", "elementId": ids["name"], "text": "Enter"}) == {"ok": True}
    assert run({"kind": "set_value", "elementId": ids["agree"], "text": "true"}) == {"ok": True}
    assert run({"kind": "select_option", "elementId": ids["colour"], "text": "Blue"}) == {
        "ok": True
    }
    assert page.text_content("#log") == "click,input:Jas,enter,agree:true,colour:b"
    assert page.input_value("#name") == "Jas"
    missing = run({"kind": "click", "elementId": 999})
    assert missing["ok"] is False
    assert missing["clientVerification"] == {
        "elementFound": False,
        "selector": '[data-veriloop-id="999"]',
    }
    refused = run({"kind": "navigate", "text": "javascript:alert(1)"})
    assert refused["ok"] is False and "only http and https" in refused["error"]
    page.close()


def test_options_check_the_service_and_the_key_on_save(
    extension: Extension, service: Service
) -> None:
    options = extension.context.new_page()
    options.set_viewport_size({"width": 640, "height": 360})
    options.goto(f"chrome-extension://{extension.id}/options.html")

    def save(url: str, key: str) -> str:
        options.fill("#service-url", url)
        options.fill("#api-key", key)
        options.click("#save")
        options.wait_for_function(
            "() => !document.querySelector('#result').textContent.startsWith('Saved')"
        )
        return options.text_content("#result")

    closed = f"http://127.0.0.1:{free_port()}"
    assert save(closed, API_KEY) == f"Cannot reach {closed}: is veriloop serve running there?"
    assert save(service.url, "wrong") == "The service refused this API key."
    options.screenshot(path=str(DOCS_IMAGES / "extension_options.png"))
    assert save(service.url, API_KEY).startswith("Connected: veriloop service (sqlite)")
    stored = extension.worker.evaluate(
        "async () => (await chrome.storage.local.get('settings')).settings"
    )
    assert stored == {"serviceUrl": service.url, "apiKey": API_KEY}
    options.close()


@pytest.mark.parametrize(
    "answer",
    [
        b"<html>Bad gateway</html>",
        b'{"taskId": "t1", "stepIndex": 0, "action": "click(3)", "status": "executing"}',
        b'{"taskId": "t1", "stepIndex": 0, "action": "rm(3)", "status": "executing",'
        b' "parsedAction": {"kind": "rm", "elementId": 3}}',
    ],
    ids=["not-json", "no-parsed-action", "unknown-action"],
)
def test_a_service_answering_garbage_is_a_message_and_no_action(
    extension: Extension, demo_app: DemoAppServer, answer: bytes
) -> None:
    class Garbage(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    fake = ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    extension.configure(f"http://127.0.0.1:{fake.server_address[1]}")
    try:
        with task_in_new_tab(extension, demo_app.url, ADD_PATIENT) as (page, tab_id, panel):
            assert wait_final(panel) == "paused"
            message = panel.text_content("#message")
            assert "no action was taken" in message or "not JSON" in message, message
            assert extension.record(tab_id)["task"]["executedStep"] is None  # nothing executed
            assert page.is_visible("#new-patient") and not page.is_visible("#patient-name")
    finally:
        fake.shutdown()
        fake.server_close()


def test_a_task_whose_storage_was_lost_is_continued_from_the_service(
    extension: Extension, service: Service, demo_app: DemoAppServer
) -> None:
    extension.configure(service.url)
    with task_in_new_tab(extension, demo_app.url, ADD_PATIENT) as (_page, tab_id, panel):
        wait_steps(panel, 1)
        # Lost while nothing drives the task: a step in flight writes back the record it read
        # before the loss (the worker's read-modify-write), and the task simply goes on. A refused
        # key pauses it at its next request; the service still has it executing.
        extension.configure(service.url, api_key="not-the-key")
        assert wait_final(panel) == "paused", extension.record(tab_id)["task"]
        task_id = extension.record(tab_id)["task"]["taskId"]
        extension.worker.evaluate(
            "id => chrome.storage.local.remove([`tab:${id}`, `pending:${id}`])", tab_id
        )
        extension.configure(service.url)
        panel.reload()
        panel.wait_for_selector("#recover:not([hidden])", timeout=30000)
        assert panel.text_content("#recover-goal") == ADD_PATIENT
        panel.click("#recover-button")
        assert wait_final(panel) == "completed", extension.record(tab_id)["task"]["message"]
        assert extension.record(tab_id)["task"]["taskId"] == task_id  # the same task, continued
        assert _jas_count(demo_app) == 1


def test_a_task_is_continued_after_a_browser_restart(
    playwright: Playwright, service: Service, demo_app: DemoAppServer, tmp_path: Path
) -> None:
    # Its own browser on its own profile: the whole browser is closed and relaunched on it.
    folder = write_extension(tmp_path / "veriloop")

    def launch() -> Extension:
        context, extension_id = launch_with_extension(
            playwright, folder, tmp_path / "profile", executable_path=chromium()
        )
        return Extension(context, extension_id, folder)

    before = launch()
    try:
        before.configure(service.url)
        _page, old_tab_id = before.open_app(demo_app.url)
        old_panel = before.panel(old_tab_id)
        start_task(old_panel, ADD_PATIENT)
        wait_steps(old_panel, 2)
        mid_task = before.record(old_tab_id)["task"]
        assert mid_task["state"] == "running" and mid_task["stepIndex"] >= 1
    finally:
        before.context.close()  # the browser quits mid-task
    after = launch()
    try:
        assert after.id == before.id  # the same unpacked extension, the same storage
        _page, tab_id = after.open_app(demo_app.url)
        assert tab_id != old_tab_id  # Chrome gives the page a new tab: storage has nothing for it
        panel = after.panel(tab_id)
        panel.wait_for_selector("#recover:not([hidden])", timeout=30000)
        assert panel.text_content("#recover-goal") == ADD_PATIENT
        # The last session's tab records were forgotten before anything drove them (their ids
        # are gone or another page's now).
        wait_forgotten(after, old_tab_id)
        panel.click("#recover-button")
        assert wait_final(panel) == "completed", after.record(tab_id)["task"]["message"]
        assert after.record(tab_id)["task"]["taskId"] == mid_task["taskId"]  # continued, not anew
        assert _jas_count(demo_app) == 1  # Save was clicked once across both browsers
    finally:
        after.context.close()
