"""How soon the console's run page and task page show a new step, and how heavy the run page is.

A real ``veriloop serve`` (SQLite, its own process) runs a chain of python steps that each wait
``--wait`` seconds; headless Chromium has the run page open while it executes. Side by side in
one run: a client subscribed to the run's event stream stamps each ``step_finished`` event as it
arrives (the status change), the page stamps the moment its DOM first shows that step as
completed (a MutationObserver), and a plain ``GET /api/plans/{id}`` is timed as the floor of
any page update. The page's weight is what the browser loaded for the finished run's page: the
HTML, the stylesheet and the script (no other requests are made).

Then a browser task (a scripted model on loopback that presses a button and never says done)
takes as many steps, ``--wait`` seconds apart, with its task page open: the client stamps each
interact answer as it arrives (the step recorded), the page the moment its DOM first shows that
step. The target: the task page's median within 2x of the run page's.

    python -m benchmarks.console_latency            # 20 steps
    python -m benchmarks.console_latency --quick    # 3 steps (the test suite's smoke run)

Last line: ``RESULT median_ms=<event -> run page> api_ms=<GET report> ratio=<median/api>
task_ms=<answer -> task page> task_ratio=<task_ms/median_ms> page_kb=<html+css+js>
html_kb=<run page HTML> steps=<n>``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated

import httpx
import typer
from playwright.sync_api import sync_playwright

from benchmarks.serving import free_port, start_service
from veriloop.llm.scripted import ANY_PURPOSE, ScriptedModelServer, ScriptedRequest
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
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WARMUP_S = 3.0
"""The first step's wait: the page is open and following before the measured steps run."""
QUICK_WARMUP_S = 1.5

TASK_GOAL = "Press the counter's button, again and again"
TASK_OBSERVER = """
window.__seen = {};
new MutationObserver(() => {
  for (const step of document.querySelectorAll("article[data-step]")) {
    if (!(step.dataset.step in window.__seen)) window.__seen[step.dataset.step] = Date.now();
  }
}).observe(document.getElementById("main"), {subtree: true, childList: true});
"""

OBSERVER = """
window.__seen = {};
new MutationObserver(() => {
  for (const step of document.querySelectorAll("article[data-step]")) {
    if (step.dataset.status === "completed" && !(step.dataset.step in window.__seen)) {
      window.__seen[step.dataset.step] = Date.now();
    }
  }
}).observe(document.getElementById("main"), {subtree: true, childList: true, attributes: true});
"""


def chain(steps: int, wait: float, warmup: float) -> dict:
    items = [{"id": "warmup", "function": "pause", "input": {"wait": warmup}}]
    for i in range(steps):
        items.append(
            {
                "id": f"s{i}",
                "function": "pause",
                "input": {"wait": wait},
                "depends_on": [items[-1]["id"]],
            }
        )
    return {"goal": "console latency benchmark", "steps": items}


def counter_page(presses: int) -> str:
    """The browser task's page after ``presses`` presses (every press changes it)."""
    return (
        f'<html><body><h1>Counter</h1><button {ELEMENT_ID_ATTR}="1" id="press">Press</button>'
        f'<div role="status">Pressed {presses} times</div></body></html>'
    )


def press_forever(request: ScriptedRequest, steps: int) -> object:
    """The scripted model of the browser task: press the button; the goal is never met."""
    match request.purpose:
        case "planning":
            step = PlannedStep(description="Press the button", expected_outcome="the count goes up")
            return PlanOutput(steps=[step] * (steps + 2))
        case "refinement":
            return RefinedStep(instruction="Click the Press button", target_element_id=1)
        case "action":
            return ActionChoice(thought="press it", action="click(1)")
        case "verification":
            return SemanticVerdict(
                action_succeeded=True, task_completed=False, confidence=0.95, reason="it counted"
            )
        case "audit":
            return CompletionAudit(goal_met=False, confidence=0.95, reason="never done")
        case "correction":
            return CorrectionChoice(strategy="retry_with_delay", thought="again")
    return PlanValidation(valid=True, minor_modifications_only=True)


def start_server(root: Path, model_url: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VERILOOP_"))}
    env.update(
        OPENAI_BASE_URL=model_url,
        OPENAI_API_KEY="scripted",
        VERILOOP_TOOLS="benchmarks.plan_steps:PAUSE",
        VERILOOP_WORKSPACE=str(root),
        LANGSMITH_TRACING="false",
    )
    code = (
        "from veriloop.server.main import serve; "
        f"serve('127.0.0.1', {port}, 1, 'sqlite:///{root / 'bench.sqlite'}')"
    )
    return start_service([sys.executable, "-c", code], env, port, cwd=REPO)


def stamp_events(url: str, run_id: str, stamps: dict[str, float]) -> None:
    """Record when each step_finished event reaches a client (ms since the epoch)."""
    with httpx.stream("GET", f"{url}/api/plans/{run_id}/events", timeout=None) as response:
        for line in response.iter_lines():
            if line.startswith("data:"):
                event = json.loads(line.removeprefix("data:"))
                if event["event"] == "step_finished":
                    stamps.setdefault(event["stepId"], time.time() * 1000)


def main(
    steps: Annotated[int, typer.Option(help="Measured steps (one status change each).")] = 20,
    wait: Annotated[float, typer.Option(help="Seconds each step waits.")] = 0.5,
    quick: Annotated[bool, typer.Option(help="3 steps: a smoke run.")] = False,
) -> None:
    warmup = WARMUP_S
    if quick:
        steps, wait, warmup = 3, 0.2, QUICK_WARMUP_S
    model = ScriptedModelServer().start()
    model.on(ANY_PURPOSE, lambda request: press_forever(request, steps))
    with tempfile.TemporaryDirectory() as tmp:
        process, url = start_server(Path(tmp), model.base_url)
        try:
            result = measure(url, steps, wait, warmup)
        finally:
            process.terminate()
            process.wait(timeout=30)
            model.stop()
    for name, value in result.items():
        print(f"{name}: {value}")
    print(
        f"RESULT median_ms={result['median_ms']:.0f} api_ms={result['api_ms']:.1f} "
        f"ratio={result['median_ms'] / result['api_ms']:.1f} task_ms={result['task_ms']:.0f} "
        f"task_ratio={result['task_ms'] / result['median_ms']:.2f} page_kb={result['page_kb']:.1f} "
        f"html_kb={result['html_kb']:.1f} steps={steps}"
    )


def measure(url: str, steps: int, wait: float, warmup: float) -> dict[str, float]:
    """Latencies (ms) and the run page's weight (KiB)."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page()
        run_id = httpx.post(
            f"{url}/api/plans", json={"manifest": chain(steps, wait, warmup)}
        ).json()["runId"]
        stamps: dict[str, float] = {}
        follower = threading.Thread(target=stamp_events, args=(url, run_id, stamps), daemon=True)
        follower.start()
        page.goto(f"{url}/runs/{run_id}")
        page.evaluate(OBSERVER)
        last = f"s{steps - 1}"
        page.wait_for_selector(
            f"article[data-step='{last}'][data-status='completed']",
            timeout=(warmup + steps * wait + 30) * 1000,
        )
        seen = page.evaluate("window.__seen")
        follower.join(timeout=10)
        latencies = [seen[s] - stamps[s] for s in (f"s{i}" for i in range(steps))]
        api = []
        for _ in range(20):
            started = time.perf_counter()
            httpx.get(f"{url}/api/plans/{run_id}").raise_for_status()
            api.append((time.perf_counter() - started) * 1000)
        # What a browser loads for the finished run's page (every request it makes).
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.reload()
        page.wait_for_load_state("networkidle")
        task = measure_task(browser.new_page(), url, steps, wait)
        browser.close()
    sizes = {u: len(httpx.get(u).content) for u in dict.fromkeys(requests)}
    return {
        "median_ms": statistics.median(latencies),
        "max_ms": max(latencies),
        "api_ms": statistics.median(api),
        "page_kb": sum(sizes.values()) / 1024,
        "html_kb": sizes[f"{url}/runs/{run_id}"] / 1024,
        "requests": len(sizes),
        "task_ms": statistics.median(task),
        "task_max_ms": max(task),
    }


def measure_task(page, url: str, steps: int, wait: float) -> list[float]:  # noqa: ANN001 (a Playwright page)
    """Per step of a browser task: ms from its interact answer reaching the client to its task
    page showing it."""
    with httpx.Client(base_url=url, timeout=60) as client:

        def interact(presses: int, **fields: object) -> dict:
            body = {"url": "http://counter.test/", "dom": counter_page(presses), **fields}
            response = client.post("/api/agent/interact", json=body)
            response.raise_for_status()
            return response.json()

        answer = interact(0, query=TASK_GOAL)
        page.goto(f"{url}/tasks/{answer['taskId']}")
        page.evaluate(TASK_OBSERVER)
        stamps: dict[str, float] = {}
        for presses in range(1, steps + 1):
            time.sleep(wait)
            answer = interact(
                presses,
                taskId=answer["taskId"],
                stepIndex=answer["stepIndex"],
                clientObservations={"didDomMutate": True},
            )
            assert answer["status"] == "executing", answer
            stamps[str(answer["stepIndex"])] = time.time() * 1000
        page.wait_for_selector(f"article[data-step='{answer['stepIndex']}']", timeout=30_000)
        seen = page.evaluate("window.__seen")
    return [seen[step] - stamped for step, stamped in stamps.items()]


if __name__ == "__main__":
    typer.run(main)
