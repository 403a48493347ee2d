"""Plan run reports: ``report.json`` (the PlanRunReport) and one self-contained ``report.html``.

The page says first which model produced the run (and, when the scripted model played it, that
its answers were canned and cost $0), then shows the plan as a dependency picture (an inline SVG
laid out by dependency level, nodes coloured by status, superseded steps apart), the critic's
findings, the replan history, every step with its attempts and per-check results, and the steps a
replan replaced ("not allowed to complete") with their last diagnosis.

The page is the console's run page without its scripts and forms: the same Jinja2 templates
(``veriloop.server.pages``), autoescaped, so everything a step, a check, a model or a person
wrote shows as text.
"""

from __future__ import annotations

from pathlib import Path

from veriloop.schemas.plan_run import PlanRunReport
from veriloop.server.pages.render import render, run_view, stylesheet


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
    return render(
        "report.html",
        title=title or f"veriloop plan run {report.run_id}",
        css=stylesheet(),
        **run_view(
            report,
            model=model,
            endpoint=endpoint,
            scripted=scripted,
            final_check=final_check,
            final_check_passed=final_check_passed,
        ),
    )
