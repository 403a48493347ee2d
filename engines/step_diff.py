"""Structured differences between plan steps and their replacements (DeepDiff), and the rule that
says when a replacement is a minor modification of the remaining plan.

The rule (``compare_steps``): a proposed replacement edits the plan in place only when it has the
same number of steps as the remaining plan give or take one (``MAX_LENGTH_CHANGE``), and at most
one step, or at most a third of the remaining steps (``MAX_CHANGED_SHARE``), was added, removed or
edited. Steps are aligned as sequences (an inserted step is one change, not a shift of all the
others). The model's own claim that its changes are minor can only make the decision stricter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from deepdiff import DeepDiff

from veriloop.schemas.records import StepChanges

MAX_LENGTH_CHANGE = 1
"""Steps a minor modification may add or remove, net."""
MAX_CHANGED_SHARE = 1 / 3
"""Share of the remaining steps a minor modification may change (at least one step always may)."""


def compare_steps(before: Sequence[str], after: Sequence[str]) -> StepChanges:
    """Compare two step lists (each step one text: see ``step_text``) and apply the rule."""
    diff = DeepDiff(list(before), list(after))
    changed = sum(len(levels) for levels in diff.tree.values())
    minor = abs(len(after) - len(before)) <= MAX_LENGTH_CHANGE and changed <= max(
        1, len(before) * MAX_CHANGED_SHARE
    )
    return StepChanges(
        before=len(before), after=len(after), changed=changed, minor=minor, diff=_plain(diff)
    )


def step_text(description: str, expected_outcome: str | None, sub_tasks: Sequence[str]) -> str:
    """One comparable text per step: what it does, what it expects, its sub-task objectives
    (whitespace collapsed, so reflowed text is not a change)."""
    parts = [description, *([f"expect: {expected_outcome}"] if expected_outcome else [])]
    parts += [f"sub-task: {objective}" for objective in sub_tasks]
    return " | ".join(" ".join(part.split()) for part in parts)


def field_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """DeepDiff's field-level report between two versions of one step (empty: identical)."""
    return _plain(DeepDiff(dict(before), dict(after)))


def _plain(diff: DeepDiff) -> dict[str, Any]:
    """The report as plain JSON values (sets and DeepDiff's own types serialised)."""
    return json.loads(diff.to_json()) if diff else {}
