"""The prediction path: action types, fixed templates, DOM checks and the confidence caps."""

from __future__ import annotations

import pytest

from benchmarks.verification_pairs import DEFAULT_CORPUS
from veriloop.engines.prediction import (
    DROPDOWN_OUTCOME,
    NAVIGATION_OUTCOME,
    DomChanges,
    ElementSelector,
    ExpectedOutcome,
    classify_action_type,
    element_exists,
    element_has_text,
    element_not_exists,
    expected_outcome_template,
    prediction_confidence,
    roles_exist,
    run_dom_checks,
    url_changed_significantly,
)
from veriloop.engines.skeleton import parse_html
from veriloop.schemas import ActionParseError, ClientVerification, parse_action

DOM = """<body>
  <a data-veriloop-id="1" href="/orders">Orders</a>
  <button data-veriloop-id="2" aria-haspopup="menu" aria-expanded="false">Account</button>
  <span data-veriloop-id="3" role="link">Help</span>
  <button data-veriloop-id="4">Save</button>
  <div data-veriloop-id="5" href="/x">Odd div link</div>
  <a data-veriloop-id="6" href="/m" aria-haspopup="true">Menu link</a>
  <button data-veriloop-id="7" aria-haspopup="false">Plain</button>
  <div id="panel" class="card  visible" data-testid="orders-panel"><p>Your <b>orders</b> are here</p></div>
</body>"""


# --- classification ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "kind"),
    [
        ('navigate("https://shop.example/")', "navigation"),
        ("goBack()", "navigation"),
        ("click(1)", "navigation"),
        ("click(2)", "dropdown"),
        ("click(3)", "navigation"),
        ("click(4)", "generic"),
        ("click(5)", "navigation"),
        ("click(6)", "dropdown"),
        ("click(7)", "generic"),
        ("click(99)", "generic"),
        ('setValue(4, "x")', "generic"),
        ('press("Enter")', "generic"),
    ],
)
def test_classify_action_type(action, kind):
    assert classify_action_type(action, DOM) == kind
    assert classify_action_type(parse_action(action), DOM) == kind


def test_classify_rejects_a_non_action():
    with pytest.raises(ActionParseError):
        classify_action_type("click the save button", DOM)


def test_classify_on_an_unreadable_page_is_generic():
    assert classify_action_type("click(1)", "") == "generic"


def test_fixed_templates():
    assert expected_outcome_template("navigation") is NAVIGATION_OUTCOME
    assert NAVIGATION_OUTCOME.dom_changes.url_should_change is True
    assert expected_outcome_template("dropdown") is DROPDOWN_OUTCOME
    assert DROPDOWN_OUTCOME.dom_changes.target_expanded is True
    assert "menuitem" in DROPDOWN_OUTCOME.dom_changes.roles_should_exist
    assert expected_outcome_template("generic") is None


# --- DOM checks -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "exists"),
    [
        (ElementSelector(id="panel"), True),
        (ElementSelector(id="pan"), False),
        (ElementSelector(class_name="visible"), True),
        (ElementSelector(class_name="vis"), False),
        (ElementSelector(test_id="orders-panel"), True),
        (ElementSelector(text="Your orders are here"), True),
        (ElementSelector(text="Your   orders"), True),
        (ElementSelector(text="Refunds"), False),
        (ElementSelector(), False),
    ],
)
def test_element_exists(selector, exists):
    root = parse_html(DOM)
    assert element_exists(root, selector) is exists
    assert element_not_exists(root, selector) is not exists


def test_element_has_text():
    root = parse_html(DOM)
    assert element_has_text(root, ElementSelector(id="panel"), "orders are")
    assert not element_has_text(root, ElementSelector(id="panel"), "refunds")
    assert not element_has_text(root, ElementSelector(id="missing"), "orders")


@pytest.mark.parametrize(
    ("before", "after", "changed"),
    [
        ("https://a.example/cart", "https://a.example/checkout", True),
        ("https://a.example/list?page=1", "https://a.example/list?page=2", True),
        ("https://a.example/cart", "https://b.example/cart", True),
        ("https://a.example/cart", "https://a.example/cart#top", False),
        ("https://a.example/cart", "https://a.example/cart/", False),
        ("https://A.example/cart", "https://a.example/cart", False),
    ],
)
def test_significant_url_change(before, after, changed):
    assert url_changed_significantly(before, after) is changed


def test_roles_exist():
    assert roles_exist(parse_html('<ul role="menu"><li role="menuitem">A</li></ul>'), ["menuitem"])
    assert not roles_exist(parse_html(DOM), ["menuitem", "listbox"])
    assert not roles_exist(None, ["menuitem"])


def test_dropdown_checks_on_an_opened_and_a_closed_menu():
    opened = (
        DOM.replace('aria-expanded="false"', 'aria-expanded="true"')
        + '<ul role="menu"><li role="menuitem">Sign out</li></ul>'
    )
    report = run_dom_checks(
        DROPDOWN_OUTCOME,
        opened,
        before_url="https://a/x",
        after_url="https://a/x",
        target_element_id=2,
    )
    assert report.checks == {"aria_expanded": True, "roles_exist": True}
    assert report.score == 1.0
    closed = run_dom_checks(
        DROPDOWN_OUTCOME,
        DOM,
        before_url="https://a/x",
        after_url="https://a/x",
        target_element_id=2,
    )
    assert closed.score == 0.0


def test_all_checks_run_without_fail_fast():
    expected = ExpectedOutcome(
        description="panel replaced",
        dom_changes=DomChanges(
            element_should_exist=ElementSelector(id="nope"),
            element_should_not_exist=ElementSelector(id="panel"),
            url_should_change=True,
        ),
    )
    report = run_dom_checks(expected, DOM, before_url="https://a/x", after_url="https://a/y")
    assert report.checks == {
        "element_exists": False,
        "element_not_exists": False,
        "url_changed": True,
    }
    assert report.score == pytest.approx(1 / 3)
    assert report.expected_element_found is False
    assert (
        run_dom_checks(ExpectedOutcome(description="x"), DOM, before_url="a", after_url="a").score
        is None
    )


# --- confidence and its caps --------------------------------------------------------------------

FOUND = ClientVerification(element_found=True)
MISSING = ClientVerification(element_found=False)


def test_weighted_mix():
    verdict = prediction_confidence(semantic_confidence=0.85, dom_score=0.5, action_type="generic")
    assert verdict.confidence == pytest.approx(0.4 * 0.5 + 0.6 * 0.85)
    assert verdict.success is True
    # 0.4 * 0.5 + 0.6 * 0.8 is 0.68 in exact arithmetic: a failure, whatever the float rounding.
    assert (
        prediction_confidence(semantic_confidence=0.8, dom_score=0.5, action_type="generic").success
        is False
    )
    exactly = prediction_confidence(semantic_confidence=0.8, dom_score=0.55, action_type="generic")
    assert (exactly.confidence, exactly.success) == (0.7, True)


def test_no_dom_checks_uses_the_semantic_confidence():
    assert (
        prediction_confidence(
            semantic_confidence=0.72, dom_score=None, action_type="generic"
        ).confidence
        == 0.72
    )


@pytest.mark.parametrize(("semantic", "expected"), [(0.85, 0.51), (0.851, 0.851)])
def test_semantic_above_085_overrides_failed_dom_checks(semantic, expected):
    verdict = prediction_confidence(
        semantic_confidence=semantic, dom_score=0.0, action_type="generic"
    )
    assert verdict.confidence == pytest.approx(expected)


def test_client_found_adds_040_and_clamps_at_1():
    assert prediction_confidence(
        semantic_confidence=0.5, dom_score=0.5, action_type="generic", client_verification=FOUND
    ).confidence == pytest.approx(0.9)
    assert (
        prediction_confidence(
            semantic_confidence=0.9, dom_score=1.0, action_type="generic", client_verification=FOUND
        ).confidence
        == 1.0
    )


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        # The client or the DOM missed the expected element: capped at 0.60.
        ({"semantic_confidence": 0.99, "dom_score": 1.0, "client_verification": MISSING}, (0.60, False, True)),
        ({"semantic_confidence": 0.99, "dom_score": 1.0, "expected_element_found": False}, (0.60, False, True)),
        # At and below the cap nothing moves; just above, the cap bites.
        ({"semantic_confidence": 0.60, "client_verification": MISSING}, (0.60, False, False)),
        ({"semantic_confidence": 0.59, "client_verification": MISSING}, (0.59, False, False)),
        ({"semantic_confidence": 0.61, "client_verification": MISSING}, (0.60, False, True)),
        # The semantic override of failed DOM checks still respects the cap.
        ({"semantic_confidence": 0.95, "dom_score": 0.0, "expected_element_found": False}, (0.60, False, True)),
        # A navigation that reached its URL is not capped and gets at least 0.75 ...
        (
            {"semantic_confidence": 0.3, "dom_score": 0.0, "action_type": "navigation",
             "url_changed_as_expected": True, "client_verification": MISSING},
            (0.75, True, False),
        ),
        # ... one that did not is capped ...
        ({"semantic_confidence": 0.95, "dom_score": 1.0, "action_type": "navigation",
          "client_verification": MISSING}, (0.60, False, True)),
        # ... and a URL change lifts the cap only for navigation.
        ({"semantic_confidence": 0.95, "dom_score": 1.0, "action_type": "dropdown",
          "url_changed_as_expected": True, "client_verification": MISSING}, (0.60, False, True)),
    ],
)  # fmt: skip
def test_not_found_cap(case, expected):
    verdict = prediction_confidence(**{"dom_score": None, "action_type": "generic", **case})
    assert (verdict.confidence, verdict.success, verdict.capped) == expected


@pytest.mark.parametrize(("confidence", "success"), [(0.70, True), (0.6999, False)])
def test_success_threshold_boundary(confidence, success):
    assert (
        prediction_confidence(
            semantic_confidence=confidence, dom_score=None, action_type="generic"
        ).success
        is success
    )


# --- the path correction takes ----------------------------------------------------------------


def test_each_action_gets_its_expected_outcome_from_the_compact_page():
    from veriloop.engines.dom_context import compact_page
    from veriloop.engines.prediction import predict_outcome

    page = compact_page(DOM).html  # what finalize reads: aria-haspopup survives compaction
    assert predict_outcome(parse_action("click(2)"), page, step_expectation="x") == (
        "dropdown",
        DROPDOWN_OUTCOME,
    )
    assert predict_outcome(parse_action('navigate("/a")'), page, step_expectation=None) == (
        "navigation",
        NAVIGATION_OUTCOME,
    )
    kind, expected = predict_outcome(
        parse_action("click(4)"), page, step_expectation="The order is saved"
    )
    assert (kind, expected.description) == ("generic", "The order is saved")
    assert predict_outcome(parse_action("click(4)"), page, step_expectation=None) == (
        "generic",
        None,
    )


def test_a_recorded_prediction_is_checked_against_the_page_and_the_client():
    from veriloop.engines.prediction import check_recorded_prediction
    from veriloop.schemas.observation import BeforeStateSummary
    from veriloop.schemas.records import ActionRecord

    record = ActionRecord(
        step_index=0,
        action="click(2)",
        action_type="dropdown",
        expected_outcome=DROPDOWN_OUTCOME.description,
        before_state=BeforeStateSummary(url="http://shop.test/", dom_hash="h"),
    )
    opened = DOM.replace('aria-expanded="false"', 'aria-expanded="true"').replace(
        "</body>", '<ul role="menu"><li role="menuitem">Log out</li></ul></body>'
    )

    def check(dom, client=None, semantic=0.5):
        return check_recorded_prediction(
            record,
            page_html=dom,
            url="http://shop.test/",
            semantic_confidence=semantic,
            client_verification=client,
        )

    closed = check(DOM)
    assert closed.dom.checks == {"aria_expanded": False, "roles_exist": False}
    assert closed.verdict.confidence == 0.3 and not closed.verdict.success  # 0.4*0 + 0.6*0.5
    shown = check(opened)
    assert shown.verdict.success and shown.verdict.confidence == 0.7  # 0.4*1 + 0.6*0.5
    # The client's own check, per the design's table: found adds 0.40, not found caps at 0.60.
    found = check(DOM, ClientVerification(element_found=True, selector="[role=menu]"))
    assert found.verdict.confidence == 0.7 and found.verdict.success
    missing = check(opened, ClientVerification(element_found=False, selector="[role=menu]"), 0.9)
    assert missing.verdict.confidence == 0.6 and missing.verdict.capped
    lines = missing.lines(["URL did not change"])
    assert lines[0] == f"Expected: {DROPDOWN_OUTCOME.description}; observed: URL did not change"
    assert "The client did not find the expected element [role=menu]" in lines
    assert lines[-1] == "Prediction confidence: 0.60 (capped: the expected element is missing)"
    # An action that expected nothing in particular has nothing to check.
    plain = record.model_copy(update={"action_type": "generic", "expected_outcome": None})
    assert (
        check_recorded_prediction(
            plain, page_html=DOM, url="u", semantic_confidence=0.5, client_verification=None
        )
        is None
    )


# --- reading the target from its start tag ------------------------------------------------------


def _parsed_type(action: str, dom: str) -> str:
    """What classification answers from a full parse of ``dom`` (the reference)."""
    from veriloop.engines import prediction

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prediction, "_start_tag", lambda dom, element_id: None)
        return classify_action_type(action, dom)


@pytest.mark.parametrize(
    "dom",
    [
        # A commented-out copy, a ">" inside an earlier value, other spellings of the number first,
        # a number in the page's text, entities and a duplicate attribute.
        '<body><!-- <a data-veriloop-id="1" href="/x"> --><button data-veriloop-id="1">Go</button></body>',
        '<body><b title="a>b" data-veriloop-id="1" role="link">x</b></body>',
        "<body><a data-veriloop-id='1' href='/a'>A</a><button data-veriloop-id=\"1\">B</button></body>",
        '<body><a data-veriloop-id=1 href=/a>A</a><button data-veriloop-id="1">B</button></body>',
        '<body><p>data-veriloop-id="1"</p><a data-veriloop-id="1" href="/a">A</a></body>',
        '<body><button data-veriloop-id="1" aria-haspopup="&#116;rue" aria-haspopup="false">M</button></body>',
        '<body><DIV DATA-VERILOOP-ID="1" HREF="/d">D</DIV></body>',
        '<body><button data-veriloop-id="10">Ten</button><a data-veriloop-id="1" href="/a">A</a></body>',
    ],
)
def test_the_start_tag_reading_agrees_with_a_parse(dom):
    for action in ("click(1)", "click(10)"):
        assert classify_action_type(action, dom) == _parsed_type(action, dom)


def test_the_start_tag_reading_agrees_with_a_parse_on_corpus_compact_pages():
    from veriloop.engines.dom_context import compact_page
    from veriloop.engines.prediction import _start_tag

    pages = sorted(DEFAULT_CORPUS.glob("*.html"))[::12]
    assert pages, f"the corpus is missing: no *.html pages in {DEFAULT_CORPUS}"
    compared = read = 0
    for path in pages:
        page = compact_page(_numbered(path.read_text(errors="replace")))
        for element_id in sorted(page.element_ids)[:40]:
            action = f"click({element_id})"
            assert classify_action_type(action, page.html) == _parsed_type(action, page.html)
            compared += 1
            read += _start_tag(page.html, element_id) is not None
    assert compared > 100
    assert read >= 0.95 * compared  # a compact page seldom needs the parse


def _numbered(html: str) -> str:
    """``html`` with its links, buttons, fields and ARIA widgets numbered, as the snapshot script does."""
    from lxml import etree

    root = parse_html(html)
    widgets = root.xpath("//a | //button | //input | //select | //*[@role] | //*[@aria-haspopup]")
    for number, element in enumerate(widgets, 1):
        element.set("data-veriloop-id", str(number))
    return etree.tostring(root, encoding="unicode", method="html")
