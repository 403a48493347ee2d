"""The side panel's tasks in a real Chromium: an earlier task opens with its steps, a failed step
quotes the error the page showed, and tasks of tabs that are gone leave the panel's storage when
a worker starts (a closed tab's: test_in_chromium.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from extension_kit import (
    Extension,
    Service,
    start_task,
    task_in_new_tab,
    wait_final,
    wait_forgotten,
)

from veriloop.llm.scripted import ScriptedModelServer, ScriptedRequest
from veriloop.runners.demo.playbook import DemoPlaybook, PageExcerpt
from veriloop.runners.demo.run import DARK_THEME, SEARCH_PATIENT
from veriloop.runners.demo.server import DemoAppServer
from veriloop.schemas.outputs import (
    ActionChoice,
    CompletionAudit,
    CorrectionChoice,
    PlannedStep,
    PlanOutput,
    PlanValidation,
    RefinedStep,
    SemanticVerdict,
)

pytestmark = pytest.mark.browser
EMPTY_SAVE = "Save a new patient without a name"
REFUSAL = "Full name is required"
"""What the demo app's script says (role=alert) to an empty Save, once the browser's own check
of the required field is off."""


class EmptySave:
    """The demo's playbook, and one more goal: save the New Patient form empty, which the app
    refuses on the page; the verdict on that click is a failure."""

    def __init__(self) -> None:
        self.demo = DemoPlaybook()

    def install(self, server: ScriptedModelServer) -> ScriptedModelServer:
        self.demo.install(server)
        answers: dict[str, tuple[Callable, Callable]] = {
            "planning": (self.demo.plan, self.plan),
            "refinement": (self.demo.refine, self.refine),
            "action": (self.demo.act, self.act),
            "verification": (self.demo.verify, self.verify),
            "audit": (self.demo.audit, self.audit),
            "correction": (self.demo.correct, self.correct),
            "replanning": (self.demo.replan, self.replan),
        }
        for purpose, (demo, ours) in answers.items():
            server.on(purpose, lambda r, demo=demo, ours=ours: (ours if mine(r) else demo)(r))
        return server

    def plan(self, _r: ScriptedRequest) -> PlanOutput:
        return PlanOutput(steps=[PlannedStep(description="Open the form and save it empty")])

    def refine(self, _r: ScriptedRequest) -> RefinedStep:
        return RefinedStep(instruction="Open the New Patient form, then click Save")

    def act(self, request: ScriptedRequest) -> ActionChoice:
        page = PageExcerpt(request)
        if page.value("patient-name") is None:
            return ActionChoice(thought="open the form", action=f"click({page.id('new-patient')})")
        return ActionChoice(thought="save it as it is", action=f"click({page.id('save-patient')})")

    def verify(self, request: ScriptedRequest) -> SemanticVerdict:
        refused = REFUSAL in request.text
        return SemanticVerdict(
            action_succeeded=not refused,
            task_completed=False,
            confidence=0.9,
            reason="the form refused to save" if refused else "the form opened",
        )

    def audit(self, _r: ScriptedRequest) -> CompletionAudit:
        return CompletionAudit(goal_met=False, confidence=0.9, reason="nothing was saved")

    def correct(self, _r: ScriptedRequest) -> CorrectionChoice:
        return CorrectionChoice(strategy="retry_with_delay", thought="try once more")

    def replan(self, _r: ScriptedRequest) -> PlanValidation:
        return PlanValidation(valid=True, minor_modifications_only=True)


def mine(request: ScriptedRequest) -> bool:
    """The request is about EMPTY_SAVE (the user's goal line, as the demo's playbook reads it)."""
    return f"User goal: {EMPTY_SAVE}" in request.text


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    with EmptySave().install(ScriptedModelServer()) as server:
        yield server


def test_an_earlier_task_opens_with_its_steps(
    extension: Extension, service: Service, demo_app: DemoAppServer
) -> None:
    extension.configure(service.url)
    with task_in_new_tab(extension, demo_app.url, SEARCH_PATIENT) as (_page, tab_id, panel):
        assert wait_final(panel) == "completed"
        first = extension.record(tab_id)["task"]
        start_task(panel, DARK_THEME)  # a follow-up: the first task becomes an earlier one

        earlier = panel.locator("#history details").first
        earlier.locator("summary").wait_for()
        assert SEARCH_PATIENT in earlier.locator("summary").inner_text()
        assert not earlier.locator("li.step").first.is_visible()  # closed until asked
        earlier.locator("summary").click()
        steps = earlier.locator("li.step")
        assert steps.count() == len(first["steps"])
        assert [steps.nth(i).locator("code").inner_text() for i in range(steps.count())] == [
            s["action"] for s in first["steps"]
        ]
        assert "✓ worked" in steps.first.inner_text()
        # It stays open while the panel follows the running task.
        assert wait_final(panel) == "completed"
        assert earlier.evaluate("d => d.open") and steps.first.is_visible()


def test_a_failed_step_quotes_the_page_s_error(
    extension: Extension, service: Service, demo_app: DemoAppServer
) -> None:
    extension.configure(service.url)
    page, tab_id = extension.open_app(demo_app.url)
    page.evaluate("document.querySelector('#patient-name').required = false")
    panel = extension.panel(tab_id)
    start_task(panel, EMPTY_SAVE)
    refused = panel.locator("#steps li.step .verdict.bad", has_text="did not work")
    refused.first.wait_for(timeout=60_000)
    assert f"the page says “{REFUSAL}”" in refused.first.inner_text()
    panel.click("#stop")
    page.close()
    panel.close()


def test_a_starting_worker_forgets_the_tasks_of_tabs_that_are_gone(
    extension: Extension, service: Service, demo_app: DemoAppServer
) -> None:
    extension.configure(service.url)
    with task_in_new_tab(extension, demo_app.url, SEARCH_PATIENT) as (_page, tab_id, panel):
        assert wait_final(panel) == "completed"
        gone = 987654  # a tab closed while no worker ran
        extension.worker.evaluate(
            """id => chrome.storage.local.set({
                [`tab:${id}`]: {tabId: id, task: {taskId: "t", goal: "old", state: "running", steps: []},
                                history: []},
                [`pending:${id}`]: {requestId: "r", body: {}},
            })""",
            gone,
        )
        cdp = extension.context.new_cdp_session(panel)
        cdp.send("ServiceWorker.enable")
        cdp.send("ServiceWorker.stopAllWorkers")
        panel.reload()  # the panel wakes a new worker
        wait_forgotten(extension, gone)
        assert extension.record(tab_id)["task"]["state"] == "completed"  # a live tab's task stays
