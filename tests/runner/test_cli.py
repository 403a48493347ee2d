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
from veriloop.runners.agents import HttpAgent
from veriloop.runners.browser import ChromiumBrowser
from veriloop.runners.loop import run_task
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


def _veriloop(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "veriloop", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "COLUMNS": "200"},
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

    data = json.loads((report / "report.json").read_text())
    run = data["runs"][0]
    assert run["status"] == "completed"
    assert [s["action"] for s in run["steps"]][-1] == "finish()"
    assert run["steps"][1]["verification"]["success"] is True
    assert run["totalUsage"]["calls"] == scripted_model.calls()

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


def test_run_fails_with_exit_1_when_the_task_does_not_complete(
    scripted_model: ScriptedModelServer, pages_url: str
) -> None:
    _script(scripted_model)
    done = _veriloop(
        "run", GOAL, "--url", f"{pages_url}/subscribe.html", "--max-steps", "1", "--no-screenshots"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "budget_exhausted" in done.stdout


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
            "--database-url",
            f"sqlite:///{tmp_path / 'tasks.sqlite'}",
        ],
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
    # Tokens per step come from the service's task record and add up to what the model served.
    assert (
        sum(sum(u["calls"] for u in step.usage.values()) for step in result.steps)
        == scripted_model.calls()
    )
