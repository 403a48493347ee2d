"""The hierarchy view of a run: nested plans under their step, aggregates, depth, live children."""

from __future__ import annotations

from veriloop.engines.plan.hierarchy import aggregate, plan_tree
from veriloop.schemas.manifest import Manifest
from veriloop.schemas.plan_run import PlanRunReport, StepResult

COST = {"execution": {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.25, "calls": 1}}


def manifest(*ids: str, plan_steps: dict[str, Manifest] | None = None) -> Manifest:
    plans = plan_steps or {}
    return Manifest.model_validate(
        {
            "steps": [
                {"id": i, "executor": "plan" if i in plans else "shell", "plan": plans.get(i)}
                for i in ids
            ]
        }
    )


def report(run_id: str, plan: Manifest, steps: dict[str, StepResult], **fields) -> PlanRunReport:
    return PlanRunReport(run_id=run_id, status="running", manifest=plan, steps=steps, **fields)


GRANDCHILD = report(
    "r/p/q",
    manifest("g1", "g2"),
    {"g1": StepResult(step_id="g1", status="test_failed")},
)
CHILD = report(
    "r/p",
    manifest("c1", "q", plan_steps={"q": manifest("g1", "g2")}),
    {
        "c1": StepResult(step_id="c1", status="completed"),
        "q": StepResult(step_id="q", status="failed", sub_run=GRANDCHILD.model_dump()),
    },
    usage=COST,
)


def test_aggregate_counts_unscheduled_steps_and_failures():
    assert (aggregate(GRANDCHILD).done, aggregate(GRANDCHILD).total) == (0, 2)
    assert aggregate(GRANDCHILD).failed == 1
    assert aggregate(CHILD).cost_usd == 0.25


def test_tree_nests_finished_and_live_children_and_stops_at_the_depth():
    top = report(
        "r",
        manifest("a", "p", "z", plan_steps={"p": CHILD.manifest}),
        {
            "a": StepResult(step_id="a", status="completed"),
            "p": StepResult(step_id="p", status="running"),
        },
    )
    live = {"r/p": CHILD.model_copy(update={"run_id": "r/p"})}
    rows = plan_tree(top, live=live)
    assert [(r.path, r.depth, r.result.status) for r in rows] == [
        ("a", 0, "completed"),
        ("p", 0, "running"),
        ("p/c1", 1, "completed"),
        ("p/q", 1, "failed"),
        ("p/q/g1", 2, "test_failed"),
        ("p/q/g2", 2, "pending"),
        ("z", 0, "pending"),
    ]
    p = rows[1].children
    assert (p.done, p.total, p.failed, p.cost_usd) == (1, 2, 1, 0.25)
    assert rows[3].children.total == 2 and rows[0].children is None
    shallow = plan_tree(top, live=live, max_depth=2)
    assert [r.path for r in shallow] == ["a", "p", "p/c1", "p/q", "z"]
    assert shallow[3].children is not None  # the cut-off parent still shows its aggregate
    assert [r.path for r in plan_tree(top, max_depth=1)] == ["a", "p", "z"]
