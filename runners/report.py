"""Run reports: ``report.json`` plus one self-contained ``report.html`` (screenshots inlined) and the PNGs.

Per step the page shows the screenshot of the page the agent saw, the verdict
on the previous action with its observation list, what the page witnessed,
the action chosen and how executing it went, tokens, and timings.
"""

from __future__ import annotations

import base64
import json
import statistics
from dataclasses import asdict
from html import escape
from pathlib import Path

from veriloop.runners.loop import RunResult, StepRecord, StepTimings
from veriloop.schemas.usage import total_usage

TIMING_FIELDS = (
    "snapshot_ms",
    "stability_wait_ms",
    "agent_ms",
    "engine_ms",
    "model_ms",
    "execute_ms",
)
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f4f6f9;color:#1d2733}
header{background:#1f4e79;color:#fff;padding:16px 28px}header h1{margin:0 0 4px;font-size:20px}
main{padding:16px 28px;max-width:1200px}section.run{margin-bottom:40px}
.summary td,.summary th,.timings td,.timings th{padding:3px 10px;text-align:left}
.step{display:grid;grid-template-columns:minmax(320px,560px) 1fr;gap:16px;background:#fff;border-radius:8px;
padding:14px;margin:14px 0;box-shadow:0 1px 3px #0002}.step img{width:100%;border:1px solid #ccd3dc;border-radius:4px}
.step h3{margin:0 0 6px;font-size:16px}code{background:#eef1f5;padding:1px 5px;border-radius:3px}
.ok{color:#1b7f3b;font-weight:600}.bad{color:#b3261e;font-weight:600}.muted{color:#5b6776}
ul.obs{margin:4px 0 8px;padding-left:18px}.badge{display:inline-block;padding:1px 8px;border-radius:10px;
background:#eef1f5;margin-right:4px}
"""


def write_report(
    runs: list[RunResult], directory: str | Path, *, title: str = "veriloop run"
) -> Path:
    """Write ``report.json``, ``report.html`` and ``screenshots/*.png`` under ``directory``; return the HTML path."""
    root = Path(directory)
    shots = root / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    data = {"title": title, "runs": []}
    for run_number, run in enumerate(runs, start=1):
        entry = _run_json(run)
        for step, step_json in zip(run.steps, entry["steps"], strict=True):
            if step.screenshot:
                name = f"run{run_number}-step{step.index + 1:02d}.png"
                (shots / name).write_bytes(step.screenshot)
                step_json["screenshot"] = f"screenshots/{name}"
        data["runs"].append(entry)
    (root / "report.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    html_path = root / "report.html"
    html_path.write_text(_html(runs, title), encoding="utf-8")
    return html_path


def timings_json(timings: StepTimings) -> dict[str, float | None]:
    values = asdict(timings) | {"engine_ms": timings.engine_ms}
    return {
        name: None if values[name] is None else round(values[name], 1) for name in TIMING_FIELDS
    }


def median_timings(runs: list[RunResult]) -> dict[str, float | None]:
    """Median of each timing over every step of ``runs`` (None when never measured)."""
    medians: dict[str, float | None] = {}
    for name in TIMING_FIELDS:
        values = [
            v
            for run in runs
            for step in run.steps
            if (v := timings_json(step.timings)[name]) is not None
        ]
        medians[name] = round(statistics.median(values), 1) if values else None
    return medians


def _run_json(run: RunResult) -> dict:
    total = total_usage(run.usage)
    return {
        "goal": run.goal,
        "startUrl": run.start_url,
        "taskId": run.task_id,
        "status": run.status,
        "error": run.error,
        "usage": run.usage,
        "totalUsage": total.model_dump(),
        "medianTimings": median_timings([run]),
        "steps": [
            {
                "index": step.index,
                "url": step.url,
                "action": step.action,
                "thought": step.thought,
                "status": step.status,
                "verification": step.verification,
                "clientObservations": step.client_observations,
                "settled": step.settled,
                "executionOk": step.execution_ok,
                "executionError": step.execution_error,
                "usage": step.usage,
                "tokens": step.tokens,
                "timings": timings_json(step.timings),
            }
            for step in run.steps
        ],
    }


def _html(runs: list[RunResult], title: str) -> str:
    body = "".join(_run_html(number, run) for number, run in enumerate(runs, start=1))
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><header><h1>{escape(title)}</h1>"
        f"<div>{len(runs)} run(s)</div></header><main>{body}</main></body></html>"
    )


def _run_html(number: int, run: RunResult) -> str:
    total = total_usage(run.usage)
    status_class = "ok" if run.completed else "bad"
    medians = median_timings([run])
    timing_cells = "".join(f"<th>{escape(n)}</th>" for n in TIMING_FIELDS)
    median_cells = "".join(f"<td>{_ms(medians[n])}</td>" for n in TIMING_FIELDS)
    error = f"<p class='bad'>{escape(run.error)}</p>" if run.error else ""
    return (
        f"<section class='run' id='run{number}'><h2>Run {number}: {escape(run.goal)}</h2>"
        f"<table class='summary'><tr><th>status</th><td class='{status_class}'>{escape(run.status)}</td></tr>"
        f"<tr><th>start</th><td>{escape(run.start_url)}</td></tr>"
        f"<tr><th>task</th><td><code>{escape(run.task_id or '-')}</code></td></tr>"
        f"<tr><th>steps</th><td>{len(run.steps)}</td></tr>"
        f"<tr><th>tokens</th><td>{total.input_tokens} in / {total.output_tokens} out, {total.calls} model calls, "
        f"${total.cost_usd:.4f}</td></tr></table>{error}"
        f"<h3>Median step timings (ms)</h3><table class='timings'><tr>{timing_cells}</tr><tr>{median_cells}</tr></table>"
        + "".join(_step_html(step) for step in run.steps)
        + "</section>"
    )


def _step_html(step: StepRecord) -> str:
    image = (
        f"<img alt='page at step {step.index + 1}' src='data:image/png;base64,"
        f"{base64.b64encode(step.screenshot).decode()}'>"
        if step.screenshot
        else "<p class='muted'>(no screenshot)</p>"
    )
    timings = timings_json(step.timings)
    timing_text = ", ".join(
        f"{name.removesuffix('_ms')} {_ms(value)}" for name, value in timings.items()
    )
    usage_text = (
        ", ".join(
            f"{purpose} {u.get('input_tokens', 0)}+{u.get('output_tokens', 0)}"
            for purpose, u in step.usage.items()
        )
        or "no model call"
    )
    return (
        f"<article class='step'><div>{image}</div><div>"
        f"<h3>Step {step.index + 1} <span class='muted'>· {escape(step.url)}</span></h3>"
        f"{_verdict_html(step.verification, 'verification' in step.usage)}"
        f"{_witness_html(step.client_observations, step.settled)}"
        f"<p><b>Action</b> <code>{escape(step.action)}</code> {_execution_html(step)}</p>"
        f"<p class='muted'>{escape(step.thought)}</p>"
        f"<p><b>Tokens</b> {step.tokens} <span class='muted'>({escape(usage_text)})</span></p>"
        f"<p><b>Timings (ms)</b> <span class='muted'>{escape(timing_text)}</span></p>"
        "</div></article>"
    )


def _verdict_html(verification: dict | None, model_called: bool) -> str:
    if not verification:
        return "<p class='muted'>First step: nothing to verify yet.</p>"
    ok = verification.get("success")
    goal = verification.get("goalAchieved")
    badges = [
        f"<span class='{'ok' if ok else 'bad'}'>{'previous action worked' if ok else 'previous action failed'}</span>",
        f"<span class='badge'>confidence {verification.get('confidence', 0):.2f}</span>",
    ]
    if goal is not None:
        badges.append(f"<span class='badge'>goal achieved: {'yes' if goal else 'no'}</span>")
    if verification.get("failureCategory"):
        badges.append(f"<span class='badge'>{escape(verification['failureCategory'])}</span>")
    badges.append(
        f"<span class='badge'>{'model verdict' if model_called else 'judged without a model call'}</span>"
    )
    items = "".join(f"<li>{escape(line)}</li>" for line in verification.get("observations") or [])
    summary = verification.get("semanticSummary") or ""
    return (
        f"<p><b>Verdict</b> {' '.join(badges)}</p>"
        + (f"<p class='muted'>{escape(summary)}</p>" if summary else "")
        + (f"<ul class='obs'>{items}</ul>" if items else "")
    )


def _witness_html(witness: dict | None, settled: bool) -> str:
    if witness is None:
        return ""
    names = {"didNetworkOccur": "network", "didDomMutate": "DOM", "didUrlChange": "URL"}
    parts = [f"{label} {'yes' if witness.get(key) else 'no'}" for key, label in names.items()]
    if not settled:
        parts.append("page still busy at the 5 s cap")
    return f"<p><b>Page witnessed</b> <span class='muted'>{escape(', '.join(parts))}</span></p>"


def _execution_html(step: StepRecord) -> str:
    if step.execution_ok is None:
        return ""
    if step.execution_ok:
        return "<span class='ok'>executed</span>"
    return f"<span class='bad'>not executed: {escape(step.execution_error or '')}</span>"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"
