"""Per-step overhead of the Chrome extension against the Playwright runner, side by side in one run.

On the demo app's page, with a real ``veriloop serve`` on loopback (the demo's scripted model),
each of ``--steps`` rounds measures, for both clients in turn:

- **snapshot**: capturing the page with the one snapshot script, without the stability wait (the
  wait is the same script's on both sides): the extension's ``chrome.scripting.executeScript``
  timed inside its service worker, the runner's ``PageSession.snapshot`` (Playwright's evaluate);
- **round trip**: sending that page to ``POST /api/agent/interact`` and reading the answer,
  as a retry of an answered request (same ``requestId`` and body: the stored answer, no graph
  run), so it is the client's transport and the service's request handling only: the worker's
  ``fetch`` against the runner's ``httpx``.

    python -m benchmarks.extension_overhead [--steps 20] [--quick]

Last line: ``RESULT snapshot_ms_extension=.. snapshot_ms_runner=.. snapshot_ratio=..
roundtrip_ms_extension=.. roundtrip_ms_runner=.. roundtrip_ratio=..`` (medians; ratio =
extension / runner).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

from benchmarks.serving import free_port, start_service
from veriloop.extension_bundle import launch_with_extension, write_extension
from veriloop.llm.scripted import ScriptedModelServer
from veriloop.runners.browser.client import (
    OFFLINE_FLAGS,
    PageSession,
    chromium_path,
    snapshot_script,
)
from veriloop.runners.demo.playbook import ADD_PATIENT, DemoPlaybook
from veriloop.runners.demo.server import DemoAppServer

EXTENSION_ROUND = """async ([tabId, serviceUrl, requestId, first]) => {
  const t0 = performance.now();
  const snap = await veriloop.pageCall(tabId, "snapshot", {wait: false});
  const t1 = performance.now();
  const body = {url: snap.url, dom: snap.dom, activeElement: snap.activeElement, query: first.query,
                sessionId: "bench-extension", requestId};
  const t2 = performance.now();
  const answer = await (await fetch(serviceUrl + "/api/agent/interact", {method: "POST",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify(first.body || body)})).json();
  const t3 = performance.now();
  return {snapshot: t1 - t0, roundtrip: t3 - t2, body, taskId: answer.taskId};
}"""


def _serve(model_url: str, data_dir: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "OPENAI_BASE_URL": model_url, "OPENAI_API_KEY": "scripted"}
    for name in ("VERILOOP_API_KEYS", "VERILOOP_API_KEYS_FILE", "VERILOOP_DATABASE_URL"):
        env.pop(name, None)
    argv = [sys.executable, "-m", "veriloop", "serve", "--port", str(port)]
    return start_service([*argv, "--data-dir", str(data_dir)], env, port)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="Measured rounds per client.")
    parser.add_argument("--quick", action="store_true", help="5 rounds (a smoke run).")
    args = parser.parse_args(argv)
    steps = 5 if args.quick else args.steps
    times: dict[str, list[float]] = {
        k: [] for k in ("snapshot_ext", "snapshot_run", "roundtrip_ext", "roundtrip_run")
    }
    with (
        tempfile.TemporaryDirectory() as scratch,
        DemoPlaybook().install(ScriptedModelServer()) as model,
        DemoAppServer() as app,
        sync_playwright() as playwright,
    ):
        service, service_url = _serve(model.base_url, Path(scratch) / "data")
        try:
            folder = write_extension(Path(scratch) / "extension")
            context, extension_id = launch_with_extension(
                playwright, folder, Path(scratch) / "profile"
            )
            worker = next(w for w in context.service_workers if extension_id in w.url)
            ext_page = context.new_page()
            ext_page.goto(app.url)
            tab_id = worker.evaluate(
                "async u => (await chrome.tabs.query({})).find(t => t.url === u).id", ext_page.url
            )
            browser = playwright.chromium.launch(
                executable_path=chromium_path(), headless=True, args=list(OFFLINE_FLAGS)
            )
            runner_context = browser.new_context(viewport={"width": 1100, "height": 800})
            runner_context.add_init_script(snapshot_script())
            session = PageSession(runner_context, runner_context.new_page())
            session.goto(app.url)
            client = httpx.Client(base_url=service_url, timeout=60)

            ext_request, run_request = uuid.uuid4().hex, uuid.uuid4().hex
            # The first request of each starts a task (a graph run, not measured); the rest repeat it.
            ext_first = worker.evaluate(
                EXTENSION_ROUND, [tab_id, service_url, ext_request, {"query": ADD_PATIENT}]
            )
            snap = session.snapshot(wait=False)
            run_body = {
                "url": snap.url,
                "dom": snap.dom,
                "activeElement": snap.active_element,
                "query": ADD_PATIENT,
                "sessionId": "bench-runner",
                "requestId": run_request,
            }
            client.post("/api/agent/interact", json=run_body).raise_for_status()
            for _ in range(steps):
                ext = worker.evaluate(
                    EXTENSION_ROUND, [tab_id, service_url, ext_request, {"body": ext_first["body"]}]
                )
                assert ext["taskId"] == ext_first["taskId"], "the repeat made a new task"
                times["snapshot_ext"].append(ext["snapshot"])
                times["roundtrip_ext"].append(ext["roundtrip"])
                times["snapshot_run"].append(session.snapshot(wait=False).total_ms)
                started = time.perf_counter()
                client.post("/api/agent/interact", json=run_body).raise_for_status().json()
                times["roundtrip_run"].append((time.perf_counter() - started) * 1000)
            client.close()
            browser.close()
            context.close()
        finally:
            service.terminate()
            service.wait(timeout=30)

    med = {k: statistics.median(v) for k, v in times.items()}
    page_kb = len(ext_first["body"]["dom"].encode()) / 1000
    print(f"demo app page, {page_kb:.0f} kB of DOM; {steps} rounds each, medians (ms):")
    print(f"  snapshot    extension {med['snapshot_ext']:7.1f}   runner {med['snapshot_run']:7.1f}")
    print(
        f"  round trip  extension {med['roundtrip_ext']:7.1f}   runner {med['roundtrip_run']:7.1f}"
    )
    print(
        f"RESULT snapshot_ms_extension={med['snapshot_ext']:.1f} snapshot_ms_runner={med['snapshot_run']:.1f} "
        f"snapshot_ratio={med['snapshot_ext'] / med['snapshot_run']:.2f} "
        f"roundtrip_ms_extension={med['roundtrip_ext']:.1f} roundtrip_ms_runner={med['roundtrip_run']:.1f} "
        f"roundtrip_ratio={med['roundtrip_ext'] / med['roundtrip_run']:.2f}"
    )


if __name__ == "__main__":
    main()
