"""``veriloop demo``: the agent on the bundled patient-records app, in headless Chromium, judged by the app.

Three goals run one after another on the demo app served on loopback. With
``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` set, the configured model drives the
agent; with neither, the scripted playbook does (through the loopback
OpenAI-compatible server the tests use). Whether a goal was reached is read
from the app's own data (``GET /api/state``), never from the agent's answer.

:func:`run_demo` is also the notebooks' one call: it works inside Jupyter too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from veriloop.agent import TaskReport
from veriloop.context import Context
from veriloop.llm.endpoint import SCRIPTED_MODEL, ModelEndpoint, describe_model, model_configured
from veriloop.llm.scripted import ScriptedModelServer
from veriloop.runners.browser.agents import InProcessAgent
from veriloop.runners.browser.client import ChromiumBrowser
from veriloop.runners.browser.loop import RunResult, StepRecord, run_task
from veriloop.runners.browser.report import write_report
from veriloop.runners.demo.playbook import (
    ADD_PATIENT,
    DARK_THEME,
    SCRIPTED_NOTES,
    SEARCH_PATIENT,
    DemoPlaybook,
)
from veriloop.runners.demo.server import DemoAppServer

DEMO_GOALS = (ADD_PATIENT, SEARCH_PATIENT, DARK_THEME)


def _has_patient_jas(state: dict[str, Any]) -> tuple[bool, str]:
    names = [p["name"] for p in state["patients"]]
    found = any(name.strip().lower() == "jas" for name in names)
    return found, f"patients in the app: {', '.join(names)}"


def _searched_maria(state: dict[str, Any]) -> tuple[bool, str]:
    searches = state["searches"]
    return any(
        "maria" in q.lower() for q in searches
    ), f"searches the app served: {searches or 'none'}"


def _theme_dark(state: dict[str, Any]) -> tuple[bool, str]:
    theme = state["settings"]["theme"]
    return theme == "dark", f"theme setting in the app: {theme}"


APP_CHECKS: dict[str, Callable[[dict[str, Any]], tuple[bool, str]]] = {
    ADD_PATIENT: _has_patient_jas,
    SEARCH_PATIENT: _searched_maria,
    DARK_THEME: _theme_dark,
}


@dataclass(frozen=True)
class AppCheck:
    """The app's own verdict on one goal."""

    goal: str
    passed: bool
    detail: str


@dataclass
class DemoResult:
    model: ModelEndpoint
    """What answered the model calls."""
    runs: list[RunResult] = field(default_factory=list)
    checks: list[AppCheck] = field(default_factory=list)
    tasks: list[TaskReport] = field(default_factory=list)
    """The agent's own record of each run: status, actions, verification history, usage."""
    report: Path | None = None

    @property
    def scripted(self) -> bool:
        return self.model.scripted

    @property
    def exit_code(self) -> int:
        """0 only when the app confirms every goal."""
        return 0 if self.checks and all(check.passed for check in self.checks) else 1


@contextmanager
def _scripted_model(server: ScriptedModelServer | None) -> Iterator[ScriptedModelServer]:
    if server is not None:
        yield server
        return
    with DemoPlaybook().install(ScriptedModelServer()) as started:
        yield started


def run_demo(
    report_dir: str | Path,
    *,
    goals: Sequence[str] = DEMO_GOALS,
    headed: bool = False,
    model: str | None = None,
    model_server: ScriptedModelServer | None = None,
    on_run: Callable[[str], None] | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
    chromium: str | None = None,
    browser: ChromiumBrowser | None = None,
    screenshots: bool = True,
) -> DemoResult:
    """Run the demo goals and write the report; ``model_server`` (or, when no provider is
    configured, the playbook) answers model calls as the scripted model.

    ``browser``: a started browser to use (Playwright's sync API allows one per thread); else one is
    launched. Inside Jupyter (an asyncio loop runs in this thread, where Playwright's sync API
    refuses to start) the run moves to a worker thread.
    """
    kwargs = {k: v for k, v in locals().items() if k != "report_dir"}  # the arguments above
    if browser is None and _loop_running():
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="veriloop-demo") as pool:
            return pool.submit(_run_demo, report_dir, **kwargs).result()
    return _run_demo(report_dir, **kwargs)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _run_demo(
    report_dir: str | Path,
    *,
    goals: Sequence[str],
    headed: bool,
    model: str | None,
    model_server: ScriptedModelServer | None,
    on_run: Callable[[str], None] | None,
    on_step: Callable[[StepRecord], None] | None,
    on_phase: Callable[[str], None] | None,
    chromium: str | None,
    browser: ChromiumBrowser | None,
    screenshots: bool,
) -> DemoResult:
    scripted = model_server is not None or not model_configured()
    own_browser = (
        nullcontext(browser)
        if browser
        else ChromiumBrowser(executable_path=chromium, headless=not headed)
    )
    with (
        DemoAppServer() as app,
        own_browser as browser,
        _scripted_model(model_server) if scripted else nullcontext() as server,
    ):
        if server is not None:
            context = Context(model=SCRIPTED_MODEL, base_url=server.base_url)
        else:
            context = Context(model=model) if model else Context()
        result = DemoResult(model=describe_model(context))
        agent = InProcessAgent(context=context)
        for goal in goals:
            if on_run:
                on_run(goal)
            session = browser.new_session()
            try:
                run = run_task(
                    goal,
                    app.url,
                    session=session,
                    agent=agent,
                    screenshots=screenshots,
                    on_step=on_step,
                    on_phase=on_phase,
                    session_id="veriloop-demo",
                )
            finally:
                session.close()
            result.runs.append(run)
            if run.task_id is not None:
                result.tasks.append(agent.agent.get_task(run.task_id))
            passed, detail = APP_CHECKS[goal](app_state(app.url))
            result.checks.append(AppCheck(goal, passed, detail))
    result.report = write_report(
        result.runs,
        report_dir,
        model=result.model,
        title="veriloop demo: MediDesk patient records",
        notes=SCRIPTED_NOTES if result.scripted else None,
    )
    return result


def app_state(base_url: str) -> dict[str, Any]:
    """The demo app's data, read through its own JSON API."""
    reply = httpx.get(base_url.rstrip("/") + "/api/state", timeout=10)
    reply.raise_for_status()
    return reply.json()
