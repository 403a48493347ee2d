"""The demo end to end with the scripted model: judged by the app's data, never by the agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from veriloop.engines.completion import change_line_numbers
from veriloop.llm.scripted import ScriptedModelServer, ScriptedRequest
from veriloop.runners.browser.client import ChromiumBrowser
from veriloop.runners.demo.playbook import DemoPlaybook
from veriloop.runners.demo.run import ADD_PATIENT, DEMO_GOALS, run_demo
from veriloop.schemas.outputs import CompletionAudit, SemanticVerdict

pytestmark = pytest.mark.browser


def test_demo_completes_and_the_app_confirms_it(tmp_path: Path, browser: ChromiumBrowser) -> None:
    playbook = DemoPlaybook()
    verification_calls_after_step: list[int] = []
    with playbook.install(ScriptedModelServer()) as server:
        result = run_demo(
            tmp_path / "report",
            model_server=server,
            browser=browser,
            on_step=lambda _step: verification_calls_after_step.append(
                server.calls("verification")
            ),
        )
        assert server.unscripted == [] and server.errors == []

    assert [check.goal for check in result.checks] == list(DEMO_GOALS)
    assert all(check.passed for check in result.checks), result.checks
    assert result.exit_code == 0
    assert [run.status for run in result.runs] == ["completed"] * 3

    # The deliberate mistake: clicking the Patients tab that is already open.
    add = result.runs[0]
    mistake = next(
        i for i, step in enumerate(add.steps) if step.thought.startswith("Deliberate no-op")
    )
    caught = add.steps[mistake + 1]
    assert caught.verification["success"] is False
    assert caught.verification["failureCategory"] == "no_effect"
    assert "verification" not in caught.usage  # judged without a model call
    calls_before = verification_calls_after_step[mistake]
    assert verification_calls_after_step[mistake + 1] == calls_before
    # ...then corrected: the next action is a different element, and it worked.
    assert caught.action != add.steps[mistake].action
    assert add.steps[mistake + 2].verification["success"] is True

    assert result.report is not None and result.report.is_file()
    assert len(list((tmp_path / "report" / "screenshots").glob("*.png"))) == sum(
        len(r.steps) for r in result.runs
    )


class _ClaimsSuccessEarly(DemoPlaybook):
    """A consistent liar: says the patient is added as soon as the name is typed (before Save),
    citing the changed field, and its finish audit agrees."""

    def verify(self, request: ScriptedRequest) -> SemanticVerdict:
        return SemanticVerdict(
            action_succeeded=True,
            task_completed="Jas" in request.text,
            confidence=0.95,
            reason="The name is there, so the patient is added",
            evidence=change_line_numbers(request.text, "Jas"),
        )

    def audit(self, request: ScriptedRequest) -> CompletionAudit:
        return CompletionAudit(goal_met="Jas" in request.text, confidence=0.95, reason="typed")


def test_demo_exit_status_comes_from_the_app_not_the_agent(
    tmp_path: Path, browser: ChromiumBrowser
) -> None:
    with _ClaimsSuccessEarly().install(ScriptedModelServer()) as server:
        result = run_demo(
            tmp_path / "report", goals=[ADD_PATIENT], model_server=server, browser=browser
        )
    assert result.runs[0].status == "completed"  # the agent believed its model...
    assert result.checks[0].passed is False  # ...but the app has no patient Jas
    assert result.exit_code == 1
