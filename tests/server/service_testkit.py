"""Helpers of the service tests (imported by conftest.py and the tests; conftest puts this folder on sys.path)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from veriloop.engines.completion import change_line_numbers
from veriloop.llm.scripted import ScriptedRequest
from veriloop.schemas.outputs import (
    ActionChoice,
    CompletionAudit,
    CorrectionChoice,
    CriticReview,
    PlannedStep,
    PlanOutput,
    PlanValidation,
    RefinedStep,
    SemanticVerdict,
)
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR
from veriloop.server.settings import Settings

REPO = Path(__file__).resolve().parents[2]
PG_URL = os.environ.get(
    "VERILOOP_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/veriloop_test"
)
KEYS = {"key-a": "tenant_a", "key-b": "tenant_b"}
GOAL = re.compile(r"Press button (\d+) exactly (\d+) times \[([0-9a-z-]+)\]")
AUDITED_ACTION = re.compile(r"^Action \d+: ", re.MULTILINE)
"""One trajectory line per verified action in an audit prompt (engines/completion.build_trajectory)."""


# -- pages and requests -----------------------------------------------------------------------


def goal(button: int, times: int) -> str:
    """A goal the playbook understands: click ``button`` ``times`` times (tagged so each task is unique)."""
    return f"Press button {button} exactly {times} times [{uuid.uuid4().hex[:12]}]"


def page(button: int, presses: int) -> str:
    """A page with the button and a visible counter: every press changes the skeleton."""
    return (
        f"<html><body><h1>Counter</h1>"
        f'<button {ELEMENT_ID_ATTR}="{button}" id="press-{button}">Press {button} (pressed {presses})</button>'
        f'<div role="status">Pressed {presses} times</div></body></html>'
    )


def observation(button: int, presses: int, **extra: Any) -> dict[str, Any]:
    """An interact body for the page after ``presses`` presses (camelCase, as a client sends it)."""
    return {
        "url": f"http://app.test/b{button}/after-{presses}",
        "dom": page(button, presses),
        "clientObservations": {"didDomMutate": presses > 0},
        **extra,
    }


# -- the scripted model's playbook ------------------------------------------------------------


@dataclass
class Playbook:
    """Answers every purpose for goals made by :func:`goal`: click the button, say done after N verdicts."""

    verdicts: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: ScriptedRequest) -> Any:
        match = GOAL.search(request.text)
        if (
            match is None
        ):  # a goal this playbook does not know (fuzzing): a harmless one-step answer
            button, times, tag = 1, 1, "other"
        else:
            button, times, tag = int(match[1]), int(match[2]), match[3]
        purpose = request.purpose
        if purpose == "planning":
            return PlanOutput(
                steps=[
                    PlannedStep(description=f"Press button {button}", expected_outcome="counter +1")
                ]
                * times
            )
        if purpose == "refinement":
            return RefinedStep(instruction=f"Click button {button}", target_element_id=button)
        if purpose == "action":
            return ActionChoice(
                thought=f"press {button}", action=f"click({button})" if match else "wait(0.1)"
            )
        if purpose == "verification":
            with self.lock:
                self.verdicts[tag] += 1
                done = self.verdicts[tag] >= times
            return SemanticVerdict(
                action_succeeded=True,
                task_completed=done,
                confidence=0.95,
                reason="counter went up",
                evidence=change_line_numbers(request.text) if done else [],
            )
        if purpose == "audit":
            # Judged from the trajectory it is shown, as a real audit is: it may run beside the
            # last verdict (audit_ahead), before that verdict is counted above.
            presses = len(AUDITED_ACTION.findall(request.text))
            return CompletionAudit(
                goal_met=presses >= times, confidence=0.95, reason=f"{presses} presses seen"
            )
        if purpose == "correction":
            return CorrectionChoice(strategy="retry_with_delay", thought="wait and retry")
        if purpose == "replanning":
            return PlanValidation(valid=True, minor_modifications_only=True)
        return CriticReview(review="<Approved>YES</Approved>")


# -- servers ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(
    url: str, process: subprocess.Popen, output: Callable[[], str], timeout: float = 60
) -> None:
    """Until ``url``'s /healthz answers; fails at once, with the end of ``output()``, if
    ``process`` (the service) exits first."""
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, f"the service exited: {output()[-3000:]}"
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"the service at {url} did not answer /healthz"
        time.sleep(0.1)


def wait_until(condition: Callable[[], object], what: str, timeout: float = 60) -> None:
    """Until ``condition()`` is true (polled every 50 ms); fails naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Client(httpx.Client):
    """httpx client for one server and one API key, with a helper per endpoint."""

    def interact(self, body: dict[str, Any]) -> httpx.Response:
        return self.post("/api/agent/interact", json=body)

    def detail(self, task_id: str) -> dict[str, Any]:
        response = self.get(f"/api/tasks/{task_id}")
        assert response.status_code == 200, response.text
        return response.json()


@dataclass
class Server:
    """A running service: its base URL and settings."""

    url: str
    settings: Settings

    def client(self, key: str | None = "key-a", timeout: float = 60) -> Client:
        headers = {"X-API-Key": key} if key else {}
        return Client(base_url=self.url, headers=headers, timeout=timeout)


@dataclass
class ProcessServer:
    """The service in its own process, started through ``veriloop.server.main.serve``."""

    database_url: str
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> ProcessServer:
        """Start the process (returns at once; see ``ready``)."""
        code = f"from veriloop.server.main import serve; serve('127.0.0.1', {self.port}, 1, {self.database_url!r})"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            env=self.env,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        return self

    def ready(self) -> ProcessServer:
        """Wait until /healthz answers (the schema is set up)."""
        assert self.process is not None
        wait_healthy(self.url, self.process, lambda: self.process.stderr.read().decode())
        return self

    def kill9(self) -> None:
        """SIGKILL: no shutdown, no cleanup."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process is not None and self.process.stderr is not None:
            self.process.stderr.close()

    def client(self, key: str | None = "key-a", timeout: float = 60) -> Client:
        return Server(self.url, Settings()).client(key, timeout)


# -- reading the checkpointer directly --------------------------------------------------------


def read_head(database_url: str, task_id: str) -> dict[str, Any] | None:
    """The task's state at its latest checkpoint, read straight from the database (histories replayed)."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from veriloop.graph import build_graph

    async def read() -> dict[str, Any] | None:
        config = {"configurable": {"thread_id": task_id}}
        if database_url.startswith("postgresql"):
            saver_cm = AsyncPostgresSaver.from_conn_string(database_url)
        else:
            saver_cm = AsyncSqliteSaver.from_conn_string(database_url.removeprefix("sqlite:///"))
        async with saver_cm as saver:
            if await saver.aget_tuple(config) is None:
                return None
            state = await build_graph().compile(checkpointer=saver).aget_state(config)
            return state.values

    return asyncio.run(read())


def drive(
    client: Client, button: int, presses: int, **first: Any
) -> tuple[str, list[dict[str, Any]]]:
    """Run a task to its end from the client side: every answer's action is 'executed' by pressing."""
    answers = [client.interact(observation(button, 0, query=goal(button, presses), **first)).json()]
    task_id = answers[0]["taskId"]
    while answers[-1]["status"] == "executing":
        done = len(answers)
        response = client.interact(
            observation(button, done, taskId=task_id, stepIndex=answers[-1]["stepIndex"])
        )
        assert response.status_code == 200, response.text
        answers.append(response.json())
    return task_id, answers


# -- plan runs --------------------------------------------------------------------------------


def python_step(
    name: str, markers: Path | None, *, sleep: float = 0, **fields: Any
) -> dict[str, Any]:
    """A manifest step running tests/server/plan_tools.py's ``mark`` (server: VERILOOP_TOOLS=plan_tools:TOOLS);
    no marker file when ``markers`` is None."""
    spec = {"name": name, "markers": str(markers) if markers else None, "sleep": sleep}
    if "first_sleep" in fields:
        spec["first_sleep"] = fields.pop("first_sleep")
    return {"id": name, "function": "mark", "input": spec, **fields}


def wait_for_run(client: httpx.Client, run_id: str, timeout: float = 60) -> dict[str, Any]:
    """GET /api/plans/{run_id} until no server executes the run (stopped, paused or finished)."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(f"/api/plans/{run_id}")
        assert response.status_code == 200, response.text
        report = response.json()
        if not report["executing"]:
            return report
        assert time.monotonic() < deadline, f"plan run {run_id} still executing: {report}"
        time.sleep(0.05)


def plan_events(client: httpx.Client, run_id: str, timeout: float = 60) -> list[dict[str, Any]]:
    """Every Server-Sent Event of GET /api/plans/{run_id}/events until the stream ends (its data)."""
    events: list[dict[str, Any]] = []
    with client.stream("GET", f"/api/plans/{run_id}/events", timeout=timeout) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in response.iter_lines():
            if line.startswith("event:"):
                name = line.removeprefix("event:").strip()
            elif line.startswith("data:"):
                data = json.loads(line.removeprefix("data:").strip())
                assert data["event"] == name
                events.append(data)
    return events
