"""`veriloop run` against a fixture page with the scripted model; the report's HTML opens in Chromium."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from veriloop.cli import app
from veriloop.engines.completion import change_line_numbers
from veriloop.llm.scripted import ScriptedModelServer, ScriptedRequest
from veriloop.runners.browser.agents import HttpAgent
from veriloop.runners.browser.client import ChromiumBrowser
from veriloop.runners.browser.loop import run_task
from veriloop.schemas.outputs import (
    ActionChoice,
    CompletionAudit,
    PlannedStep,
    PlanOutput,
    RefinedStep,
    SemanticVerdict,
)

pytestmark = pytest.mark.browser

GOAL = "Subscribe to the newsletter"


def _tag(request: ScriptedRequest, html_id: str) -> str:
    """The last start tag with ``id=html_id`` in the request (the current page excerpt comes last)."""
    return re.findall(rf'<[^>]*\bid="{html_id}"[^>]*>', request.text)[-1]


def _element(request: ScriptedRequest, html_id: str) -> int:
    return int(re.search(r'data-veriloop-id="(\d+)"', _tag(request, html_id)).group(1))


def _act(request: ScriptedRequest) -> ActionChoice:
    if "checked" in _tag(request, "subscribe"):
        return ActionChoice(thought="save", action=f"click({_element(request, 'save')})")
    return ActionChoice(
        thought="tick the box", action=f'setValue({_element(request, "subscribe")}, "true")'
    )


def _script(server: ScriptedModelServer) -> None:
    server.on(
        "planning",
        lambda _r: PlanOutput(steps=[PlannedStep(description="Tick Subscribe and save")]),
    )
    server.on("refinement", lambda _r: RefinedStep(instruction="Tick Subscribe, then press Save"))
    server.on("action", _act)
    server.on(
        "verification",
        lambda r: SemanticVerdict(
            action_succeeded=True,
            task_completed="'Subscribed'" in r.text,
            confidence=0.9,
            reason="ok",
            evidence=change_line_numbers(r.text, "'Subscribed'"),
        ),
    )
    server.on(
        "audit",
        lambda r: CompletionAudit(
            goal_met="'Subscribed'" in r.text, confidence=0.9, reason="the page says so"
        ),
    )


def _veriloop(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "veriloop", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **env},
    )


def test_run_writes_a_report_that_opens_in_chromium(
    scripted_model: ScriptedModelServer, pages_url: str, tmp_path: Path, browser: ChromiumBrowser
) -> None:
    _script(scripted_model)
    report = tmp_path / "report"
    # A real process: Playwright's sync API allows one browser driver per thread, and this is the real entry point.
    done = _veriloop("run", GOAL, "--url", f"{pages_url}/subscribe.html", "--report", str(report))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "step  1" in done.stdout and "completed" in done.stdout
    assert f"model gpt-4.1-mini on an OpenAI-compatible server at {scripted_model.base_url}" in (
        done.stdout
    )
    assert re.search(r'-> click\(\d+\) "Save"', done.stdout)  # the action's target, by its name

    data = json.loads((report / "report.json").read_text())
    run = data["runs"][0]
    assert run["status"] == "completed"
    assert [s["action"] for s in run["steps"]][-1] == "finish()"
    assert run["steps"][1]["verification"]["success"] is True
    assert run["totalUsage"]["calls"] == scripted_model.calls()
    assert run["steps"][-2]["target"] == "Save"
    assert data["model"]["model"] == "gpt-4.1-mini" and data["model"]["scripted"] is False

    session = browser.new_session()
    try:
        session.page.goto((report / "report.html").as_uri())
        assert session.page.locator("article.step").count() == len(run["steps"])
        images = session.page.locator("article.step img")
        assert images.count() == len(run["steps"])
        widths = images.evaluate_all("imgs => imgs.map(i => i.complete && i.naturalWidth)")
        assert all(width and width > 100 for width in widths)  # the inlined screenshots decode
    finally:
        session.close()


def test_run_fails_with_exit_1_and_still_writes_its_report(
    scripted_model: ScriptedModelServer, pages_url: str, tmp_path: Path
) -> None:
    _script(scripted_model)
    done = _veriloop(
        "run",
        GOAL,
        "--url",
        f"{pages_url}/subscribe.html",
        "--max-steps",
        "1",
        "--no-screenshots",
        cwd=tmp_path,
        COLUMNS="",  # piped, as in CI logs: rich would wrap at 80 columns
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "budget_exhausted" in done.stdout
    # No --report: a new run folder under veriloop-runs/, its path printed.
    (folder,) = (tmp_path / "veriloop-runs").iterdir()
    assert folder.name.endswith("-subscribe-to-the-newsletter")
    assert f"report: {folder / 'report.html'}" in done.stdout
    assert json.loads((folder / "report.json").read_text())["runs"][0]["status"] == (
        "budget_exhausted"
    )
    step_line = next(line for line in done.stdout.splitlines() if line.startswith("step  1"))
    assert "agent" in step_line and len(step_line) > 80  # one line per step, not hard-wrapped


def test_run_without_a_model_provider_says_so(pages_url: str) -> None:
    outcome = CliRunner().invoke(app, ["run", GOAL, "--url", f"{pages_url}/subscribe.html"])
    assert outcome.exit_code == 2
    assert "OPENAI_API_KEY" in outcome.output


def test_python_dash_m_veriloop_is_the_cli() -> None:
    done = _veriloop("--help")
    assert done.returncode == 0
    assert all(command in done.stdout for command in ("run", "serve", "demo"))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_serve_then_run_against_it_over_http(
    scripted_model: ScriptedModelServer, pages_url: str, tmp_path: Path, browser: ChromiumBrowser
) -> None:
    _script(scripted_model)
    port = _free_port()
    service = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "veriloop",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(tmp_path / "data"),
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and service.poll() is None:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert service.poll() is None, service.stderr.read()
        agent = HttpAgent(base)
        session = browser.new_session()
        try:
            result = run_task(
                GOAL, f"{pages_url}/subscribe.html", session=session, agent=agent, screenshots=False
            )
        finally:
            session.close()
            agent.close()
    finally:
        service.terminate()
        service.wait(timeout=30)
    assert result.status == "completed", result.error
    assert result.steps[-1].action == "finish()"
    # The tasks live in the data directory, not in the folder serve was started from.
    assert (tmp_path / "data" / "veriloop.sqlite").is_file()
    assert not list(tmp_path.glob("*.sqlite"))
    # Tokens per step come from the service's task record and add up to what the model served.
    assert (
        sum(sum(u["calls"] for u in step.usage.values()) for step in result.steps)
        == scripted_model.calls()
    )


def test_run_model_flags_route_each_purpose_and_print_usage_per_model(
    scripted_model: ScriptedModelServer, pages_url: str
) -> None:
    _script(scripted_model)
    done = _veriloop(
        "run", GOAL, "--url", f"{pages_url}/subscribe.html", "--no-screenshots",
        "--model", "gpt-4.1", "--model", "verification=o4-mini", "--model", "action=local-actor",
        "--reasoning-effort", "action=low",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    carried = {
        (r.purpose, r.body["model"], r.body.get("reasoning_effort"))
        for r in scripted_model.requests
    }
    assert carried == {
        ("planning", "gpt-4.1", None),
        ("refinement", "gpt-4.1", None),
        ("action", "local-actor", "low"),
        ("verification", "o4-mini", "high"),
        ("audit", "gpt-4.1", None),  # the finish audit: the default model unless --model audit=...
    }
    rows = [line.split("│")[1:3] for line in done.stdout.splitlines() if line.count("│") == 7]
    assert {(p.strip(), m.strip()) for p, m in rows} == {
        ("planning", "gpt-4.1"),
        ("refinement", "gpt-4.1"),
        ("action", "local-actor"),
        ("verification", "o4-mini"),
        ("verification", "gpt-4.1"),  # the audit's call, counted as verification cost
    }


def test_run_rejects_an_unknown_purpose_before_starting(
    scripted_model: ScriptedModelServer, pages_url: str
) -> None:
    outcome = CliRunner().invoke(
        app, ["run", GOAL, "--url", f"{pages_url}/subscribe.html", "--model", "verifcation=o4-mini"]
    )
    assert outcome.exit_code == 2
    assert "verifcation" in outcome.output and "Context.purposes" in outcome.output
    assert scripted_model.requests == []
