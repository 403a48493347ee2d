"""The panel's Stop in a real Chromium against a real `veriloop serve` (issue 45): the task stops
here and is cancelled on the service, so no tab on the same site offers to continue it."""

from __future__ import annotations

import httpx
import pytest
from extension_kit import API_KEY, DOCS_IMAGES, Extension, Service, task_in_new_tab, wait_steps

from veriloop.runners.demo.run import ADD_PATIENT
from veriloop.runners.demo.server import DemoAppServer

pytestmark = pytest.mark.browser


def test_stop_cancels_the_task_and_nothing_offers_to_continue_it(
    extension: Extension, service: Service, demo_app: DemoAppServer
) -> None:
    extension.configure(service.url)
    with task_in_new_tab(extension, demo_app.url, ADD_PATIENT) as (_page, tab_id, panel):
        wait_steps(panel, 2)
        task_id = extension.record(tab_id)["task"]["taskId"]
        panel.click("#stop")
        panel.wait_for_function(
            "() => document.querySelector('#history .badge')?.textContent === 'cancelled'",
            timeout=60_000,
        )
        record = extension.record(tab_id)
        assert record["task"] is None
        assert record["history"][0]["taskId"] == task_id
        assert "no more steps" in record["history"][0]["message"]
        panel.screenshot(path=str(DOCS_IMAGES / "extension_stopped.png"), full_page=True)

    headers = {"X-API-Key": API_KEY}
    detail = httpx.get(f"{service.url}/api/tasks/{task_id}", headers=headers).json()
    assert detail["status"] == "cancelled"
    # A new tab on the same site: the service has no unfinished task to offer.
    _page, other_tab = extension.open_app(demo_app.url)
    panel = extension.panel(other_tab)
    panel.wait_for_selector("#start-form:not([hidden])")
    panel.wait_for_timeout(1500)  # the recovery lookup has answered by now
    assert panel.is_hidden("#recover")
    install_id = extension.worker.evaluate(
        "async () => (await chrome.storage.local.get('installId')).installId"
    )
    session = f"veriloop-ext-{install_id}"
    active = httpx.get(
        f"{service.url}/api/session/{session}/task/active",
        params={"url": demo_app.url},
        headers=headers,
    )
    assert active.status_code == 404
