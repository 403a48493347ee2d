"""`veriloop plan demo` with the scripted playbook: judged by the project's own test suite.

The demo must show a step fixed by its corrective attempt and a step that claimed success while
its tests failed, was not allowed to complete, and was replaced by a replan.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from veriloop.cli import app
from veriloop.llm.scripted import ScriptedModelServer
from veriloop.runners.plan.demo import (
    PROJECT_DIR,
    SCRIPTED_MODEL,
    PlanDemoPlaybook,
    arun_plan_demo,
    run_test_suite,
)
from veriloop.schemas.plan_run import PlanRunReport


def _check(step, name):
    return next(c for c in step.checks if c.name == name)


def test_the_stub_project_fails_its_own_tests(tmp_path: Path) -> None:
    """Without the plan, the suite fails: the demo's exit status means something."""
    project = tmp_path / "p"
    shutil.copytree(PROJECT_DIR, project)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert "NotImplementedError" in done.stdout


def test_demo_fixes_one_step_and_replaces_the_one_that_lied(tmp_path: Path) -> None:
    playbook = PlanDemoPlaybook()
    with playbook.install(ScriptedModelServer()) as server:
        result = asyncio.run(
            arun_plan_demo(tmp_path / "report", keep=tmp_path / "work", model_server=server)
        )
        assert server.unscripted == [] and server.errors == []
        assert server.calls("replanning") == 1

    report = result.report
    assert result.scripted and result.model == SCRIPTED_MODEL
    assert report.status == "completed"
    assert result.suite_exit_code == 0 and result.exit_code == 0
    assert "21 passed" in result.suite_summary
    assert [s.status for s in report.steps.values()] == ["completed"] * 6

    # fixed on attempt 2: the first attempt's test run failed, the second passed
    delete = report.steps["delete_text"]
    assert [a.run_number for a in delete.attempts] == [1, 2]
    # its siblings run beside it on disjoint writes: none of their files is in its diff
    assert not _check(delete.attempts[0], "tests").passed
    assert all(c.passed for c in delete.attempts[0].checks if c.name != "tests")
    assert _check(delete.attempts[1], "tests").passed
    assert delete.verification_status == "verified"

    # claimed [SUCCESS] with failing tests: partial_pass, superseded, replanned
    [lied] = report.superseded
    assert lied.step_id == "undo_history" and lied.verification_status == "partial_pass"
    assert all(a.notes.startswith("[SUCCESS]") for a in lied.attempts)
    assert all(not _check(a, "tests").passed for a in lied.attempts)
    [replan] = report.replan_history
    assert replan.blocked == ["undo_history"]
    assert set(replan.replaced) == {"undo_history", "integrate", "release_review"}
    assert report.steps["undo_history"].verification_status == "verified"
    assert report.steps["release_review"].review["approved"] is True
    assert _check(report.steps["integrate"].attempts[0], "review").passed

    # the report says what happened, and that the model was scripted
    saved = PlanRunReport.model_validate_json((tmp_path / "report" / "report.json").read_text())
    assert saved.superseded[0].step_id == "undo_history"
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Scripted model" in html and "cost $0" in html
    assert "Not allowed to complete" in html and 'id="superseded-undo_history"' in html
    assert "Attempt 2" in html

    # the kept workspace passes its whole suite on its own
    assert (tmp_path / "work" / "textbuffer" / "history.py").read_text().count("_redo.clear()") == 1


def test_plan_demo_command_exits_with_the_test_suites_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    result = CliRunner().invoke(app, ["plan", "demo", "--report", "rep"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "scripted playbook" in result.output
    assert "delete_text attempt 1: FAIL tests" in result.output
    assert "fixed by a corrective attempt: delete_text (2 attempts)" in result.output
    assert "not allowed to complete: undo_history (partial_pass" in result.output
    assert "21 passed" in result.output and "-> exit 0" in result.output
    assert (tmp_path / "rep" / "report.html").is_file()


def test_the_demo_suite_runs_without_the_callers_secrets(tmp_path, monkeypatch) -> None:
    # The suite runs code the plan's steps wrote: it must not see the operator's keys.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator-secret")
    (tmp_path / "test_env.py").write_text(
        "import os\n\ndef test_no_secret():\n    assert 'OPENAI_API_KEY' not in os.environ\n"
    )
    exit_code, output = run_test_suite(tmp_path, timeout_s=120)
    assert exit_code == 0, output
