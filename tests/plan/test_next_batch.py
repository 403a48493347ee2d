"""Which steps the next batch holds (``engines.plan.policy.next_batch``): every step whose
dependencies finished, lowest levels first, blocked steps named, without LangGraph."""

from __future__ import annotations

from plan_testkit import manifest, py_step

from veriloop.engines.plan.manifest import dependency_levels, dependents_of, load_manifest
from veriloop.engines.plan.policy import lanes, next_batch, window
from veriloop.nodes.plan.lane import OpenBatch
from veriloop.schemas.manifest import Manifest


def plan(*steps: dict) -> Manifest:
    return load_manifest(manifest(*steps), tools={"ok": lambda input=None: input})


def done(*step_ids: str, status: str = "completed", **fields) -> dict[str, dict]:
    return {step_id: {"status": status, **fields} for step_id in step_ids}


# a -> b -> c and x -> y: two chains, levels [a, x], [b, y], [c].
CHAINS = plan(
    py_step("a"),
    py_step("b", depends_on=["a"]),
    py_step("c", depends_on=["b"]),
    py_step("x"),
    py_step("y", depends_on=["x"]),
)


def test_a_step_is_ready_once_its_own_dependencies_finished_whatever_its_level():
    # x's chain ran ahead: y's dependency is done although a (its level-mate) is not.
    assert next_batch(CHAINS, done("x")).ready == ["a", "y"]
    assert next_batch(CHAINS, done("a", "x")).ready == ["b", "y"]
    # c (level 2) runs beside y (level 1), lower level first: y's level need not empty first.
    assert next_batch(CHAINS, done("a", "b", "x")).ready == ["y", "c"]
    assert next_batch(CHAINS, done("a", "b", "c", "x", "y")).ready == []


def test_a_limited_batch_takes_the_lowest_levels_first():
    # A wide level split over batches: its remainder goes first, then the next level's ready steps.
    wide = plan(
        *(py_step(f"p{i}") for i in range(5)),
        *(py_step(f"d{i}", depends_on=[f"p{i}"]) for i in range(5)),
    )
    first = next_batch(wide, {}, limit=3)
    assert first.ready == ["p0", "p1", "p2"]
    second = next_batch(wide, done(*first.ready), limit=3)
    assert second.ready == ["p3", "p4", "d0"]
    third = next_batch(wide, done(*first.ready, *second.ready), limit=3)
    assert third.ready == ["d1", "d2", "d3"]


def test_a_failed_dependency_blocks_its_downstream_and_a_skipped_one_does_not():
    failed = {**done("x"), **done("a", status="failed")}
    batch = next_batch(CHAINS, failed)
    # b and c are blocked in one pass (c through b, found blocked on the way); y still runs.
    assert batch.ready == ["y"]
    assert batch.blocked == {
        "b": "dependency a did not complete",
        "c": "dependency b did not complete",
    }
    skipped = {**done("x"), **done("a", status="failed", disposition="skip")}
    assert next_batch(CHAINS, skipped) == next_batch(CHAINS, done("a", "x"))


def test_a_step_waiting_on_an_unfinished_dependency_is_neither_ready_nor_blocked():
    batch = next_batch(CHAINS, done("a"))
    assert batch.ready == ["x", "b"] and batch.blocked == {}


def lanes_of(manifest: Manifest, results: dict, max_steps: int = 16) -> list[list[str]]:
    ready = next_batch(manifest, results).ready
    return lanes(manifest, ready, results, dependents_of(manifest), max_steps)


def test_a_lane_is_a_ready_step_and_the_chain_that_needs_only_it():
    assert lanes_of(CHAINS, {}) == [["a", "b", "c"], ["x", "y"]]
    assert lanes_of(CHAINS, {}, max_steps=2) == [["a", "b"], ["x", "y"]]
    assert lanes_of(CHAINS, {}, max_steps=1) == [["a"], ["x"]]
    assert lanes_of(CHAINS, done("a", "x")) == [["b", "c"], ["y"]]


def test_a_lane_stops_before_a_join_a_fork_and_a_step_with_a_result():
    diamond = plan(
        py_step("a"),
        py_step("b", depends_on=["a"]),
        py_step("c", depends_on=["a"]),  # a forks: neither b nor c joins a's lane
        py_step("d", depends_on=["b", "c"]),  # a join: runs once both finished
        py_step("e", depends_on=["d"]),
        py_step("f", depends_on=["e"]),
    )
    assert lanes_of(diamond, {}) == [["a"]]
    assert lanes_of(diamond, done("a")) == [["b"], ["c"]]
    assert lanes_of(diamond, done("a", "b", "c")) == [["d", "e", "f"]]
    # f kept a result (a replan kept a blocked step): the lane ends before it.
    assert lanes_of(diamond, {**done("a", "b", "c"), **done("f", status="blocked")}) == [["d", "e"]]


def test_a_step_that_may_pause_the_run_starts_a_lane_of_its_own():
    chain = plan(
        py_step("a"),
        {"id": "review", "type": "human_review", "depends_on": ["a"]},
        py_step("b", depends_on=["review"]),
        py_step("c", depends_on=["b"]),
    )
    # The review starts a later lane, so a's result is in the run's state while it waits.
    assert lanes_of(chain, {}) == [["a"]]
    assert lanes_of(chain, done("a")) == [["review", "b", "c"]]
    # What the caller says may pause (a model's command waiting for approval) too.
    ready = next_batch(chain, done("a", "review")).ready
    assert lanes(chain, ready, {}, dependents_of(chain), 16, lambda s: s.id == "c") == [["b"]]


def test_the_window_holds_what_may_start_once_the_batch_completes_its_dependencies():
    mesh = plan(
        py_step("a"),
        py_step("b"),
        py_step("j", depends_on=["a", "b"]),  # a join of two lanes
        py_step("k", depends_on=["j", "c"]),  # c finished before: k needs only j of the batch
        py_step("c"),
        {"id": "review", "type": "human_review", "depends_on": ["a"]},  # may pause: never
        py_step("after", depends_on=["review"]),  # needs a step outside the batch
        py_step("d"),
    )
    results = done("c")
    levels = dependency_levels(mesh)
    sent = lanes_of(mesh, results)
    assert sent == [["a"], ["b"], ["d"]]
    ids = {s for lane in sent for s in lane}
    assert window(mesh, results, levels, ids, None) == ["j", "k"]
    assert window(mesh, results, levels, ids, 1) == ["j"]
    # A ready step beyond the batch's limit is in the window too.
    assert window(mesh, results, levels, {"a", "b"}, None) == ["d", "j", "k"]


def test_a_lane_takes_a_window_step_once_all_its_dependencies_completed():
    batch = OpenBatch(
        {
            s["id"]: s
            for s in ({"id": "j", "depends_on": ["a", "b"]}, {"id": "y2", "depends_on": ["x"]})
        },
        {},
    )
    batch.completed["a"] = 1
    assert batch.take("a") is None  # j still needs b
    batch.completed.update(x=2, b=3)
    assert batch.take("b")["id"] == "j"  # b's own dependent first
    assert batch.take("b")["id"] == "y2"  # then whatever is ready
    assert batch.take("b") is None and batch.steps == {}
