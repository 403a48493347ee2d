"""The rule for a minor modification of a plan, on DeepDiff's structural comparison."""

from __future__ import annotations

import pytest

from veriloop.engines.step_diff import compare_steps, field_changes, step_text

SIX = ["Open", "Search", "Pick", "Fill", "Save", "Check"]


@pytest.mark.parametrize(
    ("after", "changed", "minor"),
    [
        (SIX, 0, True),
        (["Log in", *SIX], 1, True),  # one inserted step is one change, not six shifted ones
        (["Open", "Search", "Pick it", "Fill in", "Save", "Check"], 2, True),  # a third of six
        (["Open", "Find", "Pick it", "Fill in", "Save", "Check"], 3, False),  # more than a third
        (SIX[:4], 2, False),  # two steps fewer
        (["Log out", "Delete every invoice"], 6, False),
    ],
)
def test_minor_is_the_same_length_give_or_take_one_and_at_most_a_third_changed(
    after, changed, minor
):
    changes = compare_steps(SIX, after)
    assert (changes.changed, changes.minor) == (changed, minor)
    assert (changes.before, changes.after) == (6, len(after))


def test_one_changed_step_is_minor_even_in_a_short_plan():
    assert compare_steps(["Type", "Save"], ["Type", "Save now"]).minor
    assert not compare_steps(["Type", "Save"], ["Log out", "Delete"]).minor


def test_step_text_compares_every_field_and_ignores_reflowed_whitespace():
    a = step_text("Fill  the   form", "a saved record", ["name", "date"])
    assert a == step_text("Fill the form", "a saved record", ["name", "date"])
    assert a != step_text("Fill the form", "an error", ["name", "date"])
    assert a != step_text("Fill the form", "a saved record", ["name"])


def test_field_changes_name_each_changed_field():
    before = {"id": "s", "input": "write a", "depends_on": ["x"], "max_retries": 1}
    after = {"id": "s", "input": "write b", "depends_on": ["x", "y"], "max_retries": 1}
    changes = field_changes(before, after)
    assert changes["values_changed"] == {
        "root['input']": {"new_value": "write b", "old_value": "write a"}
    }
    assert changes["iterable_item_added"] == {"root['depends_on'][1]": "y"}
    assert field_changes(before, dict(before)) == {}
