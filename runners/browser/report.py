"""Run reports: ``report.json`` plus one self-contained ``report.html`` (screenshots inlined) and the PNGs.

Both start with the model that produced the runs and its kind of endpoint; a scripted run says so
in a banner at the top. Per step the page shows the screenshot of the page the agent saw, the verdict
on the previous action with its observation list, what the page witnessed,
the action chosen and how executing it went, tokens, and timings.
"""

from __future__ import annotations

import base64
import json
import statistics
from collections.abc import Mapping
from dataclasses import asdict
from html import escape
from pathlib import Path

from veriloop.llm.endpoint import ModelEndpoint
from veriloop.runners.browser.loop import RunResult, StepRecord, StepTimings
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
.banner{padding:10px 14px;border-radius:6px;margin:14px 0}.banner.scripted{background:#fff4d6;
border:1px solid #e0b000;color:#5c4600}.banner.real{background:#e7f0fa;border:1px solid #9db8d6}
.note{background:#eef6ee;border-left:4px solid #2b8a3e;padding:8px 12px}
.ok{color:#1b7f3b;font-weight:600}.bad{color:#b3261e;font-weight:600}.muted{color:#5b6776}
ul.obs{margin:4px 0 8px;padding-left:18px}.badge{display:inline-block;padding:1px 8px;border-radius:10px;
background:#eef1f5;margin-right:4px}
"""


def write_report(
    runs: list[RunResult],
    directory: str | Path,
    *,
    model: ModelEndpoint,
    title: str = "veriloop run",
    notes: Mapping[str, str] | None = None,
) -> Path:
    """Write ``report.json``, ``report.html`` and ``screenshots/*.png`` under ``directory``; return the HTML path.

    ``model``: what answered the model calls (named at the top). ``notes``: a remark per goal,
    shown above that run (why the demo makes a deliberate mistake).
    """
    root = Path(directory)
    shots = root / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    notes = notes or {}
    data = {
        "title": title,
        "model": model.to_wire() | {"scripted": model.scripted, "label": model.label},
        "runs": [],
    }
    for run_number, run in enumerate(runs, start=1):
        entry = _run_json(run) | ({"note": notes[run.goal]} if run.goal in notes else {})
        for step, step_json in zip(run.steps, entry["steps"], strict=True):
            if step.screenshot:
                name = f"run{run_number}-step{step.index + 1:02d}.png"
                (shots / name).write_bytes(step.screenshot)
                step_json["screenshot"] = f"screenshots/{name}"
        data["runs"].append(entry)
    (root / "report.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    html_path = root / "report.html"
    html_path.write_text(_html(runs, title, model, notes), encoding="utf-8")
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
                "target": step.target,
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


def _html(runs: list[RunResult], title: str, model: ModelEndpoint, notes: Mapping[str, str]) -> str:
    body = "".join(
        _run_html(number, run, notes.get(run.goal)) for number, run in enumerate(runs, start=1)
    )
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><header><h1>{escape(title)}</h1>"
        f"<div>{len(runs)} run(s) · {escape(model.label)}</div></header>"
        f"<main>{model_banner(model)}{body}</main></body></html>"
    )


def model_banner(model: ModelEndpoint) -> str:
    """The HTML banner naming the model at the top of a report; a scripted run's says so."""
    if model.scripted:
        return (
            "<div class='banner scripted'><b>Scripted run.</b> Every model answer was canned by an "
            f"offline playbook on a loopback server (model name <code>{escape(model.model)}</code>), "
            "not produced by a real model, so it costs $0. The browser, the pages, the graph and "
            "the checks were real.</div>"
        )
    return (
        f"<div class='banner real'>Model <code>{escape(model.model)}</code> on "
        f"{escape(model.where)}.</div>"
    )


def _run_html(number: int, run: RunResult, note: str | None = None) -> str:
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
        + (f"<p class='note'>{escape(note)}</p>" if note else "")
        + f"<h3>Median step timings (ms)</h3><table class='timings'><tr>{timing_cells}</tr><tr>{median_cells}</tr></table>"
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
        f"<p><b>Action</b> <code>{escape(step.described_action)}</code> {_execution_html(step)}</p>"
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
    names = {
        "didNetworkOccur": "network activity",
        "didDomMutate": "DOM mutation",
        "didUrlChange": "URL change",
    }
    parts = [f"{label} {'yes' if witness.get(key) else 'no'}" for key, label in names.items()]
    if not settled:
        parts.append("page still busy at the 5 s cap")
    return (
        "<p><b>The browser saw since the action</b> "
        f"<span class='muted'>{escape(', '.join(parts))}</span></p>"
    )


def _execution_html(step: StepRecord) -> str:
    if step.execution_ok is None:
        return ""
    if step.execution_ok:
        return "<span class='ok'>executed</span>"
    return f"<span class='bad'>not executed: {escape(step.execution_error or '')}</span>"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"
