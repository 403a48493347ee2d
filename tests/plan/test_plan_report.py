"""The plan report: every string escaped, the model stated, superseded steps and replans shown."""

from __future__ import annotations

import json
from pathlib import Path

from veriloop.runners.plan.report import write_plan_report
from veriloop.schemas.manifest import Manifest, ManifestStep
from veriloop.schemas.plan_run import (
    AttemptReport,
    CheckResult,
    CriticFinding,
    Critique,
    PlanRunReport,
    ReplanRecord,
    StepResult,
    capped_output,
)
from veriloop.server.pages.render import dependency_levels

SCRIPT = "<script>alert('x')</script>"


def _report() -> PlanRunReport:
    manifest = Manifest(
        goal=f"goal {SCRIPT}",
        steps=[
            ManifestStep(id="fetch", executor="shell", command="echo"),
            ManifestStep(id="build", executor="llm", depends_on=["fetch"]),
        ],
    )
    check = CheckResult(
        name="tests", type="tests", passed=False, diagnosis=f"1 failed {SCRIPT}", output=SCRIPT
    )
    attempt = AttemptReport(
        run_number=1,
        execution_ok=True,
        output_excerpt=SCRIPT,
        notes=f"[SUCCESS]: {SCRIPT}",
        checks=[check],
        passed=False,
        usage={
            "execution": {"input_tokens": 100, "output_tokens": 20, "cost_usd": 0.5, "calls": 1}
        },
    )
    usage = {"execution": {"input_tokens": 100, "output_tokens": 20, "cost_usd": 0.5, "calls": 1}}
    return PlanRunReport(
        run_id="r1",
        status="failed",
        goal=manifest.goal,
        manifest=manifest,
        critique=Critique(
            score=8,
            findings=[CriticFinding(rule="missing_gate", severity="warning", message=SCRIPT)],
            summary="ok",
        ),
        steps={
            "fetch": StepResult(step_id="fetch", status="completed", output={"html": SCRIPT}),
            "build": StepResult(
                step_id="build",
                status="test_failed",
                verification_status="partial_pass",
                output=SCRIPT,
                notes=SCRIPT,
                diagnosis=SCRIPT,
                attempts=[attempt],
                usage=usage,
            ),
        },
        superseded=[
            StepResult(
                step_id="build",
                status="test_failed",
                verification_status="partial_pass",
                diagnosis=f"tests: {SCRIPT}",
                attempts=[attempt],
            )
        ],
        replan_history=[
            ReplanRecord(
                round=1,
                blocked=["build"],
                replaced=["build"],
                diagnosis={"build": SCRIPT},
                summary=SCRIPT,
            )
        ],
        halt_reason=SCRIPT,
        usage=usage,
    )


def test_every_string_is_escaped(tmp_path: Path) -> None:
    path = write_plan_report(_report(), tmp_path, model=f"m{SCRIPT}", endpoint=SCRIPT)
    html = path.read_text()
    assert "<script" not in html.lower()
    assert "&lt;script&gt;" in html
    assert html.count("&lt;script&gt;") >= 10


def test_report_json_is_the_plan_run_report(tmp_path: Path) -> None:
    report = _report()
    write_plan_report(report, tmp_path)
    data = json.loads((tmp_path / "report.json").read_text())
    assert PlanRunReport.model_validate(data) == report


def test_the_page_names_the_model_and_shows_costs(tmp_path: Path) -> None:
    html = write_plan_report(_report(), tmp_path, model="gpt-x", endpoint="OpenAI").read_text()
    assert "Model: <code>gpt-x</code> via OpenAI" in html
    assert "$0.5000" in html
    assert "<svg" in html and "level 1" in html
    assert "replaced by a replan (not allowed to complete)" in html
    assert "Replan 1" in html and "missing_gate" in html


def test_a_scripted_run_says_so_and_costs_nothing(tmp_path: Path) -> None:
    html = write_plan_report(
        _report(), tmp_path, model="scripted-playbook", scripted=True
    ).read_text()
    assert "Scripted model" in html and "not produced by a" in html and "cost $0" in html
    assert "$0.5000" not in html


def test_dependency_levels_survive_cycles_and_unknown_ids() -> None:
    steps = [
        ManifestStep(id="a", executor="shell", command="x"),
        ManifestStep(id="b", executor="shell", command="x", depends_on=["a", "ghost"]),
        ManifestStep(id="c", executor="shell", command="x", depends_on=["d"]),
        ManifestStep(id="d", executor="shell", command="x", depends_on=["c"]),
    ]
    assert dependency_levels(steps) == [["a"], ["b"], ["c", "d"]]


def test_an_output_too_large_or_too_deep_to_keep_is_stored_as_a_marker() -> None:
    assert capped_output({"text": "x" * 100}) == {"text": "x" * 100}
    big = capped_output("x" * 200_000)
    assert big["truncated"] and big["bytes"] == 200_002 and len(big["head"]) == 2_000
    nested: list = []
    for _ in range(70):
        nested = [nested]
    assert capped_output(nested)["reason"] == "nested deeper than 64 levels"
    looped: dict = {}
    looped["self"] = looped
    assert "Circular reference" in capped_output(looped)["reason"]
    assert StepResult(step_id="a", status="completed", output="x" * 200_000).output == big
    assert capped_output(big) == big  # a marker stays as it is


def test_a_report_over_its_limit_gives_way_outputs_first() -> None:
    report = _report()
    assert report.within(10**9) is report
    steps = {
        step_id: step.model_copy(update={"output": "y" * 90_000, "notes": "n" * 10_000})
        for step_id, step in report.steps.items()
    }
    large = report.model_copy(update={"steps": steps})
    size = len(large.model_dump_json())
    cut = large.within(60_000)
    assert cut.truncated == {"bytes": size, "omitted": ["step outputs"]}
    assert len(cut.model_dump_json()) <= 60_000
    for step in cut.steps.values():
        assert step.output["bytes"] == 90_002 and len(step.notes) == 2_000
    smallest = large.within(1_000)
    assert smallest.truncated["omitted"] == ["step outputs", "earlier attempts", "manifest"]
    assert smallest.manifest is None and all(len(s.attempts) <= 1 for s in smallest.steps.values())
