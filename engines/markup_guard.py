"""The bounded parse: markup that would make libxml2 work without bound is cut down before it parses.

libxml2 checks each new attribute of an element against the ones before it,
so an element with n attributes costs O(n^2) (measured: 10k attributes 0.24 s,
20k 1.6 s, 40k 25 s; a 3.5 MB page of them ran for minutes). No page needs
hundreds of attributes on one element, so :func:`bound_markup` keeps the first
:data:`MAX_ATTRIBUTES` of any start tag that has more (plus the snapshot
script's attributes, wherever they are: the element id, hidden flag and live state) and drops the rest,
before lxml sees the page. Everything else passes through unchanged, and a
page without such a tag is returned as it is after one compiled scan.

Other pathological shapes are already bounded by libxml2 itself: nesting
deeper than 2048 elements is cut off by the parser (the deeper content is
lost, in linear time), and large text is linear. The service's size limit
(``VERILOOP_MAX_DOM_BYTES``) bounds everything else.
"""

from __future__ import annotations

import re

from veriloop.engines import skeleton_walk
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR, HIDDEN_ATTR, LIVE_STATE_ATTRS

MAX_ATTRIBUTES = 256
"""Attributes kept per start tag (real pages use a few dozen at most)."""

# One attribute as libxml2 reads it: separators (whitespace or '/'), then a name, optionally
# ``= value`` (quoted, or bare up to whitespace or '>'), or a stray quote, '=' or '<' (libxml2
# skips them and goes on reading attributes; only a value after '=' can be quoted). Every
# character but '>' and a '<' that opens a tag name belongs to some attribute: a scan ends where
# libxml2 ends the tag, or where the next search can start. A tag starts at ``<[/!?]?[A-Za-z]``,
# its name runs to whitespace, '<', '>' or '/'. The compiled walk reads this grammar
# (:func:`~veriloop.engines.skeleton_walk.crowded_tag`): every page passes through that scan, and
# as a regular expression it cost a third of a parse.

# The snapshot script's attributes, searched for past the cut (it appends them, so they come last).
_CONTRACT = tuple(a.encode() for a in (ELEMENT_ID_ATTR, HIDDEN_ATTR, *LIVE_STATE_ATTRS))
# Text that is not markup: a "tag" found inside it is script text such as ``a<b ...``, never cut
# (cutting could drop the ``</script>`` or ``-->`` that ends it).
_RAW_TEXT = ((b"<!--", b"-->"), (b"<script", b"</script"), (b"<style", b"</style"))
_VALUE = re.compile(rb"""\s*+=\s*+(?:"[^"]*+"|'[^']*+'|[^\s>]*+)""")
"""An attribute's ``= value``, as the grammar above reads it."""


def bound_markup(data: bytes) -> bytes:
    """``data`` with every start tag cut to :data:`MAX_ATTRIBUTES` attributes (unchanged when none has more)."""
    at = skeleton_walk.crowded_tag(data, 0, MAX_ATTRIBUTES)
    if at < 0:
        return data
    parts: list[bytes] = []
    done = 0
    lowered = data.lower()
    while at >= 0:
        raw_end = _raw_text_end(lowered, at)
        if raw_end is not None:
            at = skeleton_walk.crowded_tag(data, raw_end, MAX_ATTRIBUTES)
            continue
        cut, end = skeleton_walk.attribute_ends(data, at, MAX_ATTRIBUTES)
        parts += [data[done:cut], *_contract_attributes(data, cut, end)]
        done = end
        at = skeleton_walk.crowded_tag(data, end, MAX_ATTRIBUTES)
    parts.append(data[done:])
    return b"".join(parts)


def _raw_text_end(lowered: bytes, at: int) -> int | None:
    """Where the comment, script or style that ``at`` lies in ends (None: ``at`` is in markup)."""
    for opening, closing in _RAW_TEXT:
        start = lowered.rfind(opening, 0, at)
        if start >= 0 and lowered.find(closing, start, at) < 0:
            end = lowered.find(closing, at)
            return len(lowered) if end < 0 else end
    return None


def _contract_attributes(data: bytes, start: int, end: int) -> list[bytes]:
    """The first of each page-contract attribute in ``data[start:end]`` (repeats must not add up)."""
    lowered = data[start:end].lower()
    kept = []
    for name in _CONTRACT:
        at = lowered.find(name)
        while at > 0 and (
            lowered[at - 1 : at] not in b" \t\n\r\f/" or _continues(lowered, at + len(name))
        ):
            at = lowered.find(name, at + 1)
        if at > 0:
            value = _VALUE.match(data, start + at + len(name))
            kept.append(b" " + data[start + at : value.end() if value else start + at + len(name)])
    return kept


def _continues(lowered: bytes, after: int) -> bool:
    """True when the name found ends inside a longer name (``value`` in ``valuex``)."""
    return lowered[after : after + 1] not in (
        b"",
        b"=",
        b" ",
        b"\t",
        b"\n",
        b"\r",
        b"\f",
        b"/",
        b">",
    )
