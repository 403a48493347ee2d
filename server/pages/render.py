"""The one Jinja2 environment of the console pages and the HTML reports (a plan run's, a browser run's).

Autoescaping is on for every template: whatever a step, a check, a model or a person wrote is
shown as text. The dependency picture is laid out here (columns by dependency level) and drawn
by ``_picture.svg.html`` as inline SVG, so the page needs no script to show it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from veriloop.engines.plan.planning import fill_placeholders
from veriloop.schemas.actions import parse_action
from veriloop.schemas.api import TaskDetail, VerificationSummary
from veriloop.schemas.manifest import ManifestStep
from veriloop.schemas.plan_run import PlanRunReport, StepResult
from veriloop.schemas.usage import Usage, total_usage

OUTPUT_EXCERPT_CHARS = 1500
"""A step's or a check's output is cut to about this many characters on a page."""
STATUSES = ("completed", "test_failed", "failed", "blocked", "awaiting_review", "cancelled")
"""The statuses the picture's legend names (in-flight ones share awaiting_review's colour)."""
KIND_LABELS = {"synthesis_gate": "gate", "human_review": "review", "plan": "sub-plan"}


@cache
def environment() -> Environment:
    """The shared environment (templates are package data of ``veriloop.server.pages``)."""
    env = Environment(
        loader=PackageLoader("veriloop.server.pages", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=StrictUndefined,
    )
    env.filters.update(
        excerpt=excerpt, money=money, as_usage=as_usage, duration=duration, moment=moment
    )
    env.globals.update(picture=picture, status_class=status_class, STATUSES=STATUSES)
    return env


def render(template: str, **context: Any) -> str:
    """Render ``template`` (autoescaped) with ``context``."""
    return environment().get_template(template).render(**context)


@cache
def stylesheet() -> Markup:
    """The console's stylesheet, inlined by the self-contained report."""
    text = resources.files("veriloop.server.pages").joinpath("static/console.css").read_text()
    return Markup(text.replace("</", "<\\/"))  # our own file; never closes the <style> early


# -- filters --------------------------------------------------------------------------------


def excerpt(value: Any, limit: int = OUTPUT_EXCERPT_CHARS) -> str:
    """``value`` as text (JSON for structures), its middle cut past ``limit`` characters."""
    if value is None or value == "":
        return ""
    text = value if isinstance(value, str) else json.dumps(value, indent=1, default=str)
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 2) // 2
    return f"{text[:keep]}\n... [{len(text) - 2 * keep} characters cut] ...\n{text[-keep:]}"


def as_usage(usage: Mapping[str, Any] | None, scripted: bool = False) -> Usage:
    """The total of a per-purpose usage dict; a scripted run's answers cost nothing."""
    total = total_usage(usage)
    return total.model_copy(update={"cost_usd": 0.0}) if scripted else total


def money(usage: Usage | float) -> str:
    cost = usage if isinstance(usage, int | float) else usage.cost_usd
    return f"${cost:.4f}"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def moment(when: datetime | str | None) -> str:
    """A UTC time to the second, as ISO 8601 (what the CLI prints too); a report read back from
    JSON carries it as text already."""
    if isinstance(when, datetime):
        return when.isoformat(timespec="seconds")
    return when or ""


def status_class(status: str) -> str:
    """ok / bad / warn for a run's or a step's status."""
    if status == "completed":
        return "ok"
    if status in ("failed", "test_failed", "rejected"):
        return "bad"
    return "warn"


# -- the dependency picture -----------------------------------------------------------------

NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 180, 46, 60, 18, 14


@dataclass(frozen=True)
class Node:
    """One box of the picture."""

    step_id: str
    x: int
    y: int
    status: str
    sub: str
    dashed: bool = False

    @property
    def label(self) -> str:
        return self.step_id if len(self.step_id) <= 22 else self.step_id[:21] + "…"


@dataclass(frozen=True)
class Edge:
    x1: int
    y1: int
    x2: int
    y2: int


@dataclass(frozen=True)
class Picture:
    """Boxes, arrows and level captions of a run's dependency picture."""

    width: int
    height: int
    levels: list[int]
    nodes: list[Node]
    edges: list[Edge]
    superseded_y: int | None
    w: int = NODE_W
    h: int = NODE_H
    pad: int = PAD


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


def picture(report: PlanRunReport) -> Picture | None:
    """The layout of ``report``'s dependency picture (None when there is nothing to draw)."""
    steps = list(report.manifest.steps) if report.manifest else []
    if not steps and not report.steps:
        return None
    if not steps:  # no manifest (a rejected run): the results alone, one level
        steps = [ManifestStep(id=sid, executor="llm") for sid in report.steps]
    levels = dependency_levels(steps)
    pos: dict[str, tuple[int, int]] = {}
    for col, ids in enumerate(levels):
        for row, sid in enumerate(ids):
            pos[sid] = (PAD + col * (NODE_W + GAP_X), PAD + 18 + row * (NODE_H + GAP_Y))
    rows = max((len(ids) for ids in levels), default=1)
    main_height = PAD + 18 + rows * (NODE_H + GAP_Y)
    edges = [
        Edge(pos[dep][0] + NODE_W, pos[dep][1] + NODE_H // 2, x - 2, y + NODE_H // 2)
        for step in steps
        for (x, y) in [pos[step.id]]
        for dep in step.depends_on
        if dep in pos
    ]
    nodes = [_node(step.id, step, report.steps.get(step.id), *pos[step.id]) for step in steps]
    superseded_y = None
    if report.superseded:
        superseded_y = main_height + 22
        nodes += [
            _node(r.step_id, None, r, PAD + i * (NODE_W + 20), superseded_y, dashed=True)
            for i, r in enumerate(report.superseded)
        ]
    width = max(
        PAD * 2 + len(levels) * (NODE_W + GAP_X),
        PAD * 2 + len(report.superseded) * (NODE_W + 20),
        400,
    )
    extra = (40 + NODE_H + GAP_Y) if report.superseded else 0
    return Picture(
        width=width,
        height=main_height + extra + PAD,
        levels=[PAD + col * (NODE_W + GAP_X) for col in range(len(levels))],
        nodes=nodes,
        edges=edges,
        superseded_y=superseded_y,
    )


def _node(
    step_id: str,
    spec: ManifestStep | None,
    result: StepResult | None,
    x: int,
    y: int,
    *,
    dashed: bool = False,
) -> Node:
    status = result.status if result else "pending"
    sub = status + (f" · {len(result.attempts)} att." if result and result.attempts else "")
    if spec is not None:
        sub = f"{KIND_LABELS.get(spec.type, spec.executor)} · {sub}"
    return Node(step_id, x, y, status, sub[:29], dashed)


# -- a run's view ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ReviewView:
    """What a reviewer judges: the step's input and its dependencies' results, each once and
    without the fences a model's prompt wraps them in; the commands of a command approval."""

    index: int
    run_id: str
    goal: str
    step_id: str
    kind: str
    question: str
    task: Any
    depends: list[tuple[str, Any]]
    commands: list[str]


def review_views(report: PlanRunReport, start: int = 0) -> list[ReviewView]:
    """The run's pending reviews and command approvals (``index`` numbers them on a page)."""
    views = []
    for i, pending in enumerate(report.pending_reviews):
        spec = _spec(report, pending.step_id)
        results = {
            d: report.steps[d].output
            for d in (spec.depends_on if spec else [])
            if d in report.steps
        }
        # The input as the step sees it ({{dep}} filled in); the results it does not show, apart.
        task, unshown = fill_placeholders(spec, results) if spec else (pending.question, {})
        views.append(
            ReviewView(
                index=start + i,
                run_id=report.run_id,
                goal=report.goal,
                step_id=pending.step_id,
                kind=str(pending.context.get("kind", "human_review")),
                question=pending.question,
                task=task,
                depends=list(unshown.items()),
                commands=[str(c) for c in pending.context.get("commands") or []],
            )
        )
    return views


def run_view(report: PlanRunReport, *, scripted: bool = False, **extra: Any) -> dict[str, Any]:
    """The context ``_run.html`` reads."""
    counts: dict[str, int] = {}
    for result in report.steps.values():
        counts[result.status] = counts.get(result.status, 0) + 1
    attempts = sum(len(s.attempts) for s in report.steps.values())
    return {
        "report": report,
        "scripted": scripted,
        "specs": {s.id: s for s in report.manifest.steps} if report.manifest else {},
        "counts": sorted(counts.items()),
        "attempts": attempts + sum(len(s.attempts) for s in report.superseded),
        "reviews": review_views(report),
        "executing": False,
        "error": None,
        "forms": False,
        "show_run": False,
        "final_check": None,
        "final_check_passed": None,
        "model": report.model or None,
        "endpoint": None,
        **extra,
    }


def _spec(report: PlanRunReport, step_id: str) -> ManifestStep | None:
    if report.manifest is None:
        return None
    try:
        return report.manifest.step(step_id)
    except KeyError:
        return None


# -- a browser task's steps (the console's task page and the runner's report) ----------------


@dataclass(frozen=True)
class BrowserStep:
    """One action of a browser task as ``_browser_step.html`` shows it: the action with its target
    element's name, the page it was chosen on and the verdict that judged it (the next step's).
    The runner's report adds what only it has: the screenshot, what the browser saw after the
    action, how executing it went, tokens and timings."""

    number: int
    action: str
    target: str | None
    url: str
    thought: str
    verdict: VerificationSummary | None
    reason: str = ""
    """The verdict's reason in full where the page has it, else its summary."""
    pending: bool = False
    """No verdict yet because the task is still running (not because it ended)."""
    source: str | None = None
    focus: str | None = None
    correction_strategy: str | None = None
    image: str = ""
    witness: tuple[str, ...] = ()
    execution_ok: bool | None = None
    execution_error: str | None = None
    usage_text: str = ""
    timings: str = ""

    @property
    def element_id(self) -> int | None:
        """The element's number the action names (169 for click(169)); a recorded action parses."""
        return parse_action(self.action).element_id


def task_steps(detail: TaskDetail) -> list[BrowserStep]:
    """The steps of a task the service keeps (``GET /api/tasks/{id}``), each with its verdict."""
    verdicts = {v.step_index: v for v in detail.verifications}
    steps = []
    for action in detail.actions:
        v = verdicts.get(action.step_index)
        before = action.before_state
        steps.append(
            BrowserStep(
                number=action.step_index + 1,
                action=action.action,
                target=action.target,
                url=before.url if before else "",
                thought=action.thought,
                verdict=VerificationSummary.model_validate(v.model_dump()) if v else None,
                reason=v.reason if v else "",
                pending=detail.status == "executing",
                source=action.source,
                focus=before.active_element if before else None,
                correction_strategy=action.correction_strategy,
            )
        )
    return steps
