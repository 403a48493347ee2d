"""`veriloop plan run / resume / report` through typer's CliRunner: exit statuses, reports, reviews.

No model and no network: the examples use shell and python steps only, and the one test that
needs a model checks that the CLI refuses to start without one.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from veriloop.cli import app
from veriloop.schemas.plan_run import PlanRunReport

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Invoke ``veriloop`` from a scratch directory holding a copy of examples/."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, ["plan", *args], catch_exceptions=False)

    return invoke


def _report(directory: Path) -> PlanRunReport:
    return PlanRunReport.model_validate_json((directory / "report.json").read_text())


def test_hello_shell_example_completes_and_writes_the_report(cli, tmp_path: Path) -> None:
    result = cli("run", "examples/hello_shell.yaml", "--report", "out", "--run-id", "hello")
    assert result.exit_code == 0, result.output
    assert "completed" in result.output
    report = _report(tmp_path / "out")
    assert report.status == "completed"
    assert list(report.steps) == ["greet", "today", "python_major", "summary"]
    assert all(step.status == "completed" for step in report.steps.values())
    html = (tmp_path / "out" / "report.html").read_text()
    for step_id in report.steps:
        assert f'id="step-{step_id}"' in html
    assert "No model was called" in html
    # run metadata: the run's wall time in the summary line and the page, a time column per step
    assert re.search(r"completed: 4 steps, .*, \d+\.\d s", result.output), result.output
    assert f"<th>started</th><td>{report.started_at.isoformat(timespec='seconds')}</td>" in html
    assert "time" in result.output and report.duration_s is not None
    # the default database is created in the current directory
    assert (tmp_path / ".veriloop" / "plans.sqlite").is_file()
    # live progress: a line per check, one per finished step
    assert "pass predicate[0]" in result.output and "=  summary completed" in result.output


@pytest.mark.parametrize("tools", ["examples/tools.py:TOOLS", "examples.tools:TOOLS"])
def test_python_steps_example_with_tools_from_a_file_or_a_module(cli, tmp_path, tools) -> None:
    result = cli("run", "examples/python_steps.yaml", "--tools", tools, "--report", "out")
    assert result.exit_code == 0, result.output
    report = _report(tmp_path / "out")
    assert report.steps["combined"].output["fib_sum"] == 88
    assert all(step.status == "completed" for step in report.steps.values())


def test_invalid_manifest_exits_2_with_located_problems(cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "steps:\n"
        "  - id: a\n    command: echo a\n    depends_on: [b]\n"
        "  - id: b\n    command: echo b\n    depends_on: [a]\n"
        "  - id: c\n    command: echo c\n    depends_on: [ghost]\n"
    )
    result = cli("run", str(bad))
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "cycle" in result.output and "a -> b -> a" in result.output
    assert "steps[2] (id 'c')" in result.output and "ghost" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.yaml"], "no such manifest file"),
        (["examples/python_steps.yaml"], "hint: python steps' functions"),
        (["examples/python_steps.yaml", "--tools", "examples/none.py:TOOLS"], "no tools file"),
        (
            ["examples/python_steps.yaml", "--tools", "examples/tools.py:NOPE"],
            "no attribute 'NOPE'",
        ),
        (["examples/python_steps.yaml", "--tools", "no_such_module:TOOLS"], "No module named"),
        (["examples/python_steps.yaml", "--tools", "examples/tools.py"], "must look like"),
        (["examples/llm_notes.yaml"], "no model configured"),
        (["--goal", "write a haiku"], "no model configured"),
        ([], "give a manifest FILE"),
        (["examples/hello_shell.yaml", "--model", "critc=o3"], "Context.purposes: critc"),
        (["examples/hello_shell.yaml", "--reasoning-effort", "huge"], "reasoning_effort"),
    ],
)
def test_usage_errors_exit_2_with_one_clear_message(cli, args, message) -> None:
    result = cli("run", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_pending_review_exits_3_then_resume_approves_it(cli, tmp_path: Path) -> None:
    db = tmp_path / ".veriloop" / "runs" / "plans.sqlite"
    first = cli(
        "run", "examples/review.yaml", "--db", str(db), "--run-id", "rel-1", "--report", "out"
    )
    assert first.exit_code == 3, first.output
    assert f"veriloop plan resume rel-1 --db {db} --approve-all" in first.output
    paused = _report(tmp_path / "out")
    assert paused.status == "awaiting_review"
    assert [r.step_id for r in paused.pending_reviews] == ["sign_off"]
    assert paused.steps["draft"].status == "completed" and "publish" not in paused.steps

    second = cli("resume", "rel-1", "--db", str(db), "--approve-all")
    assert second.exit_code == 0, second.output
    done = _report(tmp_path / "out")  # the report directory was kept with the run
    assert done.status == "completed"
    assert done.steps["sign_off"].review == {
        "approved": True,
        "comment": "approved with --approve-all",
    }
    assert done.steps["publish"].status == "completed"
    assert len(done.steps["draft"].attempts) == 1  # not run again

    again = cli("report", "rel-1", "--db", str(db), "--out", "again")
    assert again.exit_code == 0, again.output
    assert _report(tmp_path / "again").status == "completed"
    assert "sign_off" in (tmp_path / "again" / "report.html").read_text()


def test_approve_all_answers_reviews_in_the_same_run(cli) -> None:
    result = cli("run", "examples/review.yaml", "--approve-all", "--run-id", "r2")
    assert result.exit_code == 0, result.output
    assert "approved (--approve-all)" in result.output
    reused = cli("run", "examples/review.yaml", "--run-id", "r2")
    assert reused.exit_code == 2 and "exists already" in reused.output


def test_failed_run_exits_1_and_a_rejected_plan_prints_the_critic(cli, tmp_path: Path) -> None:
    failing = tmp_path / "failing.yaml"
    failing.write_text(
        "steps:\n"
        "  - id: shout\n    command: echo hi\n    critical: true\n"
        "    checks: [\"result.stdout.strip() == 'HI'\"]\n"
        "  - id: after\n    command: echo after\n    depends_on: [shout]\n"
    )
    result = cli("run", str(failing), "--no-review")
    assert result.exit_code == 1, result.output
    assert "FAIL predicate[0]" in result.output
    assert "halted" in result.output

    rejected = tmp_path / "rejected.yaml"
    rejected.write_text(
        "steps:\n  - id: a\n    command: echo a\n    checks: ['__import__(\"os\")']\n"
    )
    result = cli("run", str(rejected))
    assert result.exit_code == 1, result.output
    assert "the critic rejected the plan" in result.output
    assert "bad_check" in result.output


def test_report_of_an_unknown_run_exits_2(cli, tmp_path: Path) -> None:
    assert cli("run", "examples/hello_shell.yaml", "--run-id", "x").exit_code == 0
    result = cli("report", "nope", "--out", "o")
    assert result.exit_code == 2 and "no plan run 'nope'" in result.output
    result = cli("resume", "nope")
    assert result.exit_code == 2 and "no plan run 'nope'" in result.output
    result = cli("report", "x", "--db", str(tmp_path / "none.sqlite"))
    assert result.exit_code == 2 and "no plan database" in result.output


def test_llm_example_runs_with_a_configured_model(cli, tmp_path: Path, scripted_model) -> None:
    """examples/llm_notes.yaml through the real client, against the loopback scripted model."""
    from veriloop.llm.scripted import ToolCalls

    files = {
        "glossary": (
            "GLOSSARY.md",
            "".join(f"## term {i}\ntext\n" for i in range(5)),
            {"entries": 5},
        ),
        "faq": ("FAQ.md", "".join(f"### question {i}?\nanswer\n" for i in range(3)), None),
    }

    def agent(request):
        step_id = request.messages[1]["content"].splitlines()[0].removeprefix("Step: ")
        path, content, output = files[step_id]
        if not any(m["role"] == "tool" for m in request.messages):
            return ToolCalls([("write_file", {"path": path, "content": content})])
        return ToolCalls([("mark_step", {"notes": f"[SUCCESS]: wrote {path}", "output": output})])

    scripted_model.on("execution", agent)
    workspace = tmp_path / "notes"
    workspace.mkdir()
    result = cli(
        "run", "examples/llm_notes.yaml", "--workspace", str(workspace), "--report", "out",
        "--model", "execution=local-exec", "--reasoning-effort", "execution=low",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    executed = [r for r in scripted_model.requests if r.purpose == "execution"]
    assert {(r.body["model"], r.body["reasoning_effort"]) for r in executed} == {
        ("local-exec", "low")
    }
    assert (
        "model: gpt-4.1-mini via an OpenAI-compatible server at http://127.0.0.1" in result.output
    )
    assert (workspace / "GLOSSARY.md").is_file() and (workspace / "FAQ.md").is_file()
    report = _report(tmp_path / "out")
    assert report.steps["bundle"].status == "completed"
    assert report.usage["execution"]["calls"] == 4
    html = (tmp_path / "out" / "report.html").read_text()
    assert (
        "Model: <code>gpt-4.1-mini</code> via an OpenAI-compatible server at http://127.0.0.1"
        in html
    )


def test_summary_counts_unscheduled_steps_and_keeps_long_names_whole_when_piped(
    cli, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    first = cli("run", "examples/review.yaml", "--run-id", "count")
    assert first.exit_code == 3, first.output
    # 3 steps in the plan, one of them not scheduled yet: the count and the table say so.
    assert "awaiting_review: 3 steps" in first.output
    assert re.search(r"│ publish\s+│ pending", first.output), first.output
    # The review shows the draft's result once, inline, and no model-facing fence markers.
    assert "<<<" not in first.output and "STEP_RESULTS" not in first.output

    manifest = tmp_path / "long.yaml"
    long_id = "python_major_version_of_the_interpreter_that_runs_this_plan"
    manifest.write_text(f"steps:\n  - id: {long_id}\n    command: echo hi\n")
    result = cli("run", str(manifest))
    assert result.exit_code == 0, result.output
    assert f"│ {long_id} │" in result.output  # one row, not folded at 80 columns


def test_run_help_shows_the_failure_policy_matrix(cli) -> None:
    result = cli("run", "--help")
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "halt_if_critical (default)" in text and "stop = halt_if_critical" in text
    assert "continue: critical: go on without it; not critical: go on without it" in text


NESTED = """goal: nested
steps:
  - id: a
    command: echo a
  - id: child
    type: plan
    depends_on: [a]
    plan:
      steps:
        - id: x
          command: echo x
        - id: rev
          type: human_review
          input: "ok?"
          depends_on: [x]
        - id: y
          command: echo y
          depends_on: [rev]
  - id: after
    command: echo after
    depends_on: [child]
"""


def _rows(output: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip("│").split("│")]
        for line in output.splitlines()
        if line.startswith("│")
    ]


def test_show_prints_nested_plans_indented_with_each_parents_aggregate(cli, tmp_path) -> None:
    (tmp_path / "nested.yaml").write_text(NESTED)
    assert cli("run", "nested.yaml", "--run-id", "n1").exit_code == 3
    # Live: the child plan is paused at its review, and show reads it from the checkpoint.
    live = cli("show", "n1")
    assert live.exit_code == 0, live.output
    rows = [(r[0], r[1], r[2], r[3]) for r in _rows(live.output)]
    assert rows == [
        ("a", "completed", "", ""),
        ("child", "awaiting_review", "1/3", "0"),
        ("x", "completed", "", ""),
        ("rev", "awaiting_review", "", ""),
        ("y", "pending", "", ""),
        ("after", "pending", "", ""),
    ]
    assert "│   x " in live.output  # indented under its parent
    assert "awaiting_review: 1/3 steps done, 0 failed" in live.output
    flat = cli("show", "n1", "--flat")
    assert [r[0] for r in _rows(flat.output)] == [
        "a",
        "child",
        "child/x",
        "child/rev",
        "child/y",
        "after",
    ]

    assert cli("resume", "n1", "--approve-all").exit_code == 0
    top = cli("show", "n1", "--depth", "1")
    assert [(r[0], r[2]) for r in _rows(top.output)] == [("a", ""), ("child", "3/3"), ("after", "")]
    assert "completed: 3/3 steps done, 0 failed" in top.output
    both = cli("show", "n1", "--depth", "1", "--flat")
    assert both.exit_code == 2 and "do not go together" in both.output
    assert cli("show", "nope").exit_code == 2


def test_max_steps_refuses_a_larger_manifest_and_none_is_the_default(cli) -> None:
    # hello_shell.yaml has four steps
    result = cli("run", "examples/hello_shell.yaml", "--max-steps", "3")
    assert result.exit_code == 2, result.output
    assert "steps: more than 3 steps in the manifest" in result.output
    assert cli("run", "examples/hello_shell.yaml", "--max-steps", "4").exit_code == 0


def test_a_database_inside_the_workspace_is_refused_with_where_to_keep_it(cli, tmp_path) -> None:
    result = cli("run", "examples/hello_shell.yaml", "--db", str(tmp_path / "runs.sqlite"))
    assert result.exit_code == 2, result.output
    assert "inside the workspace" in result.output and ".veriloop" in result.output
    assert not (tmp_path / "runs.sqlite").exists()


def test_cancel_ends_a_paused_run_and_its_unfinished_steps(cli, tmp_path: Path) -> None:
    db = tmp_path.parent / f"{tmp_path.name}-plans.sqlite"  # outside the workspace
    first = cli("run", "examples/review.yaml", "--db", str(db), "--run-id", "c-1")
    assert first.exit_code == 3, first.output

    cancelled = cli("cancel", "c-1", "--db", str(db))
    assert cancelled.exit_code == 0, cancelled.output
    assert "c-1: cancelled" in cancelled.output
    shown = cli("show", "c-1", "--db", str(db))
    assert re.search(r"sign_off\W+cancelled", shown.output), shown.output
    assert re.search(r"draft\W+completed", shown.output), shown.output
    assert "cancelled:" in shown.output
    again = cli("cancel", "c-1", "--db", str(db))
    assert again.exit_code == 0, again.output
    resumed = cli("resume", "c-1", "--db", str(db), "--approve-all")
    assert resumed.exit_code == 1 and "cancelled" in resumed.output

    done = cli("run", "examples/hello_shell.yaml", "--db", str(db), "--run-id", "c-2")
    assert done.exit_code == 0, done.output
    ended = cli("cancel", "c-2", "--db", str(db))
    assert ended.exit_code == 1 and "already completed" in ended.output
    unknown = cli("cancel", "nope", "--db", str(db))
    assert unknown.exit_code == 2 and "no plan run 'nope'" in unknown.output
