"""A bounded window of the page for prompts, centred on the elements that matter (never the whole page)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass, field

from cachetools import LRUCache, cached
from lxml import etree

from veriloop.engines import compact_walk
from veriloop.engines.skeleton import parse_html
from veriloop.engines.targets import TARGET_CHARS, shorten
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR, HIDDEN_ATTR

# Tags whose content never helps choose an action, and the attributes worth showing the model.
_NOISE_TAGS = ("script", "style", "noscript", "template", "svg", "canvas", "head", "link", "meta")
_KEPT_ATTRS = frozenset(
    {
        ELEMENT_ID_ATTR,
        "id",
        "name",
        "type",
        "value",
        "placeholder",
        "aria-label",
        "role",
        "href",
        "title",
        "alt",
        "for",
        "checked",
        "selected",
        "disabled",
        "aria-expanded",
        "aria-haspopup",
        "aria-checked",
    }
)
_KEPT_NAMES = tuple(name.encode() for name in sorted(_KEPT_ATTRS))
"""The same names as the compiled pass compares them. A kept value is squashed when it has a
newline or tab (page text could start a fake prompt line with it), a run of spaces, or a
character lxml cannot write."""
_ID_NAME, _HIDDEN_NAME = ELEMENT_ID_ATTR.encode(), HIDDEN_ATTR.encode()
_MAX_ANCHORS = 4
_ID_MARK = f'{ELEMENT_ID_ATTR}="'
_WORD = re.compile(r"[a-z0-9]{3,}")
_STOPWORDS = frozenset(
    "the and then with for from into onto that this click enter type select open page field button "
    "form new named name goal step".split()
)


def hint_words(*texts: str | None) -> list[str]:
    """Distinctive lower-case words of the goal / step text, used to find relevant elements."""
    seen: dict[str, None] = {}
    for text in texts:
        for word in _WORD.findall((text or "").lower()):
            if word not in _STOPWORDS:
                seen.setdefault(word, None)
    return list(seen)


@dataclass(frozen=True)
class CompactPage:
    """One parse of a page, for the prompts, the action check and the target's name: what they
    need, parsed once."""

    html: str
    """The page without scripts, styles, hidden elements and unhelpful attributes."""
    element_ids: frozenset[int]
    """The numbers of the page's interactive elements (the ids actions may name)."""
    source_chars: int = 0
    """Length of the page it was made from (what keeping it in the cache costs with it)."""
    names: Mapping[int, str] = field(default_factory=dict, hash=False)
    """What a person calls each numbered element that has a name (at most one character more
    than :data:`~veriloop.engines.targets.TARGET_CHARS`, so :meth:`target` can tell a cut):
    its aria-label, its ``<label for>``'s text, its own text (not a field's), placeholder,
    title, alt, value or name, whitespace collapsed."""

    def target(self, element_id: int | None) -> str | None:
        """The name of the element numbered ``element_id`` as reports show it (``click(9)
        "Save"``), cut at a word; None when it has none or is not on the page."""
        words = None if element_id is None else self.names.get(element_id)
        return shorten(words, TARGET_CHARS) if words else None

    def excerpt(
        self, *, focus_ids: Iterable[int | None] = (), hints: Iterable[str] = (), max_chars: int
    ) -> str:
        """At most ``max_chars`` characters: the whole compact page, or windows around what matters."""
        if len(self.html) <= max_chars:
            return self.html
        anchors = _anchor_offsets(self.html, [i for i in focus_ids if i is not None], list(hints))
        return _windows(self.html, anchors or [0], max_chars)


def build_dom_context(
    html: str | bytes,
    *,
    focus_ids: Iterable[int | None] = (),
    hints: Iterable[str] = (),
    max_chars: int = 8000,
) -> str:
    """A compact HTML excerpt of at most ``max_chars`` characters.

    Scripts, styles, hidden elements and unhelpful attributes are dropped.
    When the rest still exceeds the budget, the excerpt is made of windows
    centred on the focused elements (``focus_ids``) and on the numbered
    elements whose text or attributes contain the most ``hints``; windows are
    cut at tag boundaries and joined with ``...``.
    """
    return compact_page(html).excerpt(focus_ids=focus_ids, hints=hints, max_chars=max_chars)


def page_element_ids(html: str | bytes) -> frozenset[int]:
    """The numbers of the page's interactive elements (the ids actions may name)."""
    return compact_page(html).element_ids


_DROPPED = b"veriloop-dropped"
"""What hidden elements were renamed to, to be stripped with the noise, when the compact form was
made in place: an element of that name is left out too, and a hidden root (never stripped) is
written with it."""
_LEFT_OUT = (_DROPPED, *(tag.encode() for tag in _NOISE_TAGS))


PAGE_CACHE_BYTES = 64 << 20
"""Budget of the compact pages kept (each costs its page and its compact form): enough for the
pages of a few hundred tasks in flight at the median corpus size, a dozen at the size limit."""


def _cached_bytes(entry: CompactPage) -> int:
    return (
        entry.source_chars + len(entry.html) + 64 * len(entry.element_ids) + 128 * len(entry.names)
    )


def read_compact_page(html: str | bytes) -> CompactPage:
    """Parse ``html`` into its compact form and element ids (uncached: :func:`compact_page` keeps
    what it reads; this one runs where nothing is kept, such as a page process)."""
    # The engine's one parser: any charset, XML declarations, NUL bytes; comments and PIs already gone.
    return compact_tree(parse_html(html), len(html))


# A task's first step reads its page in planning, refinement and action generation, three nodes
# apart; a later step in the lookahead and again after a failed verdict. Other tasks' nodes run in
# between, so the cache is bounded by size, not by a count that concurrency would outrun (an
# 8-entry cache missed beyond 8 tasks). The key is the page string the state already holds.
@cached(
    LRUCache(PAGE_CACHE_BYTES, getsizeof=_cached_bytes),
    key=lambda html: html,
    lock=threading.Lock(),
)
def compact_page(html: str | bytes) -> CompactPage:
    """Parse ``html`` once into its compact form and element ids."""
    return read_compact_page(html)


def cached_compact_page(html: str | bytes) -> CompactPage | None:
    """The compact form of ``html`` if :func:`compact_page` holds it, without parsing."""
    with compact_page.cache_lock:
        return compact_page.cache.get(html)


def remember_compact_page(html: str | bytes, page: CompactPage) -> None:
    """Keep ``page``, the compact form of ``html`` made elsewhere (from a tree already parsed, or
    in a page process), so :func:`compact_page` will not parse ``html`` again."""
    with compact_page.cache_lock:
        with suppress(ValueError):  # larger than the whole budget: not kept, as compact_page does
            compact_page.cache.setdefault(html, page)


def compact_tree(root: etree._Element | None, source_chars: int) -> CompactPage:
    """The compact form of a page parsed into ``root`` (as :func:`~veriloop.engines.skeleton.parse_html`
    does) from ``source_chars`` characters; ``root`` is only read."""
    if root is None:
        return CompactPage("", frozenset(), source_chars)
    # Scripts, styles and the rest of the noise, hidden elements (their tails stay), unhelpful
    # attributes and blank text left out, and the body written as libxml2 writes HTML: one
    # compiled pass (stripping the tree and serialising it cost half a parse).
    html, ids, names = compact_walk.compact_html(
        root, _KEPT_NAMES, _LEFT_OUT, _ID_NAME, _HIDDEN_NAME, _DROPPED, TARGET_CHARS + 1
    )
    return CompactPage(html, frozenset(ids), source_chars, names)


def _anchor_offsets(text: str, focus_ids: list[int], hints: list[str]) -> list[int]:
    """Offsets of the focused elements first, then of the numbered elements matching the most hints."""
    offsets = [text.find(f'{ELEMENT_ID_ATTR}="{i}"') for i in focus_ids]
    if hints:
        scored: list[tuple[int, int]] = []
        for start, chunk in _numbered_tags(text):
            chunk = chunk.lower()
            score = sum(1 for word in hints if word in chunk)
            if score:
                scored.append((-score, start))
        offsets += [offset for _, offset in sorted(scored)]
    unique = list(dict.fromkeys(o for o in offsets if o >= 0))
    return unique[:_MAX_ANCHORS]


def _numbered_tags(text: str) -> Iterator[tuple[int, str]]:
    """(offset, start tag and the text after it) of each numbered element in a compact page.

    What the pattern ``<[^<>]*data-veriloop-id="\\d+"[^<>]*>[^<]*`` finds, found from the
    attribute outwards: tried at every ``<`` of the page that pattern cost half a millisecond on
    a mid-size page, and each prompt's excerpt ran it.
    """
    at = text.find(_ID_MARK)
    while at >= 0:
        start, digits = text.rfind("<", 0, at), at + len(_ID_MARK)
        quote = digits
        while quote < len(text) and text[quote].isdigit():
            quote += 1
        close = text.find(">", quote)
        if (
            start >= 0
            and quote > digits
            and text.startswith('"', quote)
            and text.find(">", start, at) < 0
            and close >= 0
            and text.find("<", quote, close) < 0
        ):
            end = text.find("<", close)
            end = len(text) if end < 0 else end
            yield start, text[start:end]
            at = text.find(_ID_MARK, end)
        else:
            at = text.find(_ID_MARK, at + 1)


def _windows(text: str, anchors: list[int], max_chars: int) -> str:
    separator = "\n...\n"
    width = max(1, (max_chars - len(separator) * (len(anchors) - 1)) // len(anchors))
    spans: list[list[int]] = []
    for anchor in sorted(anchors):
        start = max(0, min(anchor - width // 2, len(text) - width))
        end = min(len(text), start + width)
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    parts = [_snap(text, start, end) for start, end in spans]
    joined = separator.join(p for p in parts if p)
    return joined[:max_chars]


def _snap(text: str, start: int, end: int) -> str:
    """Cut at tag boundaries so no tag is shown half-written."""
    if start > 0:
        next_tag = text.find("<", start, end)
        start = next_tag if next_tag >= 0 else start
    if end < len(text):
        last_close = text.rfind(">", start, end)
        end = last_close + 1 if last_close >= 0 else end
    return text[start:end]
