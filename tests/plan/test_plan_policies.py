"""The plan graph's policies through the public API: the on_failure x critical matrix, gates,
blocking, parallel batches, nested plans and human reviews (python steps: no model needed)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from plan_testkit import manifest, py_step
from step_functions import leave_marker, wait_for_marker

from veriloop.context import PlanContext
from veriloop.plans import NoPendingReviewError, PlanRunner, UnknownRunError


def statuses(report) -> dict[str, str]:
    return {step_id: result.status for step_id, result in report.steps.items()}


# a fails its predicate; b is independent and still running when a fails; c needs a; d (level 1)
# needs only b: b's lane would start d at once, but a failed first.
def matrix_manifest(on_failure: str, critical: bool) -> dict:
    return manifest(
        py_step("a", "bad", on_failure=on_failure, critical=critical),
        py_step("b", "slow"),
        py_step("c", depends_on=["a"]),
        py_step("d", depends_on=["b"]),
    )


@pytest.mark.parametrize(
    ("on_failure", "critical", "disposition"),
    [
        ("halt_if_critical", True, "halt"),
        ("halt_if_critical", False, "skip"),
        ("continue", True, "skip"),
        ("continue", False, "skip"),
        ("retry", True, "halt"),
        ("retry", False, "skip"),
        ("replan", True, "halt"),  # no replan budget: falls back to halt
        ("replan", False, "skip"),  # ... or to going on without it
        ("stop", True, "halt"),  # deprecated spellings still mean what they meant
        ("stop", False, "skip"),
        ("skip", True, "skip"),
    ],
)
def test_on_failure_by_critical_matrix(runner, on_failure, critical, disposition):
    report = runner(max_replans_per_step=0).run(matrix_manifest(on_failure, critical))
    got = statuses(report)
    # The status says what happened to a (its check failed), whatever the run did about it.
    assert got["a"] == "failed" and got["b"] == "completed"
    a = report.steps["a"]
    assert a.disposition == disposition and report.steps["b"].disposition is None
    assert report.manifest.step("a").on_failure in (
        "halt_if_critical",
        "continue",
        "retry",
        "replan",
    )
    halted = disposition == "halt"
    assert report.halted is halted and report.status == "failed"
    if halted:
        # The run stopped at the end of a's batch: nothing started after a failed. d's lane may
        # have started it before (b is quicker than a's own process and checks, on a busy machine).
        assert got["c"] == "blocked" and not report.steps["c"].attempts
        failed_at = a.attempts[0].started_at + timedelta(seconds=a.duration_s)
        d = report.steps["d"]
        assert got["d"] == "blocked" or d.attempts[0].started_at <= failed_at
        assert "critical step 'a'" in report.halt_reason
    else:
        # The run went on without a: c runs without a's result.
        assert got["c"] == got["d"] == "completed"
        assert report.steps["c"].output == {"value": "c", "depends": ["a"]}
    # The predicate check says why a failed; its verification status is partial_pass.
    assert a.verification_status == "partial_pass" and a.attempts[-1].checks[0].passed is False


@pytest.mark.parametrize("lane_steps", [16, 1])
def test_a_batch_starts_each_step_once_its_dependencies_completed_beside_a_slow_one(
    tools, tmp_path, lane_steps
):
    # w waits for z, which needs y and y2; x forks into y and y2, and y runs on in x's lane. In
    # lanes, y2 and then the join z start as their dependencies complete, while w is still
    # running; with one step a lane (batches only), z waits for w's batch to end, and w gives up.
    # Each step is a process of its own: z tells w through a file.
    marker = {"marker": str(tmp_path / "z.ran"), "wait_s": 30 if lane_steps > 1 else 2}
    runner = PlanRunner(
        checkpointer=InMemorySaver(),
        context=PlanContext(
            workspace=str(tmp_path), review_critical_steps=False, lane_steps=lane_steps
        ),
        tools={**tools, "wait_for_z": wait_for_marker, "z": leave_marker},
    )
    report = runner.run(
        manifest(
            py_step("w", "wait_for_z", input=marker, writes=[]),
            py_step("x"),
            py_step("y", depends_on=["x"]),
            py_step("y2", depends_on=["x"]),
            py_step("z", "z", depends_on=["y", "y2"], input=marker, writes=["z.ran"]),
        ),
        concurrency=2,
    )
    assert report.status == "completed"
    assert report.steps["y2"].output == {"value": "y2", "depends": ["x"]}
    assert report.steps["z"].output == {"value": "z", "depends": ["y", "y2"]}
    assert report.steps["w"].output == {"saw": "z" if lane_steps > 1 else None}


def test_a_failed_test_run_of_a_non_critical_step_is_test_failed_not_skipped(runner):
    # The default policy lets the run go on; the step still says its tests failed.
    tests = {"id": "t", "command": "true", "test_command": "false", "requires_testing": True}
    report = runner().run(manifest(tests, py_step("after", depends_on=["t"])))
    t = report.steps["t"]
    assert (t.status, t.disposition) == ("test_failed", "skip")
    assert report.steps["after"].status == "completed" and report.status == "failed"


def test_a_clean_run_completes_and_passes_dependency_results(runner):
    report = runner().run(manifest(py_step("a"), py_step("b", depends_on=["a"])))
    assert report.status == "completed" and statuses(report) == {"a": "completed", "b": "completed"}
    assert report.steps["b"].output == {"value": "b", "depends": ["a"]}
    assert report.steps["a"].verification_status == "verified"
    assert [a.run_number for a in report.steps["a"].attempts] == [1]


def test_a_report_says_when_the_run_started_and_ended_and_how_long_each_part_took(runner):
    report = runner().run(manifest(py_step("a", "slow"), py_step("b", depends_on=["a"])))
    assert report.started_at is not None and report.ended_at is not None
    assert report.duration_s == pytest.approx(
        (report.ended_at - report.started_at).total_seconds(), abs=0.01
    )
    a = report.steps["a"]
    assert a.duration_s >= 0.2 and a.attempts[0].duration_s >= 0.2  # slow sleeps 0.2 s
    assert report.started_at <= a.attempts[0].started_at <= report.ended_at
    assert report.duration_s >= a.duration_s + report.steps["b"].duration_s


def test_python_steps_are_not_retried_even_with_a_budget(runner):
    # Re-running a deterministic executor changes nothing (seed 004, pitfall 3).
    report = runner().run(manifest(py_step("a", "bad", max_retries=3, on_failure="retry")))
    assert len(report.steps["a"].attempts) == 1


def test_an_executor_crash_is_execution_failed_not_a_verification_failure(runner):
    report = runner().run(manifest(py_step("a", "boom", critical=True)))
    a = report.steps["a"]
    assert a.verification_status == "execution_failed" and a.status == "failed"
    assert "the executor crashed" in a.diagnosis and a.attempts[0].checks == []
    assert report.status == "failed" and report.halted


def test_a_failed_gate_blocks_only_what_is_downstream_of_it(runner):
    gate = py_step("gate", "bad", type="synthesis_gate", depends_on=["a", "b"])
    report = runner().run(
        manifest(
            py_step("a"),
            py_step("b"),
            gate,
            py_step("after_gate", depends_on=["gate"]),
            py_step("beside", depends_on=["b"]),
            py_step("later", depends_on=["beside"]),
        )
    )
    got = statuses(report)
    assert got["gate"] == "failed" and got["after_gate"] == "blocked"
    assert got["beside"] == got["later"] == "completed"
    assert not report.halted and report.status == "failed"
    assert "gate" in report.steps["after_gate"].diagnosis


def test_parallel_steps_write_disjoint_results_without_losing_any(runner):
    steps = [py_step(f"s{i}", "slow") for i in range(8)]
    report = runner().run(
        manifest(*steps, py_step("join", depends_on=[s["id"] for s in steps])), concurrency=8
    )
    assert report.status == "completed"
    assert all(len(report.steps[s["id"]].attempts) == 1 for s in steps)
    assert report.steps["join"].output["depends"] == sorted(f"s{i}" for i in range(8))


def test_progress_events_for_every_attempt_and_check(runner):
    events = []
    runner().run(manifest(py_step("a"), py_step("b", "bad")), on_event=events.append)
    kinds = [(e["event"], e.get("step_id")) for e in events]
    for step_id in ("a", "b"):
        assert ("attempt_started", step_id) in kinds and ("attempt_finished", step_id) in kinds
        assert ("step_finished", step_id) in kinds
    failed_checks = [e for e in events if e["event"] == "check_result" and not e["passed"]]
    assert [(e["step_id"], e["type"]) for e in failed_checks] == [("b", "predicate")]
    assert all(e["run_id"] for e in events)


def test_human_review_pauses_the_run_and_resumes_with_the_answer(runner):
    plan = runner()
    review = {"id": "review", "type": "human_review", "input": "Ship it?", "depends_on": ["a"]}
    report = plan.run(
        manifest(py_step("a"), review, py_step("after", depends_on=["review"])), run_id="r1"
    )
    assert report.status == "awaiting_review"
    assert [p.step_id for p in report.pending_reviews] == ["review"]
    assert "Ship it?" in report.pending_reviews[0].question
    assert report.steps["review"].status == "awaiting_review"
    assert "after" not in report.steps  # nothing downstream ran
    with pytest.raises(NoPendingReviewError):
        plan.resume("r1", {"nope": {"approved": True}})
    done = plan.resume("r1", {"review": {"approved": True, "comment": "fine"}})
    assert done.status == "completed" and done.steps["review"].review == {
        "approved": True,
        "comment": "fine",
    }
    assert done.steps["after"].status == "completed"


def test_a_rejected_review_fails_with_the_comment_and_blocks_downstream(runner):
    plan = runner()
    review = {"id": "review", "type": "human_review", "input": "Ship it?"}
    plan.run(manifest(review, py_step("after", depends_on=["review"])), run_id="r2")
    done = plan.resume("r2", {"review": {"approved": False, "comment": "tests look thin"}})
    assert done.steps["review"].status == "failed"
    assert done.steps["review"].verification_status == "rejected"
    assert done.steps["review"].disposition == "block"
    assert "tests look thin" in done.steps["review"].diagnosis
    assert done.steps["after"].status == "blocked" and done.status == "failed"


def test_unknown_run_is_a_clear_error(runner):
    with pytest.raises(UnknownRunError):
        runner().report("no-such-run")


def nested(depth: int) -> dict:
    """A plan step nested ``depth`` plans deep (1 = a plan step in the top-level manifest)."""
    inner = manifest(py_step("leaf"))
    for level in range(depth):
        inner = manifest({"id": f"sub{level}", "type": "plan", "plan": inner})
    return inner


def test_nested_plans_complete_only_when_every_child_step_completed(runner):
    report = runner().run(
        manifest(
            py_step("a"),
            {
                "id": "child",
                "type": "plan",
                "depends_on": ["a"],
                "plan": manifest(py_step("x"), py_step("y", depends_on=["x"])),
            },
        )
    )
    assert report.status == "completed"
    child = report.steps["child"]
    assert child.status == "completed" and child.sub_run["status"] == "completed"
    assert set(child.sub_run["steps"]) == {"x", "y"}


def test_a_failing_child_fails_its_parent_step(runner):
    child = {"id": "child", "type": "plan", "critical": True, "plan": manifest(py_step("x", "bad"))}
    report = runner().run(manifest(child, py_step("after", depends_on=["child"])))
    assert report.steps["child"].status == "failed" and "x" in report.steps["child"].diagnosis
    child_x = report.steps["child"].sub_run["steps"]["x"]
    assert (child_x["status"], child_x["disposition"]) == ("failed", "skip")
    assert report.halted and report.steps["after"].status == "blocked"


def test_nesting_to_the_depth_limit_runs_and_one_past_it_is_rejected(runner):
    assert runner(max_depth=3).run(nested(2)).status == "completed"
    rejected = runner(max_depth=3).run(nested(3))
    assert rejected.status == "rejected" and "deeper than 3" in rejected.halt_reason
    assert rejected.steps == {}


def test_an_invalid_user_manifest_is_rejected_with_located_problems(runner):
    report = runner().run(manifest(py_step("a", depends_on=["ghost"])))
    assert report.status == "rejected" and "ghost" in report.halt_reason
    assert report.critique.has_critical


def test_a_critic_rejection_says_where_like_a_parse_error(runner):
    bad = py_step("a", checks=["result.items >"])  # parses, but the predicate does not compile
    report = runner().run(manifest(bad))
    assert report.status == "rejected" and report.critique.has_critical
    assert report.halt_reason.startswith(
        "plan rejected by the critic: steps[0] (id 'a').checks[0]: predicate does not compile"
    )


def test_a_review_question_shows_each_result_once_and_no_model_fences(runner):
    review = {
        "id": "review",
        "type": "human_review",
        "input": "Ship {{a}}?",
        "depends_on": ["a", "b"],
    }
    report = runner().run(manifest(py_step("a"), py_step("b"), review), run_id="q")
    (pending,) = report.pending_reviews
    question = pending.question
    assert question.startswith('Ship {"value": "a", "depends": []}?')
    assert question.count('"value": "a"') == 1  # inline, not repeated below
    assert '- b: {"value": "b", "depends": []}' in question  # the one the text does not show
    assert "<<<" not in question and "STEP_RESULTS" not in question


@pytest.mark.parametrize(
    ("given", "kind"),
    [
        ("Write a haiku: about cats", "goal"),
        ("Count the files", "goal"),
        ("steps:\n  - id: a\n    command: true\n", "manifest"),
        ('{"tasks": [{"id": "a", "command": "true"}]}', "manifest"),
        ('```json\n{"steps": []}\n```', "manifest"),
    ],
)
def test_plan_input_tells_goals_from_manifests(given, kind):
    from veriloop.plans import plan_input

    assert kind in plan_input(given)


def test_plan_input_reads_a_manifest_file_named_by_a_string(tmp_path):
    from veriloop.plans import plan_input

    path = tmp_path / "plan.yaml"
    path.write_text("steps:\n  - id: a\n    command: 'true'\n")
    assert plan_input(str(path)) == {"manifest": path.read_text()}
    assert plan_input(str(tmp_path / "missing.yaml")) == {"goal": str(tmp_path / "missing.yaml")}


def test_manifest_and_goal_can_be_named_explicitly(runner, tmp_path):
    from veriloop.plans import run_input

    path = tmp_path / "plan.yaml"
    path.write_text("steps:\n  - id: a\n    command: 'true'\n")
    # Named as a goal, a string that names a file stays a goal (never read from disk).
    assert run_input(goal=str(path)) == {"goal": str(path)}
    assert run_input(manifest=path) == {"manifest": path.read_text()}
    assert run_input(manifest="a: b", goal="g") == {"manifest": "a: b", "goal": "g"}
    for bad in ({}, {"manifest_or_goal": "x", "manifest": {}}):
        with pytest.raises(ValueError, match="give a manifest or a goal"):
            run_input(**bad)
    assert runner().run(manifest=manifest(py_step("a"))).status == "completed"
