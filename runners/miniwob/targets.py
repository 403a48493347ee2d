"""Which element a MiniWoB++ utterance names, read from a snapshot of the page.

``solve(utterance, root)`` turns an utterance such as ``Click on the "Ok"
button.`` or ``Enter "Jas" into the text field and press Submit.`` into the
ordered steps a person would take (type into this field, then click that
button), each naming the snapshot element it acts on. Two users:

- the no-change benchmark: the first step is the *effective* action of a
  transition (it acts on the element the utterance names);
- the scripted offline model: the first step the page does not show as done
  yet is its next action.

Elements are matched on the snapshot the page contract defines: interactive
elements carry ``data-veriloop-id``, live values are mirrored into ``value`` /
``checked`` attributes, unrendered elements carry ``data-veriloop-hidden``.
Only a handful of utterance shapes are known; anything else returns None.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from lxml import html as lxml_html

from veriloop.schemas.page_contract import ELEMENT_ID_ATTR, HIDDEN_ATTR

Element = lxml_html.HtmlElement


@dataclass(frozen=True)
class Step:
    """Act on ``element``: type ``value`` into it, or click it when ``value`` is None."""

    element: Element
    value: str | None = None

    @property
    def element_id(self) -> int | None:
        raw = self.element.get(ELEMENT_ID_ATTR)
        return int(raw) if raw is not None and raw.isdigit() else None

    def is_done(self) -> bool:
        """The page already shows this step's effect (typed value present, box checked, section open)."""
        el = self.element
        if self.value is not None:
            if (el.get("type") or "").lower() == "password":  # the snapshot redacts passwords
                return bool(el.get("value"))
            return (el.get("value") or "") == self.value
        if el.tag == "input" and (el.get("type") or "").lower() in ("checkbox", "radio"):
            return el.get("checked") is not None
        return el.get("aria-expanded") == "true" or el.get("aria-selected") == "true"


def parse_page(html: str) -> Element:
    """The snapshot HTML as an lxml tree."""
    return lxml_html.document_fromstring(html or "<html></html>")


def _text(el: Element) -> str:
    return " ".join(el.text_content().split())


def _visible(el: Element) -> bool:
    return all(a.get(HIDDEN_ATTR) != "1" for a in el.iterancestors()) and el.get(HIDDEN_ATTR) != "1"


def _find(
    root: Element, xpath: str, text: str | None = None, *, fold: bool = False
) -> Element | None:
    """The first visible element matching ``xpath`` (and, if given, whose normalised text equals ``text``)."""
    for el in root.xpath(xpath):
        if not _visible(el):
            continue
        if text is None:
            return el
        got, want = _text(el), " ".join(text.split())
        if got == want or (fold and got.lower() == want.lower()):
            return el
    return None


_AREA = "//*[@id='area']"
_BUTTONS = f"{_AREA}//button | {_AREA}//input[@type='submit' or @type='button']"
_NUMBERED = f"{_AREA}//*[@{ELEMENT_ID_ATTR}]"
_TEXT_INPUTS = f"{_AREA}//input[not(@type) or @type='text' or @type='input' or @type='password' or @type='number']"


def _submit(root: Element) -> Element | None:
    found = root.xpath("//*[@id='subbtn']")
    if found:
        return found[0]
    button = _find(root, _BUTTONS)
    if button is not None:
        return button
    named = (_find(root, _NUMBERED, name) for name in ("Submit", "Search", "Login"))
    return next((el for el in named if el is not None), None)


def _steps(*pairs: tuple[Element | None, str | None]) -> list[Step] | None:
    """Steps from (element, value) pairs; None when any element is missing from the page."""
    if any(el is None for el, _ in pairs):
        return None
    return [Step(el, value) for el, value in pairs]


def _labelled_input(root: Element, label: str) -> Element | None:
    """The visible input whose nearby label (previous cell, row title or <label>) says ``label``."""
    for el in root.xpath(_TEXT_INPUTS):
        if not _visible(el):
            continue
        container = el.getparent()
        context = (
            container.getprevious()
            if container is not None and container.tag == "td"
            else container
        )
        if context is not None and label.lower() in _text(context).lower():
            return el
    return None


def _ordinal(word: str) -> int:
    return int(re.match(r"\d+", word).group())


Rule = Callable[[re.Match, Element], list[Step] | None]


def _click_button(m: re.Match, root: Element) -> list[Step] | None:
    return _steps((_find(root, _BUTTONS, m["text"]), None))


def _click_link(m: re.Match, root: Element) -> list[Step] | None:
    # The page's links are spans the snapshot numbers for their pointer cursor (the prompt excerpt drops classes).
    return _steps((_find(root, _NUMBERED, m["text"]), None))


def _enter_then_submit(transform: Callable[[str], str]) -> Rule:
    def rule(m: re.Match, root: Element) -> list[Step] | None:
        return _steps((_find(root, _TEXT_INPUTS), transform(m["text"])), (_submit(root), None))

    return rule


def _password(m: re.Match, root: Element) -> list[Step] | None:
    field = f"{_AREA}//input[@id='%s']"
    return _steps(
        (_find(root, field % "password"), m["text"]),
        (_find(root, field % "verify"), m["text"]),
        (_submit(root), None),
    )


def _login(m: re.Match, root: Element) -> list[Step] | None:
    field = f"{_AREA}//input[@id='%s']"
    return _steps(
        (_find(root, field % "username"), m["user"]),
        (_find(root, field % "password"), m["password"]),
        (_submit(root), None),
    )


def _only_button(m: re.Match, root: Element) -> list[Step] | None:
    return _steps((_find(root, _BUTTONS), None))


def _button_sequence(m: re.Match, root: Element) -> list[Step] | None:
    return _steps(
        *[(_find(root, _BUTTONS, name), None) for name in m["names"].split(", then click button ")]
    )


def _widget(m: re.Match, root: Element) -> list[Step] | None:
    return _steps((_find(root, f"{_AREA}//*[@data-type='{m['kind']}']"), None))


def _tab(m: re.Match, root: Element) -> list[Step] | None:
    return _steps((_find(root, f"{_AREA}//ul//a", f"Tab #{m['n']}"), None))


def _collapsible(m: re.Match, root: Element) -> list[Step] | None:
    return _steps((_find(root, f"{_AREA}//h3"), None), (_submit(root), None))


def _select_labels(m: re.Match, root: Element) -> list[Step] | None:
    names = [] if m["names"] == "nothing" else re.split(r", | and ", m["names"])
    boxes = [
        (_find(root, f"{_AREA}//label[normalize-space()='{n}']//input"), None)
        for n in names
        if "'" not in n
    ]
    return _steps(*boxes, (_submit(root), None))


def _color(m: re.Match, root: Element) -> list[Step] | None:
    return _steps((_find(root, f"{_AREA}//*[@data-color='{m['color']}']"), None))


def _dialog_button(m: re.Match, root: Element) -> list[Step] | None:
    # The dialog's "x" is its title-bar close button (title "Close"); other labels are button texts.
    dialog = "//*[@role='dialog']//button"
    target = (
        _find(root, f"{dialog}[@title='Close']")
        if m["text"] == "x"
        else _find(root, dialog, m["text"])
    )
    return _steps((target, None))


def _date(m: re.Match, root: Element) -> list[Step] | None:
    month, day, year = m["date"].split("/")
    return _steps(
        (_find(root, f"{_AREA}//input[@type='date']"), f"{year}-{month}-{day}"),
        (_submit(root), None),
    )


def _time(m: re.Match, root: Element) -> list[Step] | None:
    hour, minute = (int(x) for x in m["hm"].split(":"))
    hour = hour % 12 + (12 if m["ampm"] == "PM" else 0)
    return _steps(
        (_find(root, f"{_AREA}//input[@type='time']"), f"{hour:02d}:{minute:02d}"),
        (_submit(root), None),
    )


def _search(m: re.Match, root: Element) -> list[Step] | None:
    return _steps(
        (_find(root, f"{_AREA}//input[@id='search-text']"), m["text"]),
        (_find(root, _BUTTONS, "Search"), None),
    )


def _autocomplete(m: re.Match, root: Element) -> list[Step] | None:
    return _steps((_find(root, f"{_AREA}//input[@id='tags']"), m["start"]))


def _movies(m: re.Match, root: Element) -> list[Step] | None:
    fields = [
        (_labelled_input(root, "Year"), m["year"]),
        (_labelled_input(root, "Director"), m["director"]),
        (_labelled_input(root, "Genre"), m["genre"]),
    ]
    return _steps(*fields, (_submit(root), None))


def _form_sequence(m: re.Match, root: Element) -> list[Step] | None:
    radio = root.xpath(f"{_AREA}//input[@type='radio']")
    inputs = [el for el in root.xpath(_TEXT_INPUTS) if _visible(el)]
    r, i = _ordinal(m["radio"]) - 1, _ordinal(m["box"]) - 1
    if r >= len(radio) or i >= len(inputs):
        return None
    return _steps((radio[r], None), (inputs[i], m["number"]), (_submit(root), None))


def _read_table(m: re.Match, root: Element) -> list[Step] | None:
    cells = (
        root.xpath(f"{_AREA}//td[normalize-space()='{m['key']}']/following-sibling::td[1]")
        if "'" not in m["key"]
        else []
    )
    if not cells:
        return None
    return _steps((_find(root, _TEXT_INPUTS), _text(cells[0])), (_submit(root), None))


def _find_word(m: re.Match, root: Element) -> list[Step] | None:
    words = _text(root.xpath(f"{_AREA}//p")[0]).split() if root.xpath(f"{_AREA}//p") else []
    n = _ordinal(m["nth"])
    if n > len(words):
        return None
    return _steps((_find(root, _TEXT_INPUTS), words[n - 1].strip(".,")), (_submit(root), None))


def _arithmetic(m: re.Match, root: Element) -> list[Step] | None:
    problem = root.xpath("//*[@id='math-problem']")
    parts = re.match(r"\s*(-?\d+)\s*([+x\-])\s*(-?\d+)", _text(problem[0])) if problem else None
    if parts is None:
        return None
    a, op, b = int(parts[1]), parts[2], int(parts[3])
    answer = a + b if op == "+" else a - b if op == "-" else a * b
    return _steps((_find(root, _TEXT_INPUTS), str(answer)), (_submit(root), None))


def _guess(m: re.Match, root: Element) -> list[Step] | None:
    return _steps((_find(root, _TEXT_INPUTS), "5"), (_submit(root), None))


RULES: list[tuple[re.Pattern[str], Rule]] = [
    (re.compile(r'^Click on the "(?P<text>.+)" button\.$'), _click_button),
    (re.compile(r'^Click on the link "(?P<text>.+)"\.$'), _click_link),
    (
        re.compile(r'^Enter "(?P<text>.+)" into the text field and press Submit\.$'),
        _enter_then_submit(str),
    ),
    (re.compile(r'^Type "(?P<text>.+)" in all upper case letters'), _enter_then_submit(str.upper)),
    (re.compile(r'^Type "(?P<text>.+)" in all lower case letters'), _enter_then_submit(str.lower)),
    (re.compile(r'^Enter the password "(?P<text>.+)" into both text fields'), _password),
    (
        re.compile(r'^Enter the username "(?P<user>.+)" and the password "(?P<password>.+)" into'),
        _login,
    ),
    (re.compile(r"^Click the button\.$"), _only_button),
    (
        re.compile(
            r"^Click button (?P<names>ONE|TWO|ONE, then click button TWO|TWO, then click button ONE)\.$"
        ),
        _button_sequence,
    ),
    (re.compile(r'^Click on a "(?P<kind>[\w-]+)" widget\.$'), _widget),
    (re.compile(r"^Click on Tab #(?P<n>\d+)\.$"), _tab),
    (re.compile(r"^Expand the section below and click submit\.$"), _collapsible),
    (re.compile(r"^Select (?P<names>.+) and click Submit\.$"), _select_labels),
    (re.compile(r"^Click on the (?P<color>\w+) colored box\.$"), _color),
    (
        re.compile(
            r'^(Close the dialog box by clicking the|Click the button in the dialog box labeled) "(?P<text>.+)"\.$'
        ),
        _dialog_button,
    ),
    (re.compile(r"^Enter (?P<date>\d\d/\d\d/\d{4}) as the date"), _date),
    (re.compile(r"^Enter (?P<hm>\d{1,2}:\d\d) (?P<ampm>AM|PM) as the time"), _time),
    (re.compile(r'^Use the textbox to enter "(?P<text>.+)" and press "Search"'), _search),
    (re.compile(r'^Enter an item that starts with "(?P<start>[^"]+)"'), _autocomplete),
    (
        re.compile(
            r"^Search for (?P<genre>\w+) movies directed by (?P<director>\w+) from year (?P<year>\d+)\.$"
        ),
        _movies,
    ),
    (
        re.compile(
            r'^Check the (?P<radio>\d+\w\w) radio button and enter the number "(?P<number>-?\d+)" into the (?P<box>\d+\w\w) textbox'
        ),
        _form_sequence,
    ),
    (
        re.compile(r"^Enter the value of (?P<key>.+) into the text field and press Submit\.$"),
        _read_table,
    ),
    (re.compile(r"^Find the (?P<nth>\d+\w\w) word in the paragraph"), _find_word),
    (re.compile(r"^Solve the math problem and type your answer into the textbox"), _arithmetic),
    (re.compile(r"^Guess the number between 0-9 and press Submit"), _guess),
]


def solve(utterance: str, root: Element) -> list[Step] | None:
    """The steps that accomplish ``utterance`` on this page, or None for an unknown utterance or missing element."""
    text = " ".join(utterance.split())
    for pattern, rule in RULES:
        m = pattern.search(text)
        if m:
            return rule(m, root)
    return None


def next_step(utterance: str, root: Element) -> Step | None:
    """The first step the page does not show as done yet (the last step is never 'done': it ends the task)."""
    steps = solve(utterance, root)
    if not steps:
        return None
    for step in steps[:-1]:
        if not step.is_done():
            return step
    return steps[-1]
