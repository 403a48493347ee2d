"""Completion must be earned: cited change lines for goal_achieved, and the finish audit."""

from __future__ import annotations

import pytest

from veriloop.engines.completion import (
    NO_CHANGE_SEEN,
    audit_completion,
    build_trajectory,
    cites_changes,
    is_change,
)
from veriloop.engines.observation import (
    CLIENT_URL_UNCHANGED,
    CONTENT_UPDATED_NO_SKELETON_CHANGE,
    NETWORK_WITNESSED,
    URL_UNCHANGED,
    capture_page_state,
)
from veriloop.engines.verification import verify_action_with_observations
from veriloop.llm import LLMUnavailable
from veriloop.llm.scripted import Fail
from veriloop.prompts.verification import build_verification_messages, numbered_lines
from veriloop.schemas import CompletionAudit, SemanticVerdict

pytestmark = pytest.mark.anyio

OBSERVATIONS = [
    URL_UNCHANGED,
    "Element '14' changed 'text' from 'Save' to 'Saved'",
    "New message/alert appeared: Patient saved",
    NETWORK_WITNESSED,
    CLIENT_URL_UNCHANGED,
]
URL = "https://clinic.example/patients/new"
GOAL = "Add a patient named Jas"


@pytest.mark.parametrize(
    ("evidence", "cited"),
    [
        ([2], True),
        ([2, 3], True),
        ([], False),  # a claim without evidence
        ([1], False),  # "URL did not change" proves nothing
        ([4], False),  # what the client witnessed is not a change on the page
        ([5], False),
        ([3, 1], False),  # one bad citation spoils the claim
        ([0], False),  # numbering starts at 1
        ([6], False),  # no such line
        ([-1], False),
    ],
)
def test_cites_changes_needs_existing_change_lines(evidence, cited) -> None:
    assert cites_changes(evidence, OBSERVATIONS) is cited


def test_no_change_lines_are_not_changes() -> None:
    assert not is_change(CONTENT_UPDATED_NO_SKELETON_CHANGE)
    assert is_change("Navigation occurred: URL changed from a to b")
    assert is_change("Focus changed from nothing to input#name")


def test_prompt_numbers_are_the_numbers_cited() -> None:
    [_, user] = build_verification_messages(GOAL, "click(14)", OBSERVATIONS)
    assert numbered_lines(user["content"]) == dict(enumerate(OBSERVATIONS, start=1))


def test_trajectory_lists_actions_and_their_changes_only() -> None:
    actions = [{"step_index": 0, "action": "click(4)"}, {"step_index": 1, "action": "click(7)"}]
    verified = [
        {"step_index": 0, "observations": [URL_UNCHANGED], "success": False, "reason": "DONE!"},
        {"step_index": 1, "observations": OBSERVATIONS, "task_completed": True},
    ]
    assert build_trajectory(actions, verified) == [
        "Action 1: click(4)",
        f"  {NO_CHANGE_SEEN}",
        "Action 2: click(7)",
        "  - Element '14' changed 'text' from 'Save' to 'Saved'",
        "  - New message/alert appeared: Patient saved",
    ]


def audit(goal_met: bool, confidence: float) -> CompletionAudit:
    return CompletionAudit(goal_met=goal_met, confidence=confidence, reason="checked")


@pytest.mark.parametrize(
    ("answer", "agreed"),
    [(audit(True, 0.9), True), (audit(True, 0.69), False), (audit(False, 0.99), False)],
)
async def test_audit_agrees_only_with_goal_met_at_the_threshold(
    scripted_model, llm, answer, agreed
) -> None:
    scripted_model.script("audit", answer)
    trajectory = ["Action 1: click(7)", "  - New message/alert appeared: Patient saved"]
    outcome = await audit_completion(goal=GOAL, trajectory=trajectory, llm=llm)

    assert outcome.result.agreed is agreed
    assert outcome.result.goal_met is answer.goal_met
    assert outcome.usage["verification"]["calls"] == 1  # counted as verification cost
    [request] = scripted_model.requests
    assert request.purpose == "audit"
    assert GOAL in request.text and "Patient saved" in request.text
    assert "do not see the page" in request.text


async def test_an_unusable_audit_is_a_veto_and_an_outage_propagates(scripted_model, llm) -> None:
    scripted_model.script("audit", "yes, it is done", Fail(400, "context too long"))
    vetoed = await audit_completion(goal=GOAL, trajectory=[], llm=llm)
    assert vetoed.result.agreed is False
    assert vetoed.usage["verification"]["calls"] == 1  # the unusable answer still counts
    assert "could not be used" in vetoed.result.reason
    with pytest.raises(LLMUnavailable):
        await audit_completion(goal=GOAL, trajectory=[], llm=llm)


@pytest.mark.parametrize(
    ("evidence", "achieved"), [([2], True), ([], False), ([1], False), ([9], False)]
)
async def test_a_verdict_completes_only_with_cited_change_lines(
    page, llm, scripted_model, evidence, achieved
) -> None:
    scripted_model.script(
        "verification",
        SemanticVerdict(
            action_succeeded=True,
            task_completed=True,
            confidence=0.95,
            reason="done",
            evidence=evidence,
        ),
    )
    outcome = await verify_action_with_observations(
        goal=GOAL,
        action="click(14)",
        step_index=0,
        before_state=capture_page_state(URL, page()),
        current_dom=page(alert="Patient saved"),
        current_url=URL,
        llm=llm,
    )
    result = outcome.result
    assert result.observations[0] == URL_UNCHANGED
    assert result.goal_achieved is achieved
    assert result.uncited_completion is not achieved
    assert result.evidence == evidence
    assert result.success is True  # the action itself still worked
