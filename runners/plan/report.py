"""Plan run reports: ``report.json`` (the PlanRunReport) and one self-contained ``report.html``.

The page says first which model produced the run (and, when the scripted model played it, that
its answers were canned and cost $0), then shows the plan as a dependency picture (an inline SVG
laid out by dependency level, nodes coloured by status, superseded steps apart), the critic's
findings, the replan history, every step with its attempts and per-check results, and the steps a
replan replaced ("not allowed to complete") with their last diagnosis.

Everything a step, a check, a model or a person wrote is untrusted text: every string is escaped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from html import escape
from pathlib import Path
from typing import Any

from veriloop.schemas.manifest import Manifest, ManifestStep
from veriloop.schemas.plan_run import AttemptReport, CheckResult, PlanRunReport, StepResult
from veriloop.schemas.usage import Usage, total_usage

OUTPUT_EXCERPT_CHARS = 1500
"""A step's or a check's output is cut to about this many characters on the page."""

STATUS_COLOURS = {
    "completed": ("#d9f2e1", "#1b7f3b"),
    "test_failed": ("#fbe0de", "#b3261e"),
    "failed": ("#fbe0de", "#b3261e"),
    "blocked": ("#fdebd3", "#a35a00"),
    "awaiting_review": ("#e3ecfb", "#1f4e79"),
    "running": ("#e3ecfb", "#1f4e79"),
    "testing": ("#e3ecfb", "#1f4e79"),
    "pending": ("#f4f6f9", "#5b6776"),
}
_KIND_LABELS = {"synthesis_gate": "gate", "human_review": "review", "plan": "sub-plan"}
RUN_STATUS_CLASS = {"completed": "ok", "awaiting_review": "warn", "running": "warn"}

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f4f6f9;color:#1d2733}
header{background:#1f4e79;color:#fff;padding:16px 28px}header h1{margin:0 0 4px;font-size:20px}
header code{background:#2d6296;color:#fff}
main{padding:16px 28px;max-width:1200px}section{margin-bottom:28px}
h2{font-size:17px;margin:22px 0 8px}h3{margin:0 0 6px;font-size:16px}
table{border-collapse:collapse}td,th{padding:3px 10px;text-align:left;vertical-align:top}
table.grid td,table.grid th{border-bottom:1px solid #dde3ea}
.card{background:#fff;border-radius:8px;padding:14px;margin:14px 0;box-shadow:0 1px 3px #0002}
.card.superseded{border-left:5px solid #b3261e}
code,pre{background:#eef1f5;border-radius:3px}code{padding:1px 5px}
pre{padding:8px;white-space:pre-wrap;word-break:break-word;max-height:320px;overflow:auto;margin:4px 0}
.ok{color:#1b7f3b;font-weight:600}.bad{color:#b3261e;font-weight:600}.warn{color:#a35a00;font-weight:600}
.muted{color:#5b6776}.badge{display:inline-block;padding:1px 8px;border-radius:10px;background:#eef1f5;margin-right:4px}
.banner{padding:10px 14px;border-radius:6px;margin:10px 0;font-weight:600}
.banner.scripted{background:#fff4d6;border:1px solid #e0b000;color:#5c4600}
.banner.real{background:#e3ecfb;border:1px solid #9db6dc;color:#1f3b5c}
.attempt{border-top:1px solid #e3e8ee;margin-top:10px;padding-top:8px}
svg text{font:12px system-ui,sans-serif}
"""


def write_plan_report(
    report: PlanRunReport,
    out_dir: str | Path,
    *,
    model: str | None = None,
    endpoint: str | None = None,
    scripted: bool = False,
    title: str | None = None,
    final_check: str | None = None,
    final_check_passed: bool | None = None,
) -> Path:
    """Write ``report.json`` and ``report.html`` under ``out_dir``; return the HTML path.

    ``model`` / ``endpoint``: what produced the run (shown at the top). ``scripted``: the scripted
    model played it (the page says so and shows every cost as $0). ``final_check``: an
    independent verdict to show beside the run's own status (the demo's final test-suite run).
    """
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    (root / "report.json").write_text(report.model_dump_json(indent=2), encoding="utf-8")
    html_path = root / "report.html"
    html_path.write_text(
        render_plan_report(
            report,
            model=model,
            endpoint=endpoint,
            scripted=scripted,
            title=title,
            final_check=final_check,
            final_check_passed=final_check_passed,
        ),
        encoding="utf-8",
    )
    return html_path


def render_plan_report(
    report: PlanRunReport,
    *,
    model: str | None = None,
    endpoint: str | None = None,
    scripted: bool = False,
    title: str | None = None,
    final_check: str | None = None,
    final_check_passed: bool | None = None,
) -> str:
    """The HTML page of :func:`write_plan_report`."""
    title = title or f"veriloop plan run {report.run_id}"
    page = _Page(report, scripted=scripted)
    body = "".join(
        [
            _model_banner(report, model, endpoint, scripted),
            page.summary(final_check, final_check_passed),
            page.picture(),
            page.critique(),
            page.replans(),
            page.steps(),
            page.superseded_steps(),
            page.pending(),
            page.usage_table(),
        ]
    )
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
        f"<style>{STYLE}</style></head><body><header><h1>{_e(title)}</h1>"
        f"<div>run <code>{_e(report.run_id)}</code> · status {_e(report.status)}"
        f"{' · ' + _e(report.goal) if report.goal else ''}"
        f"{' · started ' + _e(report.started_at.isoformat(timespec='seconds')) if report.started_at else ''}"
        f"{' · ended ' + _e(report.ended_at.isoformat(timespec='seconds')) if report.ended_at else ''}"
        f"{f' · {report.duration_s:.1f} s' if report.duration_s is not None else ''}</div></header>"
        f"<main>{body}</main></body></html>"
    )


# -- helpers -------------------------------------------------------------------------------------


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _excerpt(value: Any, limit: int = OUTPUT_EXCERPT_CHARS) -> str:
    if value is None or value == "":
        return ""
    text = value if isinstance(value, str) else json.dumps(value, indent=1, default=str)
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 2) // 2
    return f"{text[:keep]}\n... [{len(text) - 2 * keep} characters cut] ...\n{text[-keep:]}"


def _pre(value: Any, limit: int = OUTPUT_EXCERPT_CHARS) -> str:
    text = _excerpt(value, limit)
    return f"<pre>{_e(text)}</pre>" if text else ""


def _usage(usage: dict[str, dict] | None, scripted: bool) -> Usage:
    total = total_usage(usage)
    return total.model_copy(update={"cost_usd": 0.0}) if scripted else total


def _money(usage: Usage) -> str:
    return f"${usage.cost_usd:.4f}"


def _model_banner(
    report: PlanRunReport, model: str | None, endpoint: str | None, scripted: bool
) -> str:
    calls = total_usage(report.usage).calls
    if scripted:
        return (
            "<div class='banner scripted'>Scripted model: every model answer in this run was canned by "
            "a local playbook (veriloop's ScriptedModelServer on loopback), not produced by a real "
            f"model. Model name <code>{_e(model or 'scripted')}</code>, {calls} scripted calls, "
            "cost $0. The checks, test runs and the graph were real.</div>"
        )
    if calls == 0:
        return "<div class='banner real'>No model was called in this run (shell and python steps only).</div>"
    where = f" via {_e(endpoint)}" if endpoint else ""
    name = _e(model) if model else "(model not recorded)"
    return f"<div class='banner real'>Model: <code>{name}</code>{where}, {calls} calls.</div>"


def dependency_levels(steps: list[ManifestStep]) -> list[list[str]]:
    """Steps grouped by dependency level (a step's level is one more than its deepest dependency);
    unknown dependencies are ignored and steps caught in a cycle go last."""
    ids = [s.id for s in steps]
    known = set(ids)
    deps = {s.id: [d for d in s.depends_on if d in known and d != s.id] for s in steps}
    level: dict[str, int] = {}
    remaining = list(dict.fromkeys(ids))
    while remaining:
        ready = [sid for sid in remaining if all(d in level for d in deps[sid])]
        if not ready:
            top = 1 + max(level.values(), default=-1)
            for sid in remaining:
                level[sid] = top
            break
        for sid in ready:
            level[sid] = 1 + max((level[d] for d in deps[sid]), default=-1)
        remaining = [sid for sid in remaining if sid not in level]
    levels: list[list[str]] = [[] for _ in range(1 + max(level.values(), default=-1))]
    for sid in dict.fromkeys(ids):
        levels[level[sid]].append(sid)
    return levels


class _Page:
    def __init__(self, report: PlanRunReport, *, scripted: bool) -> None:
        self.report = report
        self.scripted = scripted
        self.manifest: Manifest | None = report.manifest

    def _spec(self, step_id: str) -> ManifestStep | None:
        if self.manifest is None:
            return None
        try:
            return self.manifest.step(step_id)
        except KeyError:
            return None

    # -- summary ---------------------------------------------------------------------------

    def summary(self, final_check: str | None, final_check_passed: bool | None) -> str:
        r = self.report
        total = _usage(r.usage, self.scripted)
        counts: dict[str, int] = {}
        for result in r.steps.values():
            counts[result.status] = counts.get(result.status, 0) + 1
        count_text = (
            ", ".join(f"{n} {_e(status)}" for status, n in sorted(counts.items())) or "none"
        )
        attempts = sum(len(s.attempts) for s in r.steps.values()) + sum(
            len(s.attempts) for s in r.superseded
        )
        rows = [
            (
                "status",
                f"<span class='{RUN_STATUS_CLASS.get(r.status, 'bad')}'>{_e(r.status)}</span>",
            ),
            ("steps", f"{len(r.steps)} ({count_text})"),
            ("attempts", str(attempts)),
            ("replans", str(len(r.replan_history))),
            ("superseded steps", str(len(r.superseded))),
            (
                "tokens",
                f"{total.input_tokens} in / {total.output_tokens} out, {total.calls} model calls, {_money(total)}",
            ),
        ]
        if r.halted or r.halt_reason:
            rows.append(("halted", f"<span class='bad'>{_e(r.halt_reason or 'yes')}</span>"))
        if final_check:
            cls = "ok" if final_check_passed else "bad"
            rows.append(("independent check", f"<span class='{cls}'>{_e(final_check)}</span>"))
        cells = "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in rows)
        return f"<section><h2>Summary</h2><table class='summary'>{cells}</table></section>"

    # -- the dependency picture ----------------------------------------------------------------

    def picture(self) -> str:
        steps = list(self.manifest.steps) if self.manifest else []
        if not steps and not self.report.steps:
            return ""
        if not steps:  # no manifest (a rejected run): the results alone, one level
            steps = [ManifestStep(id=sid, executor="llm") for sid in self.report.steps]
        levels = dependency_levels(steps)
        width_node, height_node, gap_x, gap_y, pad = 180, 46, 60, 18, 14
        pos: dict[str, tuple[int, int]] = {}
        for col, ids in enumerate(levels):
            for row, sid in enumerate(ids):
                pos[sid] = (
                    pad + col * (width_node + gap_x),
                    pad + 18 + row * (height_node + gap_y),
                )
        rows = max((len(ids) for ids in levels), default=1)
        superseded = self.report.superseded
        main_height = pad + 18 + rows * (height_node + gap_y)
        extra = (40 + height_node + gap_y) if superseded else 0
        width = max(
            pad * 2 + len(levels) * (width_node + gap_x),
            pad * 2 + len(superseded) * (width_node + 20),
            400,
        )
        height = main_height + extra + pad
        parts = [
            f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
            f"viewBox='0 0 {width} {height}' role='img' aria-label='plan dependency picture'>",
            "<defs><marker id='arrow' viewBox='0 0 10 10' refX='10' refY='5' markerWidth='7' "
            "markerHeight='7' orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' fill='#7b8794'/>"
            "</marker></defs>",
        ]
        for col in range(len(levels)):
            x = pad + col * (width_node + gap_x)
            parts.append(f"<text x='{x}' y='{pad + 4}' fill='#5b6776'>level {col}</text>")
        for step in steps:
            if step.id not in pos:
                continue
            x2, y2 = pos[step.id]
            for dep in step.depends_on:
                if dep in pos:
                    x1, y1 = pos[dep]
                    parts.append(
                        f"<line x1='{x1 + width_node}' y1='{y1 + height_node // 2}' x2='{x2 - 2}' "
                        f"y2='{y2 + height_node // 2}' stroke='#7b8794' stroke-width='1.4' "
                        "marker-end='url(#arrow)'/>"
                    )
        for step in steps:
            if step.id not in pos:
                continue
            result = self.report.steps.get(step.id)
            parts.append(self._node(step.id, step, result, *pos[step.id], width_node, height_node))
        if superseded:
            y = main_height + 22
            parts.append(
                f"<text x='{pad}' y='{y - 6}' fill='#b3261e'>replaced by a replan (not allowed to complete)</text>"
            )
            for i, result in enumerate(superseded):
                parts.append(
                    self._node(
                        result.step_id,
                        None,
                        result,
                        pad + i * (width_node + 20),
                        y,
                        width_node,
                        height_node,
                        dashed=True,
                    )
                )
        parts.append("</svg>")
        legend = " ".join(
            f"<span class='badge' style='background:{fill};color:{stroke}'>{_e(status)}</span>"
            for status, (fill, stroke) in STATUS_COLOURS.items()
            if status in {"completed", "test_failed", "failed", "blocked", "awaiting_review"}
        )
        return (
            "<section><h2>The plan</h2><div class='card' style='overflow-x:auto'>"
            + "".join(parts)
            + f"<p class='muted'>Arrows point from a dependency to the step that uses it. {legend}</p></div></section>"
        )

    def _node(
        self,
        step_id: str,
        spec: ManifestStep | None,
        result: StepResult | None,
        x: int,
        y: int,
        w: int,
        h: int,
        *,
        dashed: bool = False,
    ) -> str:
        status = result.status if result else "pending"
        fill, stroke = STATUS_COLOURS.get(status, ("#f4f6f9", "#5b6776"))
        kind = ""
        if spec is not None:
            kind = _KIND_LABELS.get(spec.type, spec.executor)
        label = step_id if len(step_id) <= 22 else step_id[:21] + "…"
        sub = status + (f" · {len(result.attempts)} att." if result and result.attempts else "")
        if kind:
            sub = f"{kind} · {sub}"
        dash = " stroke-dasharray='5 3'" if dashed else ""
        return (
            f"<g><title>{_e(step_id)}: {_e(status)}</title>"
            f"<rect x='{x}' y='{y}' width='{w}' height='{h}' rx='7' fill='{fill}' stroke='{stroke}' "
            f"stroke-width='1.6'{dash}/>"
            f"<text x='{x + 9}' y='{y + 19}' font-weight='600' fill='#1d2733'>{_e(label)}</text>"
            f"<text x='{x + 9}' y='{y + 36}' fill='{stroke}'>{_e(sub[:29])}</text></g>"
        )

    # -- critic, replans -----------------------------------------------------------------------

    def critique(self) -> str:
        c = self.report.critique
        if c is None:
            return ""
        findings = "".join(
            f"<tr><td>{_e(f.rule)}</td><td class='{'bad' if f.severity == 'critical' else 'warn'}'>"
            f"{_e(f.severity)}</td><td>{_e(f.message)}</td><td>{_e(', '.join(f.step_ids))}</td></tr>"
            for f in c.findings
        )
        table = (
            "<table class='grid'><tr><th>rule</th><th>severity</th><th>finding</th><th>steps</th></tr>"
            f"{findings}</table>"
            if findings
            else "<p class='ok'>No findings.</p>"
        )
        recs = "".join(f"<li>{_e(r)}</li>" for r in c.recommendations)
        llm = (
            ""
            if c.llm_approved is None
            else f"<p>LLM plan review: {'approved' if c.llm_approved else '<span class=bad>not approved</span>'}</p>"
        )
        return (
            "<section><h2>The critic's findings</h2><div class='card'>"
            f"<p><b>Critic</b> <span class='muted'>{_e(c.summary)}</span></p>{llm}{table}"
            + (f"<p><b>Recommendations</b></p><ul>{recs}</ul>" if recs else "")
            + "</div></section>"
        )

    def replans(self) -> str:
        history = self.report.replan_history
        if not history:
            return ""
        cards = []
        for record in history:
            diagnosis = "".join(
                f"<li><code>{_e(step_id)}</code>: {_e(why)}</li>"
                for step_id, why in record.diagnosis.items()
            )
            cards.append(
                f"<div class='card'><h3>Replan {record.round}</h3>"
                f"<p><b>Blocked</b> {_ids(record.blocked)} · <b>replaced</b> {_ids(record.replaced)}"
                f" · <b>added</b> {_ids(record.added)} · <b>removed</b> {_ids(record.removed)}</p>"
                f"<p><b>Why</b></p><ul>{diagnosis}</ul>"
                f"<p><b>What changed</b> {_e(record.summary)}</p></div>"
            )
        return "<section><h2>Replan history</h2>" + "".join(cards) + "</section>"

    # -- steps ---------------------------------------------------------------------------------

    def steps(self) -> str:
        cards = [self._step_card(result) for result in self.report.steps.values()]
        return "<section><h2>Steps</h2>" + "".join(cards) + "</section>"

    def superseded_steps(self) -> str:
        if not self.report.superseded:
            return ""
        cards = [self._step_card(result, superseded=True) for result in self.report.superseded]
        return (
            "<section><h2>Not allowed to complete: steps a replan replaced</h2>"
            "<p class='muted'>These steps ended without every check passing (whatever their notes "
            "claimed), so their failure policy asked for a replan and a new step took their place.</p>"
            + "".join(cards)
            + "</section>"
        )

    def _step_card(self, result: StepResult, *, superseded: bool = False) -> str:
        spec = None if superseded else self._spec(result.step_id)
        usage = _usage(result.usage, self.scripted)
        last = result.attempts[-1] if result.attempts else None
        checks = last.checks if last else []
        passed = sum(1 for c in checks if c.passed)
        cls = (
            "ok"
            if result.status == "completed"
            else "bad"
            if result.status in ("failed", "test_failed")
            else "warn"
        )
        badges = [f"<span class='{cls}'>{_e(result.status)}</span>"]
        if result.verification_status:
            badges.append(
                f"<span class='badge'>verification: {_e(result.verification_status)}</span>"
            )
        if spec is not None:
            badges.append(f"<span class='badge'>{_e(spec.type)} / {_e(spec.executor)}</span>")
            if spec.critical:
                badges.append("<span class='badge'>critical</span>")
            badges.append(f"<span class='badge'>on_failure: {_e(spec.on_failure)}</span>")
            if spec.origin == "model":
                badges.append("<span class='badge'>written by a model</span>")
        if result.disposition is not None:
            badges.append(f"<span class='badge'>disposition: {_e(result.disposition)}</span>")
        if result.oscillated:
            badges.append("<span class='badge'>stopped early: oscillating</span>")
        facts = (
            f"<p><b>Attempts</b> {len(result.attempts)} · <b>checks passed</b> {passed}/{len(checks)}"
            f" (last attempt) · <b>tokens</b> {usage.input_tokens + usage.output_tokens}"
            f" ({usage.calls} calls) · <b>cost</b> {_money(usage)}"
            + (f" · <b>time</b> {result.duration_s:.1f} s" if result.duration_s is not None else "")
            + "</p>"
        )
        depends = (
            f"<p class='muted'>depends on {_ids(spec.depends_on)}</p>"
            if spec and spec.depends_on
            else ""
        )
        diagnosis = (
            f"<p><b>{'Last diagnosis' if superseded else 'Diagnosis'}</b> <span class='bad'>{_e(result.diagnosis)}</span></p>"
            if result.diagnosis
            else ""
        )
        notes = f"<p><b>Notes</b> <code>{_e(result.notes)}</code></p>" if result.notes else ""
        output = _pre(result.output)
        review = ""
        if result.review:
            review = (
                f"<p><b>Human review</b> {'approved' if result.review.get('approved') else 'rejected'}"
                f" <span class='muted'>{_e(result.review.get('comment', ''))}</span></p>"
            )
        sub_run = ""
        if result.sub_run:
            child = result.sub_run.get("steps") or {}
            rows = "".join(
                f"<li><code>{_e(sid)}</code>: {_e((r or {}).get('status', ''))}</li>"
                for sid, r in child.items()
            )
            sub_run = (
                f"<p><b>Nested plan</b> {_e(result.sub_run.get('status', ''))}</p><ul>{rows}</ul>"
            )
        attempts = "".join(self._attempt(a) for a in result.attempts)
        css = "card superseded" if superseded else "card"
        return (
            f"<article class='{css}' id='{'superseded-' if superseded else 'step-'}{_e(result.step_id)}'>"
            f"<h3>{_e(result.step_id)}</h3><p>{' '.join(badges)}</p>{depends}{facts}{diagnosis}{notes}{review}"
            + (f"<p><b>Output</b></p>{output}" if output else "")
            + sub_run
            + attempts
            + "</article>"
        )

    def _attempt(self, attempt: AttemptReport) -> str:
        usage = _usage(attempt.usage, self.scripted)
        sandbox = {True: ", sandboxed", False: ", unsandboxed"}.get(attempt.sandboxed, "")
        head = (
            f"<b>Attempt {attempt.run_number}</b> "
            + (
                "<span class='ok'>passed</span>"
                if attempt.passed
                else "<span class='bad'>failed</span>"
            )
            + f" <span class='muted'>{attempt.duration_s:.1f} s{sandbox}, "
            f"{usage.input_tokens + usage.output_tokens} tokens, {_money(usage)}</span>"
        )
        error = (
            f"<p class='bad'>The executor itself failed: {_e(attempt.error)}</p>"
            if not attempt.execution_ok
            else ""
        )
        notes = f"<p>Notes <code>{_e(attempt.notes)}</code></p>" if attempt.notes else ""
        rows = "".join(_check_row(c) for c in attempt.checks)
        checks = (
            "<table class='grid'><tr><th>check</th><th>type</th><th>result</th><th>diagnosis / output</th></tr>"
            f"{rows}</table>"
            if rows
            else "<p class='muted'>no checks ran</p>"
        )
        output = _pre(attempt.output_excerpt, 800)
        return (
            f"<div class='attempt'><p>{head}</p>{error}{notes}{checks}"
            + (
                f"<details><summary>output of this attempt</summary>{output}</details>"
                if output
                else ""
            )
            + "</div>"
        )

    # -- pending, usage ------------------------------------------------------------------------

    def pending(self) -> str:
        if not self.report.pending_reviews:
            return ""
        items = "".join(
            f"<li><code>{_e(p.step_id)}</code>: {_e(p.question)}</li>"
            for p in self.report.pending_reviews
        )
        return f"<section><h2>Waiting for a person</h2><ul>{items}</ul></section>"

    def usage_table(self) -> str:
        if not self.report.usage:
            return ""
        rows = []
        for purpose, raw in sorted(self.report.usage.items()):
            u = _usage({purpose: raw}, self.scripted)
            rows.append(
                f"<tr><td>{_e(purpose)}</td><td>{u.calls}</td><td>{u.input_tokens}</td>"
                f"<td>{u.output_tokens}</td><td>{_money(u)}</td></tr>"
            )
        return (
            "<section><h2>Model usage by purpose</h2><table class='grid'><tr><th>purpose</th>"
            "<th>calls</th><th>input tokens</th><th>output tokens</th><th>cost</th></tr>"
            + "".join(rows)
            + "</table></section>"
        )


def _ids(ids: Iterable[str]) -> str:
    listed = [f"<code>{_e(i)}</code>" for i in ids]
    return ", ".join(listed) if listed else "<span class='muted'>none</span>"


def _check_row(check: CheckResult) -> str:
    if check.passed:
        verdict = "<span class='ok'>passed</span>"
    elif check.errored:
        verdict = "<span class='bad'>errored</span>"
    else:
        verdict = "<span class='bad'>failed</span>"
    details = _e(check.diagnosis)
    if check.output and check.passed:
        details += f"<details><summary>output</summary>{_pre(check.output, 1200)}</details>"
    elif check.output:
        details += _pre(check.output, 1200)
    return (
        f"<tr><td><code>{_e(check.name)}</code></td><td>{_e(check.type)}</td><td>{verdict}</td>"
        f"<td>{details}</td></tr>"
    )
