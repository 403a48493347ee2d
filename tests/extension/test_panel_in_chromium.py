"""The side panel with the keyboard and a screen reader, in a real Chromium (issue 45): Enter
starts a task (Shift+Enter is a new line), each step is announced in a live region, axe-core finds
no serious or critical violation, and a task on a chrome:// page offers no Resume."""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe
from extension_kit import Extension, Service, wait_final

from veriloop.runners.demo.run import SEARCH_PATIENT
from veriloop.runners.demo.server import DemoAppServer

pytestmark = pytest.mark.browser


def serious(panel) -> list:
    results = Axe().run(panel)
    return [
        (v["id"], [n["target"] for n in v["nodes"]][:3])
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def test_enter_starts_a_task_and_each_step_is_announced(
    extension: Extension, service: Service, demo_app: DemoAppServer
) -> None:
    extension.configure(service.url)
    page, tab_id = extension.open_app(demo_app.url)
    panel = extension.panel(tab_id)
    goal = panel.locator("#goal")
    goal.fill("first line")
    goal.press("Shift+Enter")
    assert goal.input_value() == "first line\n"  # a new line, nothing started
    assert (extension.record(tab_id) or {}).get("task") is None
    assert not serious(panel)

    goal.fill(SEARCH_PATIENT)
    goal.press("Enter")
    assert wait_final(panel) == "completed", extension.record(tab_id)["task"]["message"]
    progress = panel.locator("#progress")
    assert progress.get_attribute("aria-live") == "polite"
    assert (
        progress.text_content().startswith("Step ") and "Task completed." in progress.text_content()
    )
    assert not serious(panel)
    page.close()
    panel.close()


def test_a_task_on_a_chrome_page_offers_no_resume(extension: Extension, service: Service) -> None:
    extension.configure(service.url)
    page = extension.context.new_page()
    page.goto("chrome://version")
    tab_id = extension.worker.evaluate(
        "async () => (await chrome.tabs.query({})).find(t => t.url.startsWith('chrome://version')).id"
    )
    panel = extension.panel(tab_id)
    panel.fill("#goal", "Change the theme setting to Dark")
    panel.press("#goal", "Enter")
    assert wait_final(panel) == "paused"
    assert panel.is_hidden("#resume")
    page.close()
    panel.close()
