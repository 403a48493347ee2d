"""Two MiniWoB++ tasks through the extension, judged by the environment's own reward."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from extension_kit import Extension, Service, start_task, wait_final

from veriloop.llm.scripted import ScriptedModelServer
from veriloop.runners.miniwob.environment import (
    MiniWobServer,
    end_episode,
    episode_state,
    start_episode,
    wait_for_task,
)
from veriloop.runners.miniwob.scripted import MiniWobPlaybook

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def miniwob_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with MiniWobPlaybook().install(ScriptedModelServer()) as model:
        running = Service(tmp_path_factory.mktemp("miniwob-service"), model.base_url).start()
        yield running
        running.stop()


@pytest.mark.parametrize("task", ["click-button", "enter-text"])
def test_a_miniwob_task_through_the_extension(
    extension: Extension, miniwob_service: Service, task: str
) -> None:
    extension.configure(miniwob_service.url)
    with MiniWobServer() as miniwob:
        page, tab_id = extension.open_app(miniwob.task_url(task))
        wait_for_task(page)
        goal = start_episode(page, f"extension:{task}:0")
        panel = extension.panel(tab_id)
        page.bring_to_front()  # the episode's timers run in the active tab
        start_task(panel, goal)
        status = wait_final(panel, 60)
        state = episode_state(page)
        end_episode(page)
        record = extension.record(tab_id)["task"]
        page.close()
        panel.close()
    assert state.success, (state, record["message"], [s["action"] for s in record["steps"]])
    assert status == "completed", record["message"]
