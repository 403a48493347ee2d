"""Loop memory: the fingerprint of (action, page)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from veriloop.engines.loop import action_fingerprint
from veriloop.engines.observation import capture_page_state
from veriloop.engines.skeleton import BACKGROUND_FIELD, page_identity
from veriloop.schemas.actions import parse_action
from veriloop.schemas.observation import BeforeState

URL = "https://shop.example/cart"


def test_same_action_same_page_same_fingerprint(page):
    state = capture_page_state(URL, page())
    assert action_fingerprint("click(14)", state) == action_fingerprint("click( 14 )", state)
    assert action_fingerprint('setValue(12, "Jas")', state) == action_fingerprint(
        "setValue(12,'Jas')", state
    )
    # The action as read from its text fingerprints as the text does.
    assert action_fingerprint(parse_action("click( 14 )"), state) == action_fingerprint(
        "click(14)", state
    )


def test_ticker_does_not_change_the_fingerprint(page):
    a = capture_page_state(URL, page(ticker="1"))
    b = capture_page_state(URL, page(ticker="2"))
    assert a.dom_hash != b.dom_hash
    assert action_fingerprint("click(14)", a) == action_fingerprint("click(14)", b)


def test_other_action_page_or_url_changes_the_fingerprint(page):
    state = capture_page_state(URL, page())
    base = action_fingerprint("click(14)", state)
    assert action_fingerprint("click(13)", state) != base
    assert action_fingerprint("click(14)", capture_page_state(URL, page(button="Saved"))) != base
    assert action_fingerprint("click(14)", capture_page_state(URL + "?step=2", page())) != base


def test_without_a_skeleton_the_hash_identifies_the_page(page):
    a = capture_page_state(URL, page(ticker="1")).model_copy(update={"semantic_skeleton": None})
    b = capture_page_state(URL, page(ticker="2")).model_copy(update={"semantic_skeleton": None})
    assert action_fingerprint("click(14)", a) != action_fingerprint("click(14)", b)


def test_unparsable_action_is_fingerprinted_by_its_collapsed_text(page):
    state = capture_page_state(URL, page())
    assert action_fingerprint("do  something", state) == action_fingerprint("do something", state)


def test_fingerprint_survives_a_json_round_trip_of_the_state(page):
    state = capture_page_state(URL, page())
    restored = type(state).model_validate_json(state.model_dump_json())
    assert action_fingerprint("click(14)", restored) == action_fingerprint("click(14)", state)


def _skeleton(button: str = "Save", text: str = "Updated at 10:42", **more) -> dict:
    return {
        "elements": {"7": {"tag": "button", "text": button}, "8": {"tag": "a", "href": "/p/2"}},
        "alerts": {"0": "Saved 2 items"},
        "content": {"headings": ["Cart (3)"], "texts": [text], "truncated": False},
        **more,
    }


def test_the_identity_leaves_out_digits_of_page_text_marks_and_scroll_only():
    base = page_identity(_skeleton())
    assert page_identity(_skeleton(text="Updated at 11:07")) == base
    assert (
        page_identity(_skeleton(background=[["number", "7", "text"]], scroll={"position": "0,300"}))
        == base
    )
    assert page_identity(_skeleton(text="Removed at 10:42")) != base
    assert page_identity(_skeleton(button="Save 2")) != base  # digits of an element count
    other_alert = _skeleton()
    other_alert["alerts"] = {"0": "Saved 3 items"}
    assert page_identity(other_alert) != base


def test_a_marked_element_stands_without_the_fields_its_mark_covers():
    def marked(text: str, href: str) -> dict:
        skeleton = _skeleton()
        skeleton["elements"]["7"] = {
            "tag": "a",
            "text": text,
            "href": href,
            BACKGROUND_FIELD: "text",
        }
        return skeleton

    assert page_identity(marked("3 min ago", "/a")) == page_identity(marked("4 min ago", "/a"))
    assert page_identity(marked("3 min ago", "/a")) != page_identity(marked("3 min ago", "/b"))
    # An element keyed by the field's name takes the same path and changes nothing.
    keyed = _skeleton()
    keyed["elements"][BACKGROUND_FIELD] = {"tag": "div", "text": "Ad"}
    assert page_identity(keyed) != page_identity(_skeleton())
    assert page_identity(keyed) == page_identity(json.loads(json.dumps(keyed)))


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=16,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["elements", "alerts", "content", "background"]), _JSON))
def test_any_stored_skeleton_has_an_identity_that_ignores_key_order(skeleton):
    """Whatever a stored before_state holds (it is read from JSON), the identity is written, and
    the same map in another key order is the same page."""
    reordered = json.loads(json.dumps(skeleton, sort_keys=True))
    assert page_identity(skeleton) == page_identity(reordered)
    state = BeforeState(url=URL, dom_hash="h", semantic_skeleton=skeleton)
    assert action_fingerprint("click(1)", state) == action_fingerprint(
        "click(1)", state.model_copy()
    )


def test_a_skeleton_json_cannot_hold_is_identified_by_the_hash():
    deep: list = []
    for _ in range(400):  # deeper than the writer goes
        deep = [deep]
    for odd in ({"elements": {"7": {"tag": {"a", "b"}}}}, {"content": deep}):
        a = BeforeState(url=URL, dom_hash="h1", semantic_skeleton=odd)
        b = a.model_copy(update={"dom_hash": "h2"})
        assert action_fingerprint("click(7)", a) != action_fingerprint("click(7)", b)
