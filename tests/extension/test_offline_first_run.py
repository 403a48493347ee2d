"""An offline first run (issue 45), as the README tells a new user: ``veriloop serve --scripted``
(no model key) and ``veriloop demo-app``, both from the command line; the extension says the
model is scripted, does a demo task that the app's own data confirms, and the console labels the
service scripted on every page. Real processes, real Chromium."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from extension_kit import DOCS_IMAGES, Extension, free_port, start_task, wait_final

from veriloop.runners.demo.run import ADD_PATIENT, APP_CHECKS, app_state

pytestmark = pytest.mark.browser


def command(*args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VERILOOP_"))}
    return subprocess.Popen(
        [sys.executable, "-m", "veriloop", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, process.stdout.read()
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"{url} did not answer"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(service URL, demo app URL), each started by its CLI command."""
    data = tmp_path_factory.mktemp("offline")
    service_port, app_port = free_port(), free_port()
    service = command("serve", "--scripted", "--port", str(service_port), "--data-dir", str(data))
    app = command("demo-app", "--port", str(app_port))
    try:
        service_url, app_url = f"http://127.0.0.1:{service_port}", f"http://127.0.0.1:{app_port}/"
        wait_for(f"{service_url}/healthz", service)
        wait_for(app_url, app)
        yield service_url, app_url
    finally:
        for process in (service, app):
            process.terminate()
            process.wait(timeout=30)
        said = service.stdout.read()
        assert "scripted model on http://127.0.0.1:" in said and "not a real model" in said


def test_serve_scripted_and_demo_app_run_a_demo_task_offline(
    extension: Extension, offline: tuple[str, str]
) -> None:
    service_url, app_url = offline
    health = httpx.get(f"{service_url}/healthz").json()
    assert health["model"]["scripted"] is True and health["model"]["configured"] is True

    extension.configure(service_url, api_key="")
    options = extension.context.new_page()
    options.goto(f"chrome-extension://{extension.id}/options.html")
    options.fill("#service-url", service_url)
    options.click("#save")
    options.wait_for_function(
        "() => document.querySelector('#result').textContent.startsWith('Connected')"
    )
    assert "model: scripted" in options.text_content("#result")
    options.close()

    page, tab_id = extension.open_app(app_url)
    panel = extension.panel(tab_id)
    panel.wait_for_selector("#scripted:not([hidden])")
    start_task(panel, ADD_PATIENT)
    assert wait_final(panel) == "completed", extension.record(tab_id)["task"]["message"]
    passed, detail = APP_CHECKS[ADD_PATIENT](app_state(app_url))
    assert passed, detail
    panel.screenshot(path=str(DOCS_IMAGES / "extension_scripted.png"), full_page=True)
    task_id = extension.record(tab_id)["task"]["taskId"]

    console = extension.context.new_page()
    for path in ("/", "/tasks", f"/tasks/{task_id}"):
        console.goto(f"{service_url}{path}")
        assert "Scripted model" in console.text_content(".service-scripted")
    page.close()
    panel.close()
    console.close()
