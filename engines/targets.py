"""What a person would call the element an action targets: ``click(9)`` -> ``"Save"``.

Reports and the console show it beside the action, read from the page the action was chosen on.
"""

from __future__ import annotations

from lxml import etree

from veriloop.engines.skeleton import parse_html
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR

TARGET_CHARS = 60
"""A longer name is cut at a word boundary and ends with an ellipsis."""


def target_label(dom: str | bytes | None, element_id: int | None) -> str | None:
    """The accessible name of the element numbered ``element_id`` in ``dom``, or None when it has none.

    Order: aria-label, a ``<label for>``, its text, placeholder, title, alt, value, name.
    """
    if element_id is None:
        return None
    root = parse_html(dom)
    if root is None:
        return None
    found = root.xpath(f"//*[@{ELEMENT_ID_ATTR}=$vid]", vid=str(element_id))
    if not found:
        return None
    el = found[0]
    labels = root.xpath("//label[@for=$id]", id=el.get("id")) if el.get("id") else []
    candidates = [
        el.get("aria-label"),
        *(etree.tostring(label, method="text", encoding=str) for label in labels[:1]),
        etree.tostring(el, method="text", encoding=str, with_tail=False)
        if el.tag not in ("input", "select", "textarea")
        else None,
        el.get("placeholder"),
        el.get("title"),
        el.get("alt"),
        el.get("value"),
        el.get("name"),
    ]
    for candidate in candidates:
        words = " ".join((candidate or "").split())
        if words:
            return shorten(words, TARGET_CHARS)
    return None


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word boundary, with an ellipsis (and any quote it
    opened closed again) when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    cut = cut.rstrip(" ,;:") + "…"
    for quote in ("'", '"'):
        if cut.count(quote) % 2:
            cut += quote
    return cut
