"""The extension in Chromium against a real `veriloop serve`: the demo tasks, judged by the demo
app's own data, then the ways a task gets interrupted."""

from __future__ import annotations

import signal
import time

import pytest
from extension_kit import DOCS_IMAGES, Extension, Service, start_task, steps, wait_final, wait_steps

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
        assert wait_final(panel) == "completed", extension.record(tab_id)["task"]
        passed, detail = APP_CHECKS[goal](app_state(demo_app.url))
        assert passed, detail
        record = extension.record(tab_id)
        assert steps(record) == list(range(len(record["task"]["steps"])))
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
    page, tab_id = extension.open_app(demo_app.url)
    panel = extension.panel(tab_id)
    start_task(panel, ADD_PATIENT)
    assert wait_final(panel) == "paused"
    assert "refused the API key (401" in panel.text_content("#message")
    assert model.calls() == calls and _jas_count(demo_app) == 0
    assert extension.record(tab_id)["task"]["steps"] == []
    # The right key, then Resume: the same task goes on from where it stopped.
    extension.configure(service.url)
    panel.click("#resume")
    assert wait_final(panel) == "completed"
    assert _jas_count(demo_app) == 1
    page.close()
    panel.close()


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
    panel.screenshot(path=str(DOCS_IMAGES / "extension_forbidden_page.png"))
    page.close()
    panel.close()


def test_a_burst_of_503s_is_retried_with_the_same_request(
    extension: Extension, service: Service, demo_app: DemoAppServer, model: ScriptedModelServer
) -> None:
    extension.configure(service.url)
    model.script("verification", *[Fail(503, "overloaded", retry_after_s=0.01)] * 3)
    page, tab_id = extension.open_app(demo_app.url)
    panel = extension.panel(tab_id)
    start_task(panel, SEARCH_PATIENT)
    panel.wait_for_selector("#retry:not([hidden])", timeout=60000)
    assert "503" in panel.text_content("#retry")
    assert wait_final(panel) == "completed"
    assert APP_CHECKS[SEARCH_PATIENT](app_state(demo_app.url))[0]
    record = extension.record(tab_id)
    assert steps(record) == list(range(len(record["task"]["steps"])))  # no step twice
    page.close()
    panel.close()


def test_the_task_survives_a_service_restart(
    extension: Extension, service: Service, demo_app: DemoAppServer
) -> None:
    extension.configure(service.url)
    page, tab_id = extension.open_app(demo_app.url)
    panel = extension.panel(tab_id)
    start_task(panel, ADD_PATIENT)
    wait_steps(panel, 2)
    service.stop(signal.SIGKILL)
    time.sleep(1.5)  # the extension meets a closed port and backs off
    service.start()
    assert wait_final(panel) == "completed", extension.record(tab_id)["task"]
    assert _jas_count(demo_app) == 1
    record = extension.record(tab_id)
    assert steps(record) == list(range(len(record["task"]["steps"])))
    page.close()
    panel.close()


def test_the_task_survives_a_service_worker_restart(
    extension: Extension, service: Service, demo_app: DemoAppServer
) -> None:
    extension.configure(service.url)
    page, tab_id = extension.open_app(demo_app.url)
    panel = extension.panel(tab_id)
    start_task(panel, ADD_PATIENT)
    wait_steps(panel, 2)
    marker = extension.worker.evaluate("globalThis.veriloopTestMarker = Math.random()")
    cdp = extension.context.new_cdp_session(panel)
    cdp.send("ServiceWorker.enable")
    cdp.send("ServiceWorker.stopAllWorkers")
    panel.reload()  # the panel wakes the worker, which picks the task up from storage
    assert wait_final(panel) == "completed", extension.record(tab_id)["task"]
    assert extension.worker.evaluate("globalThis.veriloopTestMarker") != marker  # a new worker
    assert _jas_count(demo_app) == 1  # Save was never clicked twice
    record = extension.record(tab_id)
    assert steps(record) == list(range(len(record["task"]["steps"])))
    page.close()
    panel.close()


def test_a_closed_tab_pauses_its_task(
    extension: Extension, service: Service, demo_app: DemoAppServer
) -> None:
    extension.configure(service.url)
    page, tab_id = extension.open_app(demo_app.url)
    panel = extension.panel(tab_id)
    start_task(panel, ADD_PATIENT)
    wait_steps(panel, 1)
    page.close()
    panel.wait_for_function(
        "() => document.querySelector('#status')?.textContent === 'paused'", timeout=30000
    )
    assert "tab was closed" in panel.text_content("#message")
    panel.close()
