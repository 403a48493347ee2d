"""The evaluation report: a per-task plot, a markdown page and a self-contained HTML page.

Both pages start with the model that played the episodes; a scripted run says so above the figures.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from matplotlib.figure import (
    Figure,  # a bare Figure renders with Agg: no pyplot, no window, no global state
)

from veriloop.llm.endpoint import ModelEndpoint
from veriloop.runners.miniwob.results import EpisodeRecord, Summary, calls_per_action_line

PLOT_FILE = "per_task.png"
MARKDOWN_FILE = "report.md"
HTML_FILE = "report.html"
SUMMARY_FILE = "summary.json"


def plot_per_task(summary: Summary, path: Path) -> Path:
    """Grouped bars per task: success rate and false-completion share of its episodes.

    A series that is zero for every task draws no bar, so it gets no legend entry either: the title
    says there were none.
    """
    tasks = [t.task for t in summary.per_task]
    series = [
        ("success rate", [t.success_rate for t in summary.per_task], "#2b8a3e"),
        (
            "false completions / episodes",
            [t.false_completion_share for t in summary.per_task],
            "#c92a2a",
        ),
    ]
    empty = [label for label, values, _ in series if not any(values)]
    drawn = [s for s in series if s[0] not in empty]
    width = 0.8 / max(len(drawn), 1)
    xs = range(len(tasks))
    fig = Figure(figsize=(max(4.0, 0.9 * len(tasks) + 2), 3.6))
    ax = fig.subplots()
    for number, (label, values, colour) in enumerate(drawn):
        offset = (number - (len(drawn) - 1) / 2) * width
        ax.bar([x + offset for x in xs], values, width, label=label, color=colour)
    ax.set_xticks(list(xs), tasks, rotation=30, ha="right")
    ax.set_ylim(0, 1.25)  # headroom for the legend above the bars
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_ylabel("share of episodes")
    ax.set_title(
        "MiniWoB++ per task" + "".join(f"\n(no {label.split(' /')[0]})" for label in empty)
    )
    if drawn:
        ax.legend(loc="upper center", ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _fmt(value: float | None, percent: bool = True) -> str:
    if value is None:
        return "n/a"
    return f"{value:.1%}" if percent else f"{value:.2f}"


def _tables(
    summary: Summary, records: list[EpisodeRecord]
) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every table in the report; both renderers draw these."""
    c = summary.confusion
    headline = [
        ["episodes", str(summary.episodes)],
        ["success rate (raw reward > 0)", _fmt(summary.success_rate)],
        [
            "false completions (said done, reward <= 0)",
            f"{summary.false_completions} ({_fmt(summary.false_completion_rate)} of claims)",
        ],
        [
            "missed completions (success, not claimed)",
            f"{summary.missed_completions} ({_fmt(summary.missed_completion_rate)} of successes)",
        ],
        ["loop rate (same action, same page, 3+ times)", _fmt(summary.loop_rate)],
        [
            "no-change fast fails (no model call)",
            f"{summary.no_change_fast_fails} in {summary.episodes_with_fast_fail} episodes",
        ],
        ["mean steps", _fmt(summary.mean_steps, percent=False)],
        [
            "model calls / tokens in / tokens out",
            f"{summary.model_calls} / {summary.input_tokens} / {summary.output_tokens}",
        ],
        ["model calls per agent action (finish() included)", calls_per_action_line(summary)],
        ["cost (USD)", f"{summary.cost_usd:.4f}"],
        ["mean wall time (s)", _fmt(summary.mean_wall_time_s, percent=False)],
        ["harness errors", str(summary.errors)],
    ]
    confusion = [
        ["agent said done", str(c["done"]["success"]), str(c["done"]["failure"])],
        ["agent did not say done", str(c["not_done"]["success"]), str(c["not_done"]["failure"])],
    ]
    per_task = [
        [
            t.task,
            str(t.episodes),
            _fmt(t.success_rate),
            str(t.claimed),
            str(t.false_completions),
            str(t.missed_completions),
            str(t.loops),
        ]
        for t in summary.per_task
    ]
    episodes = [
        [
            r.task,
            str(r.episode),
            r.utterance,
            f"{r.raw_reward:+.2f}" if r.env_done else "not done",
            r.agent_status,
            str(r.steps),
            " ".join(r.actions),
            r.error or "",
        ]
        for r in sorted(records, key=lambda r: r.key)
    ]
    return [
        ("Summary", ["figure", "value"], headline),
        (
            "Confusion matrix (agent claim x environment)",
            ["", "env success", "env failure"],
            confusion,
        ),
        (
            "Per task",
            ["task", "episodes", "success", "claimed", "false compl.", "missed compl.", "loops"],
            per_task,
        ),
        (
            "Episodes",
            ["task", "ep", "utterance", "raw reward", "agent status", "steps", "actions", "error"],
            episodes,
        ),
    ]


SCRIPTED_WARNING = (
    "Scripted run: a canned playbook on a loopback server answered every model call, not a real "
    "model. The pages and their rewards are real, but the figures measure the playbook; cost $0."
)


def render_markdown(
    summary: Summary,
    records: list[EpisodeRecord],
    title: str,
    plot_name: str,
    model: ModelEndpoint,
) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [f"# {title}", "", f"Model: {model.label}.", ""]
    if model.scripted:
        lines += [f"> **{SCRIPTED_WARNING}**", ""]
    for name, header, rows in _tables(summary, records):
        lines += [f"## {name}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]
        lines.append("")
        if name.startswith("Per task"):
            lines += [f"![per-task success and false completions]({plot_name})", ""]
    return "\n".join(lines)


def render_html(
    summary: Summary,
    records: list[EpisodeRecord],
    title: str,
    plot_png: bytes,
    model: ModelEndpoint,
) -> str:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:1100px}"
        "table{border-collapse:collapse;margin-bottom:1.5em}td,th{border:1px solid #ccc;padding:4px 8px;"
        "text-align:left;font-size:13px;vertical-align:top}th{background:#f1f3f5}"
        ".scripted{background:#fff4d6;border:1px solid #e0b000;padding:10px 14px;border-radius:6px}"
        "</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>Model: {html.escape(model.label)}.</p>",
    ]
    if model.scripted:
        parts.append(f"<p class='scripted'><b>{html.escape(SCRIPTED_WARNING)}</b></p>")
    for name, header, rows in _tables(summary, records):
        parts.append(f"<h2>{html.escape(name)}</h2><table><tr>")
        parts += [f"<th>{html.escape(h)}</th>" for h in header]
        parts.append("</tr>")
        for row in rows:
            parts.append("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in row) + "</tr>")
        parts.append("</table>")
        if name.startswith("Per task"):
            data = base64.b64encode(plot_png).decode("ascii")
            parts.append(
                f"<img alt='per-task success and false completions' src='data:image/png;base64,{data}'>"
            )
    parts.append("</body></html>")
    return "".join(parts)


def write_report(
    out_dir: Path,
    summary: Summary,
    records: list[EpisodeRecord],
    *,
    model: ModelEndpoint,
    title: str = "veriloop MiniWoB++ evaluation",
) -> dict[str, Path]:
    """Write summary.json, the plot, report.md and report.html into ``out_dir``; return their paths."""
    out_dir = Path(out_dir)
    plot = plot_per_task(summary, out_dir / PLOT_FILE)
    paths = {
        "summary": out_dir / SUMMARY_FILE,
        "plot": plot,
        "markdown": out_dir / MARKDOWN_FILE,
        "html": out_dir / HTML_FILE,
    }
    paths["summary"].write_text(
        json.dumps({"model": model.to_wire(), **summary.model_dump(mode="json")}, indent=2),
        encoding="utf-8",
    )
    paths["markdown"].write_text(
        render_markdown(summary, records, title, PLOT_FILE, model), encoding="utf-8"
    )
    paths["html"].write_text(
        render_html(summary, records, title, plot.read_bytes(), model), encoding="utf-8"
    )
    return paths
