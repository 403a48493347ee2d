"""Pitfalls 5 and 7: thresholds and state-drift rules may not change without the documentation."""

from __future__ import annotations

from pathlib import Path

import pytest

from veriloop.context import Context
from veriloop.engines import observation, verification
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR

DOC = (Path(__file__).resolve().parents[2] / "docs" / "verification.md").read_text()


def test_documented_thresholds_are_the_defaults():
    ctx = Context()
    assert f"confidence >= {ctx.success_threshold:.2f}" in DOC
    assert f"task_completed and confidence >= {ctx.goal_threshold:.2f}" in DOC
    assert f"below **{ctx.low_confidence_threshold:.2f}**" in DOC
    assert f"confidence **{verification.NO_CHANGE_CONFIDENCE}**" in DOC


@pytest.mark.parametrize(
    "line",
    [
        observation.URL_UNCHANGED,
        observation.CONTENT_UPDATED_NO_SKELETON_CHANGE,
        observation.CONTENT_UNCHANGED_SKELETON,
        observation.CONTENT_UPDATED_HASH,
        observation.CONTENT_UNCHANGED_HASH,
        observation.NETWORK_WITNESSED,
        observation.MUTATION_WITNESSED,
        observation.CLIENT_URL_CHANGED,
        observation.CLIENT_URL_UNCHANGED,
    ],
)
def test_every_observation_line_is_documented(line):
    assert line in DOC


def test_numbered_elements_are_documented_as_interactive():
    assert f"every element the snapshot script numbered with\n  `{ELEMENT_ID_ATTR}`" in DOC
