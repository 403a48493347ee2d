"""The observation list, rule by rule (seed Step 5.2), and the page-state capture."""

from __future__ import annotations

import pytest

import veriloop.engines.observation as observation
from veriloop.engines.dom_context import compact_page
from veriloop.engines.observation import (
    build_observation_list,
    capture_page_state,
    compute_dom_hash,
)
from veriloop.engines.skeleton import extract_semantic_skeleton
from veriloop.schemas.observation import BeforeState, BeforeStateSummary, ClientObservations

URL = "https://clinic.example/patients/new"


def before(html: str, url: str = URL, **kwargs) -> BeforeState:
    return capture_page_state(url, html, **kwargs)


# --- hash and capture -----------------------------------------------------------------------


def test_dom_hash_ignores_whitespace_only_changes(page):
    html = page()
    assert compute_dom_hash(html) == compute_dom_hash(
        html.replace("\n", "\n\n    ").replace("> <", ">\t<")
    )
    assert compute_dom_hash(html) != compute_dom_hash(page(ticker="12:00:02"))


def test_dom_hash_of_text_and_of_declared_charset_bytes_agree():
    html = '<html><head><meta charset="windows-1251"></head><body><p>Привет</p></body></html>'
    assert compute_dom_hash(html) == compute_dom_hash(html.encode("cp1251"))


def test_capture_page_state(page):
    state = capture_page_state(URL, page(), active_element="input#patient_name")
    assert state.url == URL
    assert state.dom_hash == compute_dom_hash(page())
    assert state.active_element == "input#patient_name"
    assert state.semantic_skeleton == extract_semantic_skeleton(page())


def test_capture_page_state_keeps_hash_when_skeleton_extraction_fails(page, monkeypatch):
    def broken(root):
        raise RuntimeError("extractor bug")

    monkeypatch.setattr(observation, "skeleton_from_tree", broken)
    state = capture_page_state(URL, page())
    assert state.semantic_skeleton is None
    assert state.dom_hash == compute_dom_hash(page())


def test_the_stored_page_state_keeps_the_skeleton_as_text_and_reads_back_whole(page):
    state = capture_page_state(URL, page(), active_element="input#patient_name")
    stored = state.stored()
    assert isinstance(stored["semantic_skeleton"], str)  # stored and forwarded unparsed
    assert (stored, compact_page(page())) == observation.stored_page_state(
        URL, page(), "input#patient_name"
    )  # and the compact page, from the same parse
    assert BeforeState.model_validate(stored) == state  # either form validates to the same page
    assert BeforeState.model_validate(state.model_dump()) == state
    summary = BeforeStateSummary.of(stored)
    assert summary.skeleton_elements == len(state.semantic_skeleton["elements"]) > 0
    assert summary == BeforeStateSummary.of(state.model_dump())


@pytest.mark.parametrize("text", ['{"elements": {"4": ', "[1, 2]", "null"])
def test_stored_text_that_is_not_a_skeleton_verifies_by_the_hash(page, text):
    stored = {**before(page()).stored(), "semantic_skeleton": text}
    assert BeforeState.model_validate(stored).semantic_skeleton is None
    result = build_observation_list(BeforeState.model_validate(stored), page(button="Saved"), URL)
    assert result.observations[1:] == [observation.CONTENT_UPDATED_HASH]


def test_a_page_state_without_skeleton_is_stored_without_one(page, monkeypatch):
    monkeypatch.setattr(observation, "skeleton_from_tree", lambda root: 1 / 0)
    stored = capture_page_state(URL, page()).stored()
    assert stored["semantic_skeleton"] is None and stored["skeleton_elements"] is None
    assert BeforeState.model_validate(stored).semantic_skeleton is None


def test_one_parse_serves_the_observation_list_and_the_next_before_state(page, monkeypatch):
    start, parses = before(page()), []
    real = observation.parse_utf8
    monkeypatch.setattr(observation, "parse_utf8", lambda data: parses.append(1) or real(data))
    result = build_observation_list(start, page(button="Saved"), URL)
    assert len(parses) == 1
    assert result.page_state == capture_page_state(URL, page(button="Saved")).stored()


# --- URL --------------------------------------------------------------------------------------


def test_url_change_line(page):
    result = build_observation_list(before(page()), page(), "https://clinic.example/patients/7")
    assert result.url_changed is True
    assert result.observations[0] == (
        f"Navigation occurred: URL changed from {URL} to https://clinic.example/patients/7"
    )


def test_url_unchanged_line(page):
    result = build_observation_list(before(page()), page(), URL)
    assert result.url_changed is False
    assert result.observations[0] == "URL did not change"


# --- page content: skeleton first ---------------------------------------------------------


def test_skeleton_diff_lines_are_a_meaningful_change(page):
    result = build_observation_list(
        before(page()), page(button="Saved", alert="Patient saved"), URL
    )
    assert result.meaningful_content_change is True
    assert result.observations[1:] == [
        "New message/alert appeared: 'Patient saved'",
        "Element '14' changed 'text' from 'Save' to 'Saved'",
    ]


NUMBERED_AREA = """<html><body>
  <div id="query">Click the reward area</div>
  <div id="area" data-veriloop-id="5">{text}</div>
  <button data-veriloop-id="6">Submit</button>
</body></html>"""


def test_text_change_of_a_numbered_non_semantic_element_is_meaningful():
    # The page contract: what the snapshot script numbered is interactive, whatever its tag.
    result = build_observation_list(
        before(NUMBERED_AREA.format(text="Reward: 0")), NUMBERED_AREA.format(text="Reward: 1"), URL
    )
    assert result.meaningful_content_change is True
    assert result.observations[1:] == ["Element '5' changed 'text' from 'Reward: 0' to 'Reward: 1'"]


def test_the_same_change_of_an_unnumbered_element_is_not():
    unnumbered = NUMBERED_AREA.replace(' data-veriloop-id="5"', "")
    result = build_observation_list(
        before(unnumbered.format(text="Reward: 0")), unnumbered.format(text="Reward: 1"), URL
    )
    assert result.meaningful_content_change is False
    assert result.observations[1] == observation.CONTENT_UPDATED_NO_SKELETON_CHANGE


def test_ticker_changes_hash_but_is_not_meaningful(page):
    start = before(page())
    ticked = page(ticker="12:00:02", quote="Cut once.")
    assert compute_dom_hash(ticked) != start.dom_hash
    result = build_observation_list(start, ticked, URL)
    assert result.meaningful_content_change is False
    assert result.observations == [
        "URL did not change",
        "No interactive element or alert changed (other markup differs)",
    ]


def test_identical_page_did_not_change(page):
    result = build_observation_list(before(page()), page(), URL)
    assert result.meaningful_content_change is False
    assert (
        result.observations[1]
        == "Page content did not change (no interactive element or alert changes)"
    )


# --- page content: hash only ----------------------------------------------------------------


def without_skeleton(state: BeforeState) -> BeforeState:
    return state.model_copy(update={"semantic_skeleton": None})


def test_hash_only_path_when_before_state_has_no_skeleton(page):
    result = build_observation_list(without_skeleton(before(page())), page(ticker="12:00:02"), URL)
    # Without a skeleton any DOM change counts: there is nothing finer to judge by.
    assert result.meaningful_content_change is True
    assert result.observations[1] == "Page content updated (DOM changed)"


def test_hash_only_path_identical(page):
    result = build_observation_list(without_skeleton(before(page())), page(), URL)
    assert result.meaningful_content_change is False
    assert result.observations[1] == "Page content did not change (DOM hash identical)"


@pytest.mark.parametrize(
    "foreign_skeleton",
    [
        {"elements": "not a map", "alerts": {}},
        {"widgets": []},
        {"elements": {"a": ["x"]}, "alerts": {}},
    ],
)
def test_skeleton_error_falls_back_to_hash_only(page, foreign_skeleton):
    # e.g. a before_state written by another version of the extractor and restored from a checkpoint
    state = before(page()).model_copy(update={"semantic_skeleton": foreign_skeleton})
    changed = build_observation_list(state, page(button="Saved"), URL)
    assert changed.observations[1] == "Page content updated (DOM changed)"
    assert changed.meaningful_content_change is True
    same = build_observation_list(state, page(), URL)
    assert same.observations[1] == "Page content did not change (DOM hash identical)"
    assert same.meaningful_content_change is False


def test_current_skeleton_failure_falls_back_to_hash_only(page, monkeypatch):
    start = before(page())
    monkeypatch.setattr(observation, "skeleton_from_tree", lambda root: 1 / 0)
    result = build_observation_list(start, page(ticker="12:00:02"), URL)
    assert result.observations[1] == "Page content updated (DOM changed)"
    assert result.page_state["semantic_skeleton"] is None


def test_empty_current_dom_uses_the_hash(page):
    result = build_observation_list(before(page()), "", URL)
    assert result.observations[1] == "Page content updated (DOM changed)"
    assert result.meaningful_content_change is True


# --- focus and client witness -----------------------------------------------------------------


def test_focus_change_line(page):
    start = before(page(), active_element="body")
    result = build_observation_list(
        start, page(), URL, current_active_element="input[data-veriloop-id=12]"
    )
    assert "Focus changed from body to input[data-veriloop-id=12]" in result.observations
    # Focus alone is not a content change.
    assert result.meaningful_content_change is False


def test_no_focus_line_when_the_client_reports_none(page):
    result = build_observation_list(before(page(), active_element="body"), page(), URL)
    assert not any(line.startswith("Focus") for line in result.observations)


def test_client_witness_lines(page):
    client = ClientObservations(did_network_occur=True, did_dom_mutate=True, did_url_change=False)
    result = build_observation_list(before(page()), page(), URL, client_observations=client)
    assert result.observations[-3:] == [
        "Background network activity detected",
        "DOM was mutated",
        "The browser client reported no URL change",
    ]
    assert result.client_saw_something is True


@pytest.mark.parametrize(
    ("client", "saw"),
    [
        (None, False),
        (ClientObservations(), False),
        (
            ClientObservations(did_network_occur=False, did_dom_mutate=False, did_url_change=False),
            False,
        ),
        (ClientObservations(did_network_occur=True), True),
        (ClientObservations(did_dom_mutate=True), True),
        (ClientObservations(did_url_change=True), True),
    ],
)
def test_client_saw_something(page, client, saw):
    assert (
        build_observation_list(
            before(page()), page(), URL, client_observations=client
        ).client_saw_something
        is saw
    )


SEQUENCE = """<html><body><div id="query">Click button ONE, then click button TWO.</div>
  <button id="one" data-veriloop-id="1"{selected}>ONE</button>
  <button id="two" data-veriloop-id="2">TWO</button></body></html>"""
FOCUSED_ONE = 'button#one[data-veriloop-id="1"]'


def test_a_click_that_moved_focus_onto_its_element_is_a_change():
    # MiniWoB click-button-sequence: the first click changes nothing in the DOM but the focus.
    page = SEQUENCE.format(selected="")
    result = build_observation_list(
        before(page), page, URL, current_active_element=FOCUSED_ONE, action="click(1)"
    )
    assert result.meaningful_content_change is True
    assert "The clicked element '1' (button 'ONE') took focus" in result.observations


@pytest.mark.parametrize(
    ("selected", "action", "focused"),
    [
        (' aria-selected="true"', "click(1)", FOCUSED_ONE),  # the tab that is already open
        ("", "click(2)", FOCUSED_ONE),  # focus went elsewhere than the clicked element
        ("", None, FOCUSED_ONE),  # no action to attribute it to
    ],
)
def test_focus_is_no_change_otherwise(selected, action, focused):
    page = SEQUENCE.format(selected=selected)
    result = build_observation_list(
        before(page), page, URL, current_active_element=focused, action=action
    )
    assert result.meaningful_content_change is False
