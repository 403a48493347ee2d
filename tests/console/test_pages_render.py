"""The shared renderer without a server: what a reviewer is shown, run metadata when a report
has it, the picture's colours, and autoescaping of everything a step or a model wrote."""

from __future__ import annotations

from veriloop.engines.plan.planning import render_task
from veriloop.schemas.manifest import Manifest, ManifestStep
from veriloop.schemas.plan_run import PendingReview, PlanRunReport, StepResult
from veriloop.server.pages.render import picture, render, review_views, run_view

HOSTILE = '<script>x()</script>"><img src=x onerror=alert(1)>'


def _paused() -> PlanRunReport:
    steps = [
        ManifestStep(id="build", executor="python", function="mark"),
        ManifestStep(
            id="review",
            type="human_review",
            executor="human",
            input="Ship {{build}}?",
            depends_on=["build"],
        ),
    ]
    built = {"artifact": HOSTILE}
    return PlanRunReport(
        run_id="r1",
        status="awaiting_review",
        manifest=Manifest(steps=steps),
        steps={"build": StepResult(step_id="build", status="completed", output=built)},
        pending_reviews=[
            PendingReview(
                step_id="review",
                interrupt_id="i1",
                question=render_task(steps[1], {"build": built}),
                context={"kind": "human_review"},
            )
        ],
    )


def test_a_reviewer_sees_the_input_and_each_dependency_once_without_prompt_markers():
    report = _paused()
    assert "STEP_RESULTS" in report.pending_reviews[0].question  # what the model-facing text has
    [view] = review_views(report)
    # The input as the step sees it, its placeholder filled in; so the result is not shown again.
    assert (
        view.task.startswith("Ship {") and "{{build}}" not in view.task and "artifact" in view.task
    )
    assert view.depends == []
    html = render("run.html", title="t", nav="runs", fragment=True, **run_view(report, forms=True))
    assert "STEP_RESULTS" not in html
    assert html.count("&lt;script&gt;x()&lt;/script&gt;") == 2  # the review card and the step
    assert "<script>" not in html and "<img" not in html
    assert 'form class="review" data-run="r1" data-step="review"' in html


def test_run_metadata_is_shown_when_the_report_carries_it():
    class TimedReport(PlanRunReport):
        started_at: str = "2026-11-27T10:00:00+00:00"
        ended_at: str = "2026-11-27T10:02:30+00:00"
        duration_s: float = 150.0

    class TimedStep(StepResult):
        duration_s: float = 12.5

    report = TimedReport(
        run_id="r2",
        status="completed",
        steps={"a": TimedStep(step_id="a", status="completed")},
    )
    html = render("run.html", title="t", nav="runs", fragment=True, **run_view(report))
    assert "2026-11-27T10:00:00+00:00" in html and "2026-11-27T10:02:30+00:00" in html
    assert "2.5 min" in html and "12.5 s" in html
    plain = render(
        "run.html",
        title="t",
        nav="runs",
        fragment=True,
        **run_view(PlanRunReport(run_id="r3", status="completed")),
    )
    assert "<th>duration</th>" not in plain


def test_the_picture_places_steps_by_level_and_colours_them_by_status():
    report = _paused()
    pic = picture(report)
    nodes = {n.step_id: n for n in pic.nodes}
    assert nodes["build"].x < nodes["review"].x and nodes["build"].status == "completed"
    assert nodes["review"].status == "pending" and len(pic.edges) == 1
    html = render("run.html", title="t", nav="runs", fragment=True, **run_view(report))
    assert 'class="node s-completed"' in html and 'class="node s-pending"' in html


def test_usage_is_shown_per_purpose_and_model():
    usage = {
        "planning": {
            "input_tokens": 300,
            "output_tokens": 40,
            "cost_usd": 0.25,
            "calls": 2,
            "by_model": {
                "gpt-big": {"input_tokens": 200, "output_tokens": 30, "cost_usd": 0.2, "calls": 1},
                "gpt-small": {
                    "input_tokens": 100,
                    "output_tokens": 10,
                    "cost_usd": 0.05,
                    "calls": 1,
                },
            },
        }
    }
    report = PlanRunReport(run_id="r4", status="completed", usage=usage)
    html = render("run.html", title="t", nav="runs", fragment=True, **run_view(report))
    assert (
        "<td>planning</td><td>gpt-big</td><td>1</td><td>200</td><td>30</td><td>$0.2000</td>" in html
    )
    assert (
        "<td>planning</td><td>gpt-small</td><td>1</td><td>100</td><td>10</td><td>$0.0500</td>"
        in html
    )
    scripted = render(
        "run.html", title="t", nav="runs", fragment=True, **run_view(report, scripted=True)
    )
    assert "$0.2000" not in scripted and "$0.0000" in scripted
