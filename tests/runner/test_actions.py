"""The runner executes every action kind in real Chromium; a missing element is reported, not raised."""

from __future__ import annotations

import pytest
from lxml import html as lxml_html

from veriloop.runners.browser.client import PageSession
from veriloop.schemas.actions import parse_action
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR

pytestmark = pytest.mark.browser


def _vid(session: PageSession, html_id: str) -> int:
    """Snapshot the page and return the veriloop id of ``#html_id``."""
    dom = session.snapshot(wait=False).dom
    return int(lxml_html.fromstring(dom).get_element_by_id(html_id).get(ELEMENT_ID_ATTR))


def _do(session: PageSession, text: str):
    execution = session.execute(parse_action(text))
    assert execution.ok, execution.error
    return execution


@pytest.fixture
def controls(session: PageSession, pages_url: str) -> PageSession:
    session.goto(f"{pages_url}/controls.html")
    return session


def test_click(controls: PageSession) -> None:
    _do(controls, f"click({_vid(controls, 'counter-button')})")
    _do(controls, f"click({_vid(controls, 'counter-button')})")
    assert controls.page.text_content("#count") == "2"


def test_click_on_a_pointer_div(controls: PageSession) -> None:
    _do(controls, f"click({_vid(controls, 'clickable-div')})")
    assert controls.page.text_content("#clickable-div") == "clicked div"


def test_set_value_on_text_checkbox_and_select(controls: PageSession) -> None:
    _do(controls, f'setValue({_vid(controls, "name")}, "Jas")')
    _do(controls, f'setValue({_vid(controls, "agree")}, "true")')
    _do(controls, f'setValue({_vid(controls, "color")}, "Blue")')
    page = controls.page
    assert page.input_value("#name") == "Jas"
    assert page.is_checked("#agree")
    assert page.input_value("#color") == "b"
    _do(controls, f'setValue({_vid(controls, "agree")}, "false")')
    assert not page.is_checked("#agree")


def test_select_option_by_label_and_by_value(controls: PageSession) -> None:
    _do(controls, f'selectOption({_vid(controls, "color")}, "Green")')
    assert controls.page.input_value("#color") == "g"
    _do(controls, f'selectOption({_vid(controls, "color")}, "r")')
    assert controls.page.input_value("#color") == "r"


def test_press_on_an_element_and_on_the_page(controls: PageSession) -> None:
    _do(controls, f'setValue({_vid(controls, "enter-box")}, "hello")')
    _do(controls, f'press({_vid(controls, "enter-box")}, "Enter")')
    assert controls.page.text_content("#entered") == "entered hello"
    _do(controls, 'press("Escape")')
    assert controls.page.text_content("#pressed") == "escape pressed"


def test_navigate_and_go_back(controls: PageSession, pages_url: str) -> None:
    _do(controls, f'navigate("{pages_url}/other.html")')
    assert controls.page.url.endswith("/other.html")
    _do(controls, "goBack()")
    assert controls.page.url.endswith("/controls.html")
    snap = controls.snapshot()  # the snapshot script is back in the restored document
    assert snap.url.endswith("/controls.html") and ELEMENT_ID_ATTR in snap.dom


def test_go_back_without_history_is_reported(session: PageSession, pages_url: str) -> None:
    session.goto(f"{pages_url}/controls.html")
    execution = session.execute(parse_action("goBack()"))
    assert execution.ok is False and "no previous page" in execution.error


def test_scroll_directions_and_element(controls: PageSession) -> None:
    scroll_y = "() => window.scrollY"
    _do(controls, 'scroll("down")')
    down = controls.page.evaluate(scroll_y)
    assert down > 0
    _do(controls, 'scroll("bottom")')
    bottom = controls.page.evaluate(scroll_y)
    assert bottom > down
    _do(controls, 'scroll("up")')
    assert controls.page.evaluate(scroll_y) < bottom
    _do(controls, 'scroll("top")')
    assert controls.page.evaluate(scroll_y) == 0
    _do(controls, f"scroll({_vid(controls, 'far-button')})")
    assert controls.page.evaluate(
        "() => { const r = document.getElementById('far-button').getBoundingClientRect();"
        " return r.top >= 0 && r.bottom <= window.innerHeight; }"
    )


def test_wait_finish_and_fail_touch_nothing(controls: PageSession) -> None:
    before = controls.snapshot(wait=False).dom
    for text in ("wait(0.2)", "finish()", 'fail("cannot")'):
        _do(controls, text)
    assert controls.snapshot(wait=False).dom == before


def test_action_on_a_missing_element_is_an_observation(controls: PageSession) -> None:
    controls.snapshot(wait=False)
    execution = controls.execute(parse_action('setValue(9999, "x")'))
    assert execution.ok is False
    assert execution.client_verification is not None
    assert execution.client_verification.element_found is False
    assert execution.client_verification.selector == f'[{ELEMENT_ID_ATTR}="9999"]'


def test_action_the_page_refuses_is_reported(controls: PageSession) -> None:
    execution = controls.execute(parse_action(f"click({_vid(controls, 'hidden-button')})"))
    assert execution.ok is False and execution.error
    assert execution.client_verification is None  # the element exists; it just cannot be clicked
    wrong_kind = controls.execute(parse_action(f'selectOption({_vid(controls, "name")}, "x")'))
    assert wrong_kind.ok is False


def test_refresh_reloads_the_page_and_the_script_sees_it(controls: PageSession) -> None:
    _do(controls, f"click({_vid(controls, 'counter-button')})")
    assert controls.page.text_content("#count") == "1"
    controls.mark_action()
    _do(controls, "refresh()")
    assert controls.page.text_content("#count") == "0"
    snap = controls.snapshot()  # the reloaded document inherited the action's mark
    assert snap.client_observations.did_network_occur is True
    assert snap.client_observations.did_url_change is False
