"""Before/after page pairs for the verification benchmarks, built from the real-page corpus.

Each corpus page is decoded (its declared charset), parsed once and serialised,
as a snapshot script's outerHTML would be: that is the page an action was
chosen on. The page after the action is the same serialisation with three
realistic mutations: a button's text ("Saved"), a new alert, and a value typed
into a text input. Serialising both from one parse keeps the difference to
exactly those mutations.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import lxml.html

from veriloop.engines.skeleton import to_utf8

DEFAULT_CORPUS = Path(
    os.environ.get("VERILOOP_CORPUS_HTML")
    or Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "html"
)
"""``$VERILOOP_CORPUS_HTML``, else ``../shared/corpus/html`` relative to the repository."""
RESULTS_DIR = Path(__file__).resolve().parent / "results"
"""Where the benchmarks write their per-page figures by default (git-ignored)."""

PAGE_URL = "https://corpus.example/page"
ALERT_TEXT = "Your changes have been saved."
TYPED_VALUE = "Jas Smith"
TEXT_INPUT_TYPES = {None, "", "text", "search", "email", "tel", "url", "password"}
_UTF8 = lxml.html.HTMLParser(encoding="utf-8")


@dataclass
class PagePair:
    name: str
    before: str
    after: str
    mutations: list[str] = field(default_factory=list)
    """Which of button_text, alert, input_value were applied (a page may lack a button or an input)."""


def _shown(el: lxml.html.HtmlElement) -> bool:
    for node in (el, *el.iterancestors()):
        if node.tag in ("noscript", "template", "head") or node.get("hidden") is not None:
            return False
        if node.get("aria-hidden") == "true":
            return False
    return True


def _first(
    root: lxml.html.HtmlElement, tags: tuple[str, ...], accept
) -> lxml.html.HtmlElement | None:
    return next((el for el in root.iter(*tags) if accept(el) and _shown(el)), None)


def _mutate(root: lxml.html.HtmlElement) -> list[str]:
    applied = []
    button = _first(root, ("button",), lambda el: el.text_content().strip())
    if button is not None:
        button[:] = []
        button.text = "Saved"
        applied.append("button_text")
    else:
        submit = _first(
            root, ("input",), lambda el: (el.get("type") or "").lower() in ("submit", "button")
        )
        if submit is not None:
            submit.set("value", "Saved")
            applied.append("button_text")
    body = root.find("body")
    if body is not None:
        alert = lxml.html.fragment_fromstring(f'<div role="alert">{ALERT_TEXT}</div>')
        alert.tail = body.text
        body.text = None
        body.insert(0, alert)
        applied.append("alert")
    field_ = _first(root, ("input",), lambda el: (el.get("type") or "").lower() in TEXT_INPUT_TYPES)
    if field_ is not None:
        field_.set("value", TYPED_VALUE)
        applied.append("input_value")
    return applied


def load_pairs(corpus: Path) -> list[PagePair]:
    """One pair per ``*.html`` page of ``corpus``, in name order."""
    files = sorted(corpus.glob("*.html"))
    if not files:
        raise SystemExit(f"no *.html pages in {corpus}")
    pairs = []
    for path in files:
        # Parsed from UTF-8 bytes: lxml refuses text that carries an XML encoding declaration.
        root = lxml.html.document_fromstring(to_utf8(path.read_bytes()), parser=_UTF8)
        before = lxml.html.tostring(root, encoding="unicode")
        mutations = _mutate(root)
        after = lxml.html.tostring(root, encoding="unicode")
        pairs.append(PagePair(path.name, before, after, mutations))
    return pairs
