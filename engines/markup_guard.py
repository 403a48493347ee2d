"""The bounded parse: markup that would make libxml2 work without bound is cut down before it parses.

libxml2 checks each new attribute of an element against the ones before it,
so an element with n attributes costs O(n^2) (measured: 10k attributes 0.24 s,
20k 1.6 s, 40k 25 s; a 3.5 MB page of them ran for minutes). No page needs
hundreds of attributes on one element, so :func:`bound_markup` keeps the first
:data:`MAX_ATTRIBUTES` of any start tag that has more (plus the snapshot
script's attributes, wherever they are: the element id, hidden flag and live state) and drops the rest,
before lxml sees the page. Everything else passes through unchanged, and a
page without such a tag is returned as it is after one regex scan.

Other pathological shapes are already bounded by libxml2 itself: nesting
deeper than 2048 elements is cut off by the parser (the deeper content is
lost, in linear time), and large text is linear. The service's size limit
(``VERILOOP_MAX_DOM_BYTES``) bounds everything else.
"""

from __future__ import annotations

import re

from veriloop.schemas.page_contract import ELEMENT_ID_ATTR, HIDDEN_ATTR, LIVE_STATE_ATTRS

MAX_ATTRIBUTES = 256
"""Attributes kept per start tag (real pages use a few dozen at most)."""

# One attribute as an HTML tokenizer reads it: separators (whitespace or '/', none needed after a
# quoted value), a name, optionally ``= value`` (quoted or bare). Possessive quantifiers: a failing
# search never retries by splitting a name, so the scan stays linear.
_ATTRIBUTE = rb"""(?:[\s/]*+[^\s"'<>/=]++(?:\s*+=\s*+(?:"[^"]*+"|'[^']*+'|[^\s"'<>]*+))?)"""
_TAG_NAME = re.compile(rb"<[A-Za-z][^\s<>/]*+")
# A start tag with more than MAX_ATTRIBUTES attributes.
_CROWDED = re.compile(_TAG_NAME.pattern + rb"(?:" + _ATTRIBUTE + rb"){%d}" % (MAX_ATTRIBUTES + 1))
_ATTRIBUTES = re.compile(_ATTRIBUTE)
_KEPT_ANYWHERE = re.compile(
    rb"[\s/]*(%s)(?![^\s/=])"
    % b"|".join(re.escape(a.encode()) for a in (ELEMENT_ID_ATTR, HIDDEN_ATTR, *LIVE_STATE_ATTRS)),
    re.IGNORECASE,
)


def bound_markup(data: bytes) -> bytes:
    """``data`` with every start tag cut to :data:`MAX_ATTRIBUTES` attributes (unchanged when none has more)."""
    match = _CROWDED.search(data)
    if match is None:
        return data
    parts: list[bytes] = []
    done = 0
    while match is not None:
        start = match.start()
        name = _TAG_NAME.match(data, start).end()
        kept, end = _kept_attributes(data, name)
        parts += [data[done:name], *kept]
        done = end
        match = _CROWDED.search(data, end)
    parts.append(data[done:])
    return b"".join(parts)


def _kept_attributes(data: bytes, pos: int) -> tuple[list[bytes], int]:
    """The attributes to keep of the start tag whose attributes begin at ``pos``, and where they end."""
    kept: list[bytes] = []
    contract: set[bytes] = set()  # each page-contract attribute once: repeats must not add up again
    while (attribute := _ATTRIBUTES.match(data, pos)) is not None:
        text = attribute.group(0)
        if len(kept) < MAX_ATTRIBUTES:
            kept.append(text)
        elif (special := _KEPT_ANYWHERE.match(text)) and special.group(1).lower() not in contract:
            contract.add(special.group(1).lower())
            kept.append(b" " + text.lstrip(b" \t\n\r\f/"))
        pos = attribute.end()
    return kept, pos
