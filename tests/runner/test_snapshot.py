"""The snapshot script in real headless Chromium: ids, live state, hidden marks, witness, stability."""

from __future__ import annotations

import re

import pytest
from lxml import html as lxml_html

from veriloop.engines.observation import build_observation_list, capture_page_state
from veriloop.engines.skeleton import extract_semantic_skeleton
from veriloop.runners.browser.client import PageSession, snapshot_script
from veriloop.schemas.actions import parse_action
from veriloop.schemas.page_contract import (
    BACKGROUND_ATTR,
    ELEMENT_ID_ATTR,
    HIDDEN_ATTR,
    SCROLL_ATTR,
    VIEWPORT_ATTR,
)

pytestmark = pytest.mark.browser


def _ids(dom: str) -> dict[str, str]:
    """HTML id -> veriloop id of every numbered element in a snapshot."""
    root = lxml_html.fromstring(dom)
    return {
        el.get("id"): el.get(ELEMENT_ID_ATTR)
        for el in root.iter()
        if el.get(ELEMENT_ID_ATTR) and el.get("id")
    }


def _element(dom: str, html_id: str):
    return lxml_html.fromstring(dom).get_element_by_id(html_id)


def test_script_spells_the_page_contract_names(session: PageSession, pages_url: str) -> None:
    source = snapshot_script()
    assert re.search(r'const ELEMENT_ID_ATTR = "([^"]+)"', source).group(1) == ELEMENT_ID_ATTR
    contract = [ELEMENT_ID_ATTR, HIDDEN_ATTR, BACKGROUND_ATTR, SCROLL_ATTR, VIEWPORT_ATTR]
    names = ["ELEMENT_ID_ATTR", "HIDDEN_ATTR", "BACKGROUND_ATTR", "SCROLL_ATTR", "VIEWPORT_ATTR"]
    for name, value in zip(names, contract, strict=True):
        assert re.search(rf'const {name} = "([^"]+)"', source).group(1) == value
    session.goto(f"{pages_url}/controls.html")
    spelled = session.page.evaluate(
        f"() => [{', '.join(f'window.__veriloop.{name}' for name in names)}]"
    )
    assert spelled == contract


def test_ids_are_stable_and_never_reused(session: PageSession, pages_url: str) -> None:
    session.goto(f"{pages_url}/controls.html")
    first = _ids(session.snapshot(wait=False).dom)
    assert {
        "counter-button",
        "name",
        "agree",
        "color",
        "editor",
        "to-other",
        "hidden-button",
    } <= first.keys()
    assert "heading" not in first  # static text is not numbered
    assert "clickable-div" in first and "inner" not in first  # cursor:pointer starts a target once

    # A new element inserted before all others, and one removed: old ids stay, nothing is renumbered.
    session.page.evaluate("""() => {
        const b = document.createElement('button'); b.id = 'new-first'; b.textContent = 'New';
        document.body.prepend(b);
        document.getElementById('toggle').remove();
    }""")
    second = _ids(session.snapshot(wait=False).dom)
    highest = max(int(v) for v in first.values())
    for html_id, vid in first.items():
        if html_id != "toggle":
            assert second[html_id] == vid
    assert int(second["new-first"]) == highest + 1

    # A copy made by the page carries the original's id: it gets its own, the original keeps its own.
    session.page.evaluate("""() => {
        const copy = document.getElementById('counter-button').cloneNode(true); copy.id = 'copy';
        document.body.append(copy);
    }""")
    third = _ids(session.snapshot(wait=False).dom)
    assert third["counter-button"] == first["counter-button"]
    assert int(third["copy"]) == highest + 2


def test_live_state_goes_into_the_snapshot_and_the_skeleton(
    session: PageSession, pages_url: str
) -> None:
    session.goto(f"{pages_url}/controls.html")
    page = session.page
    page.fill("#name", "Jas")
    page.fill("#notes", "allergic to penicillin")
    page.fill("#secret", "hunter2")
    page.check("#agree")
    page.check("#plan-a")
    page.select_option("#color", "g")
    page.click("#editor")
    page.keyboard.type("typed text")
    page.click("#toggle")
    dom = session.snapshot(wait=False).dom

    assert _element(dom, "name").get("value") == "Jas"
    assert _element(dom, "notes").text_content() == "allergic to penicillin"
    assert _element(dom, "agree").get("checked") is not None
    assert _element(dom, "plan-a").get("checked") is not None
    assert [
        o.get("value")
        for o in _element(dom, "color").iter("option")
        if o.get("selected") is not None
    ] == ["g"]
    assert _element(dom, "editor").text_content() == "typed text"
    assert _element(dom, "toggle").get("aria-pressed") == "true"
    assert "hunter2" not in dom  # passwords never leave the page

    # The live page keeps its own attributes: the state is written into the copy only.
    assert page.get_attribute("#name", "value") is None
    assert page.get_attribute("#agree", "checked") is None

    ids = _ids(dom)
    elements = extract_semantic_skeleton(dom)["elements"]
    assert elements[ids["name"]]["value"] == "Jas"
    assert elements[ids["notes"]]["value"] == "allergic to penicillin"
    assert elements[ids["agree"]]["checked"] is True
    assert elements[ids["color"]]["value"] == "g"
    assert elements[ids["editor"]]["text"] == "typed text"


def test_unrendered_elements_are_marked_hidden(session: PageSession, pages_url: str) -> None:
    session.goto(f"{pages_url}/controls.html")
    dom = session.snapshot(wait=False).dom
    assert _element(dom, "gone").get(HIDDEN_ATTR) == "1"
    assert _element(dom, "hidden-button").get(HIDDEN_ATTR) == "1"
    assert _element(dom, "invisible").get(HIDDEN_ATTR) == "1"
    assert _element(dom, "counter-button").get(HIDDEN_ATTR) is None
    assert _element(dom, "far-button").get(HIDDEN_ATTR) is None  # off-screen is not hidden
    elements = extract_semantic_skeleton(dom)["elements"]
    ids = _ids(dom)
    assert ids["hidden-button"] not in elements and ids["counter-button"] in elements
    assert (
        session.page.get_attribute("#gone", HIDDEN_ATTR) is None
    )  # never written to the live page


def _after(session: PageSession, selector: str, **snapshot_options):
    before = session.snapshot()
    session.mark_action()
    session.page.click(selector)
    return session.snapshot(since_url=before.url, **snapshot_options)


def test_witness_fetch_only_action(session: PageSession, pages_url: str) -> None:
    session.goto(f"{pages_url}/witness.html")
    seen = _after(session, "#fetch-only").client_observations
    assert session.page.evaluate("() => window.lastPing") == {"pong": True}
    assert (seen.did_network_occur, seen.did_dom_mutate, seen.did_url_change) == (
        True,
        False,
        False,
    )


def test_witness_no_op_click_on_a_ticking_page(session: PageSession, pages_url: str) -> None:
    session.goto(f"{pages_url}/witness.html")
    ticks_before = session.page.evaluate("() => ticks")
    seen = _after(session, "#no-op").client_observations
    assert (
        session.page.evaluate("() => ticks") > ticks_before + 1
    )  # the clock kept ticking meanwhile
    assert (seen.did_network_occur, seen.did_dom_mutate, seen.did_url_change) == (
        False,
        False,
        False,
    )


def test_witness_ignores_its_own_numbering(session: PageSession, pages_url: str) -> None:
    session.goto(f"{pages_url}/witness.html")
    session.snapshot()
    session.page.evaluate(
        "() => document.body.append(Object.assign(document.createElement('button'), {id: 'late'}))"
    )
    session.mark_action()  # the button arrived before the action; numbering it now is not the action's effect
    after = session.snapshot()
    assert "late" in _ids(after.dom)
    assert after.client_observations.did_dom_mutate is False


def test_witness_navigation(session: PageSession, pages_url: str) -> None:
    session.goto(f"{pages_url}/witness.html")
    seen_snapshot = _after(session, "#nav")
    seen = seen_snapshot.client_observations
    assert seen_snapshot.url.endswith("/other.html")
    assert seen.did_url_change is True
    assert (
        seen.did_network_occur is True and seen.did_dom_mutate is True
    )  # a new document was loaded


def test_navigation_witnessed_without_the_runner_passing_the_url(
    session: PageSession, pages_url: str
) -> None:
    # An extension may not know the old URL: the mark left in sessionStorage survives the navigation.
    session.goto(f"{pages_url}/witness.html")
    session.snapshot()
    session.mark_action()
    session.page.click("#nav")
    after = session.snapshot()
    assert after.url.endswith("/other.html") and after.client_observations.did_url_change is True


def test_stability_waits_for_a_page_that_mutates_for_a_second(
    session: PageSession, pages_url: str
) -> None:
    session.goto(f"{pages_url}/witness.html")
    after = _after(session, "#mutate-1s")
    items = lxml_html.fromstring(after.dom).get_element_by_id("items").findall("li")
    assert [li.text for li in items][-1] == "item 10" and len(
        items
    ) == 10  # captured after it settled
    assert after.settled is True
    assert after.client_observations.did_dom_mutate is True


def test_quiet_page_still_waits_the_minimum(session: PageSession, pages_url: str) -> None:
    session.goto(f"{pages_url}/controls.html")
    session.snapshot()
    snap = session.snapshot()
    assert snap.settled is True and snap.stability_wait_ms >= 500


def test_stability_gives_up_on_a_page_that_never_settles(
    session: PageSession, pages_url: str
) -> None:
    session.goto(f"{pages_url}/witness.html")
    after = _after(session, "#never-settle")
    assert after.settled is False
    assert after.stability_wait_ms >= 5000  # returned at the cap, not before
    count_in_snapshot = int(_element(after.dom, "busy").get("data-count"))
    assert count_in_snapshot >= 40  # it kept mutating the whole time (one per 100 ms)
    assert (
        session.page.evaluate("() => Number(document.getElementById('busy').dataset.count)")
        >= count_in_snapshot
    )


# --- background marks, scroll position and viewport (the content the diff reads) ----------------


def _state(snapshot):
    return capture_page_state(snapshot.url, snapshot.dom, snapshot.active_element)


def _verified(session: PageSession, before, action: str):
    session.mark_action()
    assert session.execute(parse_action(action)).ok
    after = session.snapshot()
    return build_observation_list(
        _state(before), after.dom, after.url, after.client_observations, action=action
    )


def test_elements_that_change_on_their_own_are_marked_and_ignored(
    session: PageSession, pages_url: str
) -> None:
    session.goto(f"{pages_url}/background.html")
    session.snapshot()  # what the page does before its first snapshot is rendering, not background
    session.page.wait_for_timeout(500)
    before = session.snapshot()
    assert _element(before.dom, "quote").get(BACKGROUND_ATTR) == "text"
    assert _element(before.dom, "ad").get(BACKGROUND_ATTR) == "href"
    assert _element(before.dom, "age").get(BACKGROUND_ATTR) == "text"
    assert _element(before.dom, "cart").get(BACKGROUND_ATTR) is None
    assert session.page.get_attribute("#quote", BACKGROUND_ATTR) is None  # copy only
    ids = _ids(before.dom)

    no_op = _verified(session, before, f"click({ids['no-op']})")
    assert no_op.meaningful_content_change is False, no_op.observations

    before = session.snapshot()
    added = _verified(session, before, f"click({ids['add']})")
    assert added.meaningful_content_change is True
    assert f"Element '{ids['cart']}' changed 'text' from 'Cart (0)' to 'Cart (1)'" in (
        added.observations
    )
    assert not any("Sponsored" in line or "days ago" in line for line in added.observations)


def test_scroll_position_and_viewport_make_a_scroll_an_observation(
    session: PageSession, pages_url: str
) -> None:
    session.goto(f"{pages_url}/controls.html")
    top = session.snapshot()
    root = lxml_html.fromstring(top.dom)
    assert root.get(SCROLL_ATTR) == "0,0"
    ids = _ids(top.dom)
    assert ids["far-button"] not in root.get(VIEWPORT_ATTR).replace("-", " ").split()

    down = _verified(session, top, f"scroll({ids['far-button']})")
    assert down.meaningful_content_change is True
    (line,) = [line for line in down.observations if line.startswith("Page scrolled")]
    assert line.startswith("Page scrolled from (0,0) to (0,") and "'Far below'" in line

    session.execute(parse_action('scroll("top")'))
    at_top = session.snapshot()
    still = _verified(session, at_top, 'scroll("up")')  # nothing moves
    assert still.meaningful_content_change is False
    assert not any(line.startswith("Page scrolled") for line in still.observations)
