"""Loop memory: the fingerprint of (action, page)."""

from __future__ import annotations

from veriloop.engines.loop import action_fingerprint
from veriloop.engines.observation import capture_page_state

URL = "https://shop.example/cart"


def test_same_action_same_page_same_fingerprint(page):
    state = capture_page_state(URL, page())
    assert action_fingerprint("click(14)", state) == action_fingerprint("click( 14 )", state)
    assert action_fingerprint('setValue(12, "Jas")', state) == action_fingerprint(
        "setValue(12,'Jas')", state
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
