"""The schedules ``benchmarks.plan_dispatch`` compares the plan graph against are the right ones
(its quick run is in test_smoke.py; figures are not asserted: timing lives in the benchmark)."""

from __future__ import annotations

import random

from benchmarks.plan_dispatch import (
    Plan,
    batch_makespan,
    levels_rule,
    list_makespan,
    shapes,
    step,
)
from veriloop.engines.plan.policy import next_batch

# a (3 s) -> b (1 s) beside x (1 s) -> y (1 s) -> z (1 s).
UNEVEN = Plan([step("a", 3), step("b", 1, "a"), step("x", 1), step("y", 1, "x"), step("z", 1, "y")])


def test_capacity_starts_each_step_when_its_dependencies_and_a_slot_are_free():
    # Two slots: x, y, z run beside a; b starts at 3 s.
    assert UNEVEN.capacity(2) == 4
    # One slot: everything in a row, whatever the order.
    assert UNEVEN.capacity(1) == 7
    assert UNEVEN.critical_path() == 4 and UNEVEN.ideal(1) == 7 and UNEVEN.ideal(2) == 4


def test_batches_wait_for_their_slowest_lane():
    manifest = UNEVEN.manifest()
    # Levels [a, x], [b, y], [z]: 3 + 1 + 1, with no framework time.
    assert batch_makespan(manifest, UNEVEN.seconds, 2, "ready") == 5
    assert batch_makespan(manifest, UNEVEN.seconds, 2, "levels") == 5
    # Lanes a -> b and x -> y -> z run side by side in one batch: what capacity dispatch gives.
    assert batch_makespan(manifest, UNEVEN.seconds, 2, "lanes") == 4 == UNEVEN.capacity(2)
    # The join d is in the batch's window: a's lane, which completes its last dependency, takes
    # it; in batches it waits for the next one.
    joined = Plan([step("a", 3), step("x", 1), step("y", 1, "x"), step("d", 1, "a", "y")])
    assert batch_makespan(joined.manifest(), joined.seconds, 2, "lanes") == 4
    assert batch_makespan(joined.manifest(), joined.seconds, 2, "ready") == 5
    # A lane that finds nothing ready ends: with one slot, x's lane ends before a ran, and a's
    # lane (x, y and a done) takes d.
    assert batch_makespan(joined.manifest(), joined.seconds, 1, "lanes") == 6
    # One slot, a batch of at most 4 (BATCH_PER_SLOT) runs its steps one after the other.
    assert list_makespan(["a", "x"], UNEVEN.seconds, {"a": (), "x": ()}, 1) == 4


def test_the_old_rule_keeps_a_batch_to_the_lowest_level():
    wide = Plan([step(f"p{i}", 1) for i in range(3)] + [step("d0", 1, "p0")])
    manifest = wide.manifest()
    done = {"p0": {"status": "completed"}}
    assert levels_rule(manifest, done, limit=4).ready == ["p1", "p2"]
    assert next_batch(manifest, done, limit=4).ready == ["p1", "p2", "d0"]


def test_shapes_are_seeded_and_list_each_step_after_its_dependencies():
    first, again = shapes(random.Random(3), 1), shapes(random.Random(3), 1)
    assert first == again
    for steps in first.values():
        seen: set[str] = set()
        for s in steps:
            assert set(s["depends_on"]) <= seen
            seen.add(s["id"])
