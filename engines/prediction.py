"""The prediction path, used by correction and display (not by observation verification): what
should an action do, do DOM checks confirm it, and how confident is the verdict (seed "Action Type
Classification", "DOM-Based Checks", "Confidence Calculation", "Outcome Prediction").

Each action is recorded with its expected outcome (``predict_outcome``): navigation and dropdown
actions get fixed templates (a model guessing selectors is often wrong); a generic action expects
what its plan step expects. When the action's verification fails, correction checks the prediction
against the page it now sees and the client's own check (``check_prediction``), and its prompt and
strategy choice read "expected: X; observed: Y".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urlsplit

from lxml import etree

from veriloop.engines.skeleton import parse_html
from veriloop.schemas.actions import Action, parse_action
from veriloop.schemas.observation import ClientVerification
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR
from veriloop.schemas.records import ActionRecord, ActionType

PREDICTION_SUCCESS_THRESHOLD = 0.70
CLIENT_FOUND_BONUS = 0.40
"""Added to the confidence when the client found the expected element."""
NOT_FOUND_CAP = 0.60
"""Ceiling when the expected element is missing (client or DOM), unless navigation reached its new URL."""
NAVIGATION_FLOOR = 0.75
"""Minimum confidence when a navigation's URL changed as expected."""
SEMANTIC_OVERRIDE = 0.85
"""A semantic confidence above this overrides failed DOM checks (the cap still applies)."""
DOM_WEIGHT = 0.4
"""Weight of the DOM-check score in the mix with the semantic confidence."""

_BY_ELEMENT_ID = etree.XPath(f"//*[@{ELEMENT_ID_ATTR} = $id]")
_BY_ID = etree.XPath("//*[@id = $value]")
_BY_TEST_ID = etree.XPath("//*[@data-testid = $value]")
_BY_CLASS = etree.XPath(
    "//*[contains(concat(' ', normalize-space(@class), ' '), concat(' ', $value, ' '))]"
)
_BY_TEXT = etree.XPath(
    "//body//*[contains(normalize-space(.), $value)][not(*[contains(normalize-space(.), $value)])]"
)
_BY_ROLE = etree.XPath("//*[@role = $value]")
_EXPANDED = ("true",)


def _target(root: etree._Element | None, element_id: int | None) -> etree._Element | None:
    if root is None or element_id is None:
        return None
    found = _BY_ELEMENT_ID(root, id=str(element_id))
    return found[0] if found else None


def classify_action_type(action: Action | str, dom: str) -> ActionType:
    """navigate()/goBack() -> navigation; click on aria-haspopup -> dropdown; click on a link -> navigation.

    Raises ActionParseError when ``action`` is not a protocol action.
    """
    parsed = parse_action(action) if isinstance(action, str) else action
    if parsed.kind in ("navigate", "go_back"):
        return "navigation"
    if parsed.kind != "click" or parsed.element_id is None:
        return "generic"
    found = _start_tag(dom, parsed.element_id)
    if found is None:
        el = _target(parse_html(dom), parsed.element_id)
        if el is None:
            return "generic"
        found = el.tag, dict(el.attrib)
    tag, attrs = found
    popup = attrs.get("aria-haspopup")
    if popup is not None and popup.strip().lower() != "false":
        return "dropdown"
    if tag == "a" or attrs.get("href") is not None or attrs.get("role") == "link":
        return "navigation"
    return "generic"


def _start_tag(dom: str, element_id: int) -> tuple[str, dict[str, str]] | None:
    """The tag and attributes of the first element numbered ``element_id``, read from its start
    tag alone; None when the page is not spelled plainly enough to be sure (then a parse decides).

    Finalize classifies every action on the compact page, which lxml wrote: a parse of it took
    a tenth of the serving process's CPU (py-spy under ``benchmarks.service_concurrency``). Sure
    means: the first ``data-veriloop-id="N"`` is an attribute of a start tag (after a space, not
    in a comment, no ``>`` between it and its ``<``), and every number before it is written in
    double quotes too, so no other spelling of N comes first.
    """
    mark = f'{ELEMENT_ID_ATTR}="{element_id}"'
    at = dom.find(mark)
    start = dom.rfind("<", 0, at)
    end = dom.find(">", at)
    if (
        at < 0
        or start < 0
        or end < 0
        or not dom[at - 1].isspace()
        or dom.find(">", start, at) >= 0
        or dom.rfind("<!--", 0, at) > dom.rfind("-->", 0, at)
        or dom.count(f"{ELEMENT_ID_ATTR}=", 0, at) != dom.count(f'{ELEMENT_ID_ATTR}="', 0, at)
    ):
        return None
    reader = _StartTagReader()
    reader.feed(dom[start : end + 1])
    reader.close()
    if reader.found is None or reader.found[1].get(ELEMENT_ID_ATTR) != str(element_id):
        return None
    return reader.found


class _StartTagReader(HTMLParser):
    """The name and attributes of the one start tag it is fed (entities decoded, names lowercased)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: tuple[str, dict[str, str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.found is None:
            self.found = tag, {name: value or "" for name, value in reversed(attrs)}


@dataclass(frozen=True)
class ElementSelector:
    """How a DOM check finds an element: the first of id, data-testid, class or text that is set."""

    id: str | None = None
    test_id: str | None = None
    class_name: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class DomChanges:
    """What the DOM should look like after the action."""

    element_should_exist: ElementSelector | None = None
    element_should_not_exist: ElementSelector | None = None
    url_should_change: bool | None = None
    target_expanded: bool = False
    """The clicked element's aria-expanded becomes "true"."""
    roles_should_exist: tuple[str, ...] = ()
    """At least one element with one of these roles appears."""


@dataclass(frozen=True)
class ExpectedOutcome:
    """A prediction of an action's effect."""

    description: str
    dom_changes: DomChanges = field(default_factory=DomChanges)


NAVIGATION_OUTCOME = ExpectedOutcome(
    description="The browser navigates to a different page (the URL path or query changes) and it loads.",
    dom_changes=DomChanges(url_should_change=True),
)
DROPDOWN_OUTCOME = ExpectedOutcome(
    description="A menu or list opens: the clicked element is expanded and menu items or options appear.",
    dom_changes=DomChanges(
        target_expanded=True, roles_should_exist=("menu", "menuitem", "listbox", "option")
    ),
)


def expected_outcome_template(action_type: ActionType) -> ExpectedOutcome | None:
    """The fixed expectation for navigation and dropdown actions; None for generic actions."""
    return {"navigation": NAVIGATION_OUTCOME, "dropdown": DROPDOWN_OUTCOME}.get(action_type)


# --- DOM checks (on a parsed page) ----------------------------------------------------------


def find_elements(root: etree._Element | None, selector: ElementSelector) -> list[etree._Element]:
    """Elements matching the selector's first set criterion (id, data-testid, class, text)."""
    if root is None:
        return []
    if selector.id is not None:
        return _BY_ID(root, value=selector.id)
    if selector.test_id is not None:
        return _BY_TEST_ID(root, value=selector.test_id)
    if selector.class_name is not None:
        return _BY_CLASS(root, value=selector.class_name)
    if selector.text is not None:
        return _BY_TEXT(root, value=" ".join(selector.text.split()))
    return []


def element_exists(root: etree._Element | None, selector: ElementSelector) -> bool:
    return bool(find_elements(root, selector))


def element_not_exists(root: etree._Element | None, selector: ElementSelector) -> bool:
    return not find_elements(root, selector)


def element_has_text(root: etree._Element | None, selector: ElementSelector, text: str) -> bool:
    """Some matching element's whitespace-collapsed text contains ``text``."""
    wanted = " ".join(text.split())
    return any(
        wanted in " ".join("".join(el.itertext()).split()) for el in find_elements(root, selector)
    )


def url_changed_significantly(before_url: str, after_url: str) -> bool:
    """True when host, path (trailing slash ignored) or query differ; a fragment alone is not a change."""
    before, after = urlsplit(before_url.strip()), urlsplit(after_url.strip())
    return (before.netloc.lower(), before.path.rstrip("/"), before.query) != (
        after.netloc.lower(),
        after.path.rstrip("/"),
        after.query,
    )


def is_expanded(element: etree._Element | None) -> bool:
    return element is not None and (element.get("aria-expanded") or "").strip().lower() in _EXPANDED


def roles_exist(root: etree._Element | None, roles: Sequence[str]) -> bool:
    return root is not None and any(_BY_ROLE(root, value=role) for role in roles)


@dataclass(frozen=True)
class DomCheckReport:
    """Each DOM check that applied, and their average."""

    checks: dict[str, bool]
    url_changed: bool

    @property
    def score(self) -> float | None:
        """Share of checks that passed; None when no check applied."""
        return sum(self.checks.values()) / len(self.checks) if self.checks else None

    @property
    def expected_element_found(self) -> bool | None:
        return self.checks.get("element_exists")


def run_dom_checks(
    expected: ExpectedOutcome,
    dom: str,
    *,
    before_url: str,
    after_url: str,
    target_element_id: int | None = None,
) -> DomCheckReport:
    """Run every check ``expected`` asks for against one parse of ``dom`` (no fail-fast)."""
    root = parse_html(dom)
    want = expected.dom_changes
    url_changed = url_changed_significantly(before_url, after_url)
    checks: dict[str, bool] = {}
    if want.element_should_exist is not None:
        checks["element_exists"] = element_exists(root, want.element_should_exist)
    if want.element_should_not_exist is not None:
        checks["element_not_exists"] = element_not_exists(root, want.element_should_not_exist)
    if want.url_should_change is not None:
        checks["url_changed"] = url_changed == want.url_should_change
    if want.target_expanded:
        checks["aria_expanded"] = is_expanded(_target(root, target_element_id))
    if want.roles_should_exist:
        checks["roles_exist"] = roles_exist(root, want.roles_should_exist)
    return DomCheckReport(checks=checks, url_changed=url_changed)


# --- confidence -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PredictionVerdict:
    confidence: float
    success: bool
    capped: bool
    """The not-found ceiling lowered the confidence."""


def prediction_confidence(
    *,
    semantic_confidence: float,
    dom_score: float | None,
    action_type: ActionType,
    url_changed_as_expected: bool = False,
    expected_element_found: bool | None = None,
    client_verification: ClientVerification | None = None,
    threshold: float = PREDICTION_SUCCESS_THRESHOLD,
) -> PredictionVerdict:
    """Combine DOM checks, the semantic confidence and the client's check (seed "Confidence Calculation").

    Weighted mix of DOM score and semantic confidence; a semantic confidence above 0.85 overrides
    failed DOM checks; a navigation whose URL changed as expected gets at least 0.75; the client
    finding the expected element adds 0.40; a missing expected element (client or DOM) caps the
    result at 0.60 unless a navigation's URL changed as expected. Success: confidence >= threshold.
    """
    if dom_score is None:
        confidence = semantic_confidence
    else:
        confidence = DOM_WEIGHT * dom_score + (1 - DOM_WEIGHT) * semantic_confidence
        if semantic_confidence > SEMANTIC_OVERRIDE:
            confidence = max(confidence, semantic_confidence)
    navigated = action_type == "navigation" and url_changed_as_expected
    if navigated:
        confidence = max(confidence, NAVIGATION_FLOOR)
    if client_verification is not None and client_verification.element_found:
        confidence += CLIENT_FOUND_BONUS
    missing = expected_element_found is False or (
        client_verification is not None and not client_verification.element_found
    )
    # Rounded so that 0.4 * 0.55 + 0.6 * 0.8 is 0.70, not 0.6999999999999998.
    confidence = round(min(max(confidence, 0.0), 1.0), 6)
    capped = missing and not navigated and confidence > NOT_FOUND_CAP
    if capped:
        confidence = NOT_FOUND_CAP
    return PredictionVerdict(confidence=confidence, success=confidence >= threshold, capped=capped)


# --- the path correction takes -------------------------------------------------------------


def predict_outcome(
    action: Action, dom: str, *, step_expectation: str | None
) -> tuple[ActionType, ExpectedOutcome | None]:
    """The action's type and expected outcome: the fixed template for navigation and dropdowns,
    else the plan step's expected outcome (None when the step names none, and for finish() and
    fail(), which end the task rather than change the page)."""
    action_type = classify_action_type(action, dom)
    if action.kind in ("finish", "fail"):
        return action_type, None
    expected = expected_outcome_template(action_type)
    if expected is None and step_expectation:
        expected = ExpectedOutcome(description=step_expectation)
    return action_type, expected


@dataclass(frozen=True)
class PredictionCheck:
    """An expected outcome held against the page after the action, and the confidence it gives."""

    expected: ExpectedOutcome
    dom: DomCheckReport
    verdict: PredictionVerdict
    client_verification: ClientVerification | None

    def lines(self, observed: Sequence[str]) -> list[str]:
        """What correction's prompt reads: "Expected: X; observed: Y", then the checks."""
        seen = "; ".join(observed) or "nothing"
        checks = ", ".join(
            f"{name} {'yes' if ok else 'no'}" for name, ok in self.dom.checks.items()
        )
        client = self.client_verification
        lines = [f"Expected: {self.expected.description}; observed: {seen}"]
        if checks:
            lines.append(f"DOM checks of the expected outcome: {checks}")
        if client is not None:
            found = "found" if client.element_found else "did not find"
            lines.append(
                f"The client {found} the expected element {client.selector or ''}".rstrip()
            )
        capped = " (capped: the expected element is missing)" if self.verdict.capped else ""
        lines.append(f"Prediction confidence: {self.verdict.confidence:.2f}{capped}")
        return lines


def check_prediction(
    action_type: ActionType,
    expected_description: str | None,
    *,
    dom: str,
    before_url: str,
    after_url: str,
    target_element_id: int | None,
    semantic_confidence: float,
    client_verification: ClientVerification | None,
) -> PredictionCheck | None:
    """Hold the recorded expectation against the page now; None when the action expected nothing."""
    expected = expected_outcome_template(action_type)
    if expected is None:
        if not expected_description:
            return None
        expected = ExpectedOutcome(description=expected_description)
    report = run_dom_checks(
        expected,
        dom,
        before_url=before_url,
        after_url=after_url,
        target_element_id=target_element_id,
    )
    verdict = prediction_confidence(
        semantic_confidence=semantic_confidence,
        dom_score=report.score,
        action_type=action_type,
        url_changed_as_expected=report.checks.get("url_changed", False),
        expected_element_found=report.expected_element_found,
        client_verification=client_verification,
    )
    return PredictionCheck(expected, report, verdict, client_verification)


def check_recorded_prediction(
    record: ActionRecord,
    *,
    page_html: str,
    url: str,
    semantic_confidence: float,
    client_verification: ClientVerification | None,
) -> PredictionCheck | None:
    """``check_prediction`` for the action a history record holds, on the page seen after it."""
    if record.action_type is None:
        return None
    return check_prediction(
        record.action_type,
        record.expected_outcome,
        dom=page_html,
        before_url=record.before_state.url if record.before_state else url,
        after_url=url,
        target_element_id=parse_action(record.action).element_id,
        semantic_confidence=semantic_confidence,
        client_verification=client_verification,
    )
