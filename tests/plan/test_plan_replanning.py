"""Replanning through the public API with the scripted model: one call per batch for every blocked
step, completed steps kept and never re-run, budgets, unusable repairs, the meta-planner."""

from __future__ import annotations

from plan_testkit import manifest, py_step

from veriloop.schemas.plan_outputs import ManifestDraft, RepairDraft, StepDraft


def repair(*steps: StepDraft, summary: str = "use the ok function") -> RepairDraft:
    return RepairDraft(summary=summary, steps=list(steps))


def as_bad_as_before(**fields):
    """A replanner whose every repair is the failing step again."""
    return lambda request: repair(StepDraft(id="b", function="bad", on_failure="replan", **fields))


def test_three_blocked_steps_in_one_batch_cost_exactly_one_replan_call(runner, scripted_model):
    scripted_model.script(
        "replanning",
        repair(
            StepDraft(id="x", function="right"),
            StepDraft(id="y", function="right"),
            StepDraft(id="z", function="right"),
            StepDraft(id="join", function="ok", depends_on=["x", "y", "z", "fine"]),
        ),
    )
    report = runner().run(
        manifest(
            py_step("x", "bad", on_failure="replan"),
            py_step("y", "bad", on_failure="replan"),
            py_step("z", "bad", on_failure="replan"),
            py_step("fine"),
            py_step("join", depends_on=["x", "y", "z", "fine"]),
        )
    )
    assert scripted_model.calls("replanning") == 1
    assert report.status == "completed"
    (record,) = report.replan_history
    assert sorted(record.blocked) == ["x", "y", "z"]
    assert sorted(record.replaced) == ["join", "x", "y", "z"]  # blocked + downstream, not "fine"
    assert record.summary == "use the ok function"
    # The field-level difference between each replaced step and its replacement is kept.
    assert record.changes["x"]["values_changed"]["root['function']"] == {
        "old_value": "bad",
        "new_value": "right",
    }
    assert record.changes["join"]["values_changed"]["root['origin']"]["new_value"] == "model"
    assert set(record.changes) == {"x", "y", "z", "join"}
    assert all(s.disposition == "replan" for s in report.superseded)
    # The independent step of the batch kept its result and ran once.
    assert report.steps["fine"].status == "completed"
    assert sorted(s.step_id for s in report.superseded) == ["x", "y", "z"]
    prompt = scripted_model.requests[-1].text
    # The latest diagnosis of each blocked step reaches the replanner; "fine" is kept, not redesigned.
    assert prompt.count("predicate") >= 3 and '"fine"' in prompt


def test_tail_replanning_keeps_completed_results_and_never_reruns_them(runner, scripted_model):
    scripted_model.script(
        "replanning",
        repair(
            StepDraft(id="b2", function="ok", depends_on=["a"]),
            StepDraft(id="c", function="ok", depends_on=["b2"]),
        ),
    )
    report = runner().run(
        manifest(
            py_step("a"),
            py_step("b", "bad", on_failure="replan", depends_on=["a"]),
            py_step("c", depends_on=["b"]),
        )
    )
    assert report.status == "completed"
    assert list(report.steps) == ["a", "b2", "c"]
    assert report.replan_history[0].added == ["b2"] and report.replan_history[0].removed == ["b"]
    # a ran once (before the replan), b2 and c once each after it.
    assert [len(report.steps[s].attempts) for s in ("a", "b2", "c")] == [1, 1, 1]


def test_replan_budget_per_step_stops_replanning_then_the_policy_applies(runner, scripted_model):
    # Every repair is as bad as the original: three replans (the per-step default), then skip.
    scripted_model.on("replanning", as_bad_as_before())
    report = runner().run(manifest(py_step("b", "bad", on_failure="replan")))
    assert scripted_model.calls("replanning") == 3
    b = report.steps["b"]
    assert (b.status, b.disposition) == ("failed", "skip") and report.status == "failed"
    assert [r.round for r in report.replan_history] == [1, 2, 3]


def test_run_budget_caps_replans_across_steps(runner, scripted_model):
    scripted_model.on("replanning", as_bad_as_before(critical=True))
    report = runner(max_replans_per_run=1).run(
        manifest(py_step("b", "bad", on_failure="replan", critical=True))
    )
    assert scripted_model.calls("replanning") == 1
    assert report.halted and report.steps["b"].status == "failed"
    assert report.steps["b"].disposition == "halt"


def test_an_unusable_repair_falls_back_to_the_failure_policy(runner, scripted_model):
    scripted_model.script("replanning", "this is not json")
    report = runner().run(
        manifest(
            py_step("b", "bad", on_failure="replan", critical=True), py_step("c", depends_on=["b"])
        )
    )
    assert report.halted and report.steps["c"].status == "blocked"
    assert "could not be used" in report.replan_history[0].summary


def test_a_repair_with_a_cycle_is_not_applied(runner, scripted_model):
    scripted_model.script(
        "replanning",
        repair(
            StepDraft(id="p", function="ok", depends_on=["q"]),
            StepDraft(id="q", function="ok", depends_on=["p"]),
        ),
    )
    report = runner().run(manifest(py_step("b", "bad", on_failure="replan")))
    assert report.steps["b"].status == "failed" and report.steps["b"].disposition == "skip"
    assert "cycle" in report.replan_history[0].summary


def test_meta_planner_writes_the_manifest_from_a_goal(runner, scripted_model):
    scripted_model.script(
        "planning",
        ManifestDraft(
            steps=[
                StepDraft(id="one", function="ok"),
                StepDraft(id="two", function="ok", depends_on=["one"], input="use {{one}}"),
            ]
        ),
    )
    report = runner().run("Count to two")
    assert report.status == "completed" and report.goal == "Count to two"
    assert all(step.origin == "model" for step in report.manifest.steps)


def test_a_critical_finding_sends_a_model_plan_back_to_the_planner_bounded(runner, scripted_model):
    cyclic = ManifestDraft(
        steps=[
            StepDraft(id="a", function="ok", depends_on=["b"]),
            StepDraft(id="b", function="ok", depends_on=["a"]),
        ]
    )
    scripted_model.on("planning", lambda request: cyclic)
    report = runner(max_plan_revisions=2).run("Do something")
    assert scripted_model.calls("planning") == 3  # the first draft and two revisions
    assert report.status == "rejected" and report.steps == {}
    revision = scripted_model.requests[-1].text
    assert "previous manifest was rejected" in revision and "cycle" in revision


def test_model_written_commands_pause_for_approval(runner, scripted_model, tmp_path):
    scripted_model.script(
        "planning", ManifestDraft(steps=[StepDraft(id="touch", command="touch made_by_model.py")])
    )
    plan = runner()
    report = plan.run("Make a file", run_id="cmd")
    assert report.status == "awaiting_review"
    (pending,) = report.pending_reviews
    assert pending.context["commands"] == ["touch made_by_model.py"]
    assert not (tmp_path / "made_by_model.py").exists()
    done = plan.resume("cmd", {"touch": {"approved": True}})
    assert done.status == "completed" and (tmp_path / "made_by_model.py").exists()


def test_allowlisted_model_commands_run_without_approval_and_rejected_ones_never_run(
    runner, scripted_model, tmp_path
):
    scripted_model.script(
        "planning", ManifestDraft(steps=[StepDraft(id="touch", command="touch allowed.py")])
    )
    assert runner(shell_allowlist="touch ").run("Make a file").status == "completed"
    assert (tmp_path / "allowed.py").exists()
    scripted_model.script(
        "planning", ManifestDraft(steps=[StepDraft(id="rm", command="touch refused.py")])
    )
    plan = runner()
    plan.run("Make a file", run_id="no")
    done = plan.resume("no", {"rm": {"approved": False}})
    assert done.steps["rm"].verification_status == "execution_failed"
    assert not (tmp_path / "refused.py").exists()


def test_a_repair_cannot_drop_the_checks_of_the_step_it_replaces(runner, scripted_model):
    # The replanner keeps the id but leaves out the predicate: the step must still pass it.
    scripted_model.on("replanning", lambda request: repair(StepDraft(id="b", function="bad")))
    report = runner(max_replans_per_step=1).run(manifest(py_step("b", "bad", on_failure="replan")))
    assert scripted_model.calls("replanning") == 1
    step = report.steps["b"]
    assert step.status == "failed" and step.verification_status == "partial_pass"
    assert step.disposition == "skip"
    assert [c.type for c in step.attempts[-1].checks if not c.passed] == ["predicate"]
    assert report.manifest.step("b").origin == "model"
