"""Run reports: ``report.json`` plus one self-contained ``report.html`` (screenshots inlined) and the PNGs.

Both start with the model that produced the runs and its kind of endpoint; a scripted run says so
in a banner at the top. ``report.json`` keeps each turn as it came (the verdict on the previous
action, what the page witnessed since it, the action chosen). The page is drawn by the console's
templates: each step is the task page's card, the action with its target's name beside the
verdict the next turn brought on it and what the browser saw after it, plus the screenshot of the
page the agent saw, how executing the action went, tokens and timings.
"""

from __future__ import annotations

import base64
import json
import statistics
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from veriloop.llm.endpoint import ModelEndpoint
from veriloop.runners.browser.loop import RunResult, StepRecord, StepTimings
from veriloop.schemas.api import VerificationSummary
from veriloop.schemas.usage import total_usage
from veriloop.server.pages.render import BrowserStep, render, stylesheet

TIMING_FIELDS = (
    "snapshot_ms",
    "stability_wait_ms",
    "agent_ms",
    "engine_ms",
    "model_ms",
    "execute_ms",
)


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
    """The self-contained page: the console's templates (``browser_report.html`` extends the plan
    report's page; each step is the task page's ``_browser_step.html``), its stylesheet inlined."""
    return render(
        "browser_report.html",
        title=title,
        css=stylesheet(),
        model=model,
        runs=[_run_view(run, notes.get(run.goal)) for run in runs],
    )


def _run_view(run: RunResult, note: str | None) -> dict[str, Any]:
    medians = median_timings([run])
    return {
        "goal": run.goal,
        "status": run.status,
        "start_url": run.start_url,
        "task_id": run.task_id,
        "error": run.error,
        "note": note,
        "total": total_usage(run.usage),
        "medians": {name: _ms(value) for name, value in medians.items()},
        "steps": [
            _browser_step(step, next_step)
            for step, next_step in zip(run.steps, [*run.steps[1:], None], strict=True)
        ],
    }


def _browser_step(step: StepRecord, next_step: StepRecord | None) -> BrowserStep:
    """``step``'s action beside the verdict on it and what the browser saw after it, both of
    which the next turn brought (as the console's task page pairs them)."""
    verdict = next_step.verification if next_step else None
    summary = VerificationSummary.model_validate(verdict) if verdict else None
    return BrowserStep(
        number=step.index + 1,
        action=step.action,
        target=step.target,
        url=step.url,
        thought=step.thought,
        verdict=summary,
        reason=summary.semantic_summary if summary else "",
        image=base64.b64encode(step.screenshot).decode() if step.screenshot else "",
        witness=tuple(_witness(next_step.client_observations, next_step.settled))
        if next_step
        else (),
        execution_ok=step.execution_ok,
        execution_error=step.execution_error,
        usage_text=f"{step.tokens} ("
        + (
            ", ".join(
                f"{purpose} {u.get('input_tokens', 0)}+{u.get('output_tokens', 0)}"
                for purpose, u in step.usage.items()
            )
            or "no model call"
        )
        + ")",
        timings=", ".join(
            f"{name.removesuffix('_ms')} {_ms(value)}"
            for name, value in timings_json(step.timings).items()
        ),
    )


WITNESS_LABELS = {
    "didNetworkOccur": "network activity",
    "didDomMutate": "DOM mutation",
    "didUrlChange": "URL change",
}


def _witness(witness: dict | None, settled: bool) -> list[str]:
    """What the browser saw since the action, one phrase each (none without a witness)."""
    if witness is None:
        return []
    parts = [
        f"{label} {'yes' if witness.get(key) else 'no'}" for key, label in WITNESS_LABELS.items()
    ]
    if not settled:
        parts.append("page still busy at the 5 s cap")
    return parts


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"
