"""Availability said plainly in the extension (issue 45), in a real Chromium: against a service
with no model the options page does not say "Connected" and names the fix, and a task pauses at
once with that reason instead of being retried as an outage; against a working service the options
page names the model and the plan-shell policy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from extension_kit import API_KEY, Extension, Service, start_task, wait_final

from veriloop.runners.demo.run import ADD_PATIENT
from veriloop.runners.demo.server import DemoAppServer

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def modelless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = Service(tmp_path_factory.mktemp("modelless"), None).start()
    yield running
    running.stop()


def save_options(extension: Extension, url: str) -> str:
    options = extension.context.new_page()
    options.goto(f"chrome-extension://{extension.id}/options.html")
    options.fill("#service-url", url)
    options.fill("#api-key", API_KEY)
    options.click("#save")
    options.wait_for_function(
        "() => !document.querySelector('#result').textContent.startsWith('Saved')"
    )
    text = options.text_content("#result")
    options.close()
    return text


def test_a_service_without_a_model_is_said_plainly_and_not_retried(
    extension: Extension, modelless: Service, service: Service, demo_app: DemoAppServer
) -> None:
    said = save_options(extension, modelless.url)
    assert not said.startswith("Connected") and "has no model" in said
    assert "veriloop serve --scripted" in said

    page, tab_id = extension.open_app(demo_app.url)
    panel = extension.panel(tab_id)
    start_task(panel, ADD_PATIENT)
    assert wait_final(panel, timeout_s=15) == "paused"
    task = extension.record(tab_id)["task"]
    assert "no model" in task["message"] and task["retry"] is None
    assert panel.is_hidden("#retry")
    page.close()
    panel.close()

    said = save_options(extension, service.url)
    assert said.startswith("Connected: veriloop service (sqlite); model: scripted")
    assert "plan shell steps: off" in said
