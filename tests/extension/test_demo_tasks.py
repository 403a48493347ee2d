"""The three demo tasks through the extension, judged by the demo app's own data."""

from __future__ import annotations

import pytest
from extension_kit import DOCS_IMAGES, Extension, Service, start_task, wait_final

from veriloop.runners.demo.run import APP_CHECKS, DEMO_GOALS, app_state
from veriloop.runners.demo.server import DemoAppServer

pytestmark = pytest.mark.browser


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
        if goal == DEMO_GOALS[0]:
            panel.screenshot(path=str(DOCS_IMAGES / "extension_panel.png"), full_page=True)
        page.close()
        panel.close()
