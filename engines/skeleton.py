"""The semantic skeleton: interactive elements and messages of a page, and a granular diff of two skeletons.

A skeleton is a small JSON map of the UI state that matters for judging an
action: ``{"elements": {key: descriptor}, "alerts": {"0": text, ...}}``.
Interactive elements are the semantic ones (tags, roles, contenteditable) and
every element the snapshot script numbered
(:data:`~veriloop.schemas.page_contract.ELEMENT_ID_ATTR`: it numbers what the
page makes clickable, such as a ``div`` with a pointer cursor). Elements are
keyed by that id, then ``id``, then ``name``, then ``tag[n]``; elements the
browser does not show are left out.
Tickers and ads that change text outside interactive elements leave the
skeleton unchanged, which is the point.
"""

from __future__ import annotations

import codecs
import re
import threading
from collections import Counter
from functools import lru_cache
from typing import Any

from deepdiff import DeepDiff
from lxml import etree

from veriloop.engines.markup_guard import bound_markup
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR, HIDDEN_ATTR

TEXT_CHARS = 50
"""Visible text kept per element (trimmed, whitespace collapsed)."""
VALUE_CHARS = 100
HREF_CHARS = 150
ALERT_CHARS = 200

INTERACTIVE_TAGS = ("a", "button", "input", "select", "textarea")
INTERACTIVE_ROLES = (
    "button", "link", "menuitem", "menuitemcheckbox", "menuitemradio",
    "checkbox", "radio", "tab", "option", "switch", "combobox",
)  # fmt: skip
ALERT_ROLES = ("alert", "status")
ALERT_CLASSES = ("toast", "error", "success", "alert")
ALERT_CLASSES_SET = frozenset(ALERT_CLASSES)

# Descriptor fields in display order, with the value an absent field stands for.
FIELD_DEFAULTS: dict[str, Any] = {
    "tag": "",
    "type": "",
    "text": "",
    "label": "",
    "value": "",
    "checked": False,
    "selected": False,
    "disabled": False,
    "aria-expanded": "",
    "aria-selected": "",
    "href": "",
    "role": "",
}


class SkeletonError(ValueError):
    """A skeleton is not in the shape this module produces."""


def empty_skeleton() -> dict:
    """The skeleton of a page with nothing on it."""
    return {"elements": {}, "alerts": {}}


# --- reading HTML ---------------------------------------------------------------------------

_WHITESPACE = b" \t\n\r\f\v"
_META_CHARSET = re.compile(
    rb"""<meta[^>]*?charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]+)|<\?xml[^>]*?encoding\s*=\s*["']([a-zA-Z0-9_.:-]+)""",
    re.IGNORECASE,
)
# WHATWG: these labels are decoded as windows-1252; a declared UTF-16 in a byte stream that had no BOM is UTF-8.
_CHARSET_ALIASES = {"iso8859-1": "cp1252", "ascii": "cp1252"}


def sniff_encoding(data: bytes) -> str:
    """The encoding of an HTML byte string: BOM, then a meta/XML declaration in the first 4 KB, else UTF-8."""
    for bom, name in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if data.startswith(bom):
            return name
    match = _META_CHARSET.search(data[:4096])
    if match:
        label = (match.group(1) or match.group(2)).decode("ascii").lower()
        try:
            name = codecs.lookup(label).name
        except LookupError:
            name = None
        if name:
            return "utf-8" if name.startswith("utf-16") else _CHARSET_ALIASES.get(name, name)
    return "utf-8"


def to_utf8(html: str | bytes | None) -> bytes:
    """UTF-8 bytes of a page given as text or as bytes in any declared charset; never raises."""
    if html is None:
        return b""
    if isinstance(html, str):
        return html.encode("utf-8", "replace")
    data = bytes(html)
    encoding = sniff_encoding(data)
    if encoding == "utf-8":
        try:
            data.decode("utf-8")
            return data
        except UnicodeDecodeError:
            encoding = "cp1252"  # undeclared legacy page: the browser's default guess
    return data.decode(encoding, "replace").encode("utf-8", "replace")


def normalized_bytes(data: bytes) -> bytes:
    """UTF-8 page bytes with all ASCII whitespace removed (whitespace-only edits leave this unchanged)."""
    return data.translate(None, _WHITESPACE)


_local = threading.local()


def _parser() -> etree.HTMLParser:
    # lxml parsers must not be shared between threads; one per thread, reused (building one costs).
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = etree.HTMLParser(
            encoding="utf-8",  # input is always UTF-8 here; a page's own meta charset must not re-decode it
            remove_comments=True,
            remove_pis=True,
            collect_ids=False,
            no_network=True,
            huge_tree=True,
        )
        _local.parser = parser
    return parser


def parse_utf8(data: bytes) -> etree._Element | None:
    """Parse UTF-8 HTML leniently; None when there is no document (empty, comments only, unreadable)."""
    if b"\x00" in data:
        data = data.replace(b"\x00", b"")
    if not data or data.isspace():  # isspace, unlike strip, copies nothing
        return None
    try:
        return etree.fromstring(bound_markup(data), _parser())
    except (etree.LxmlError, ValueError):
        return None


def parse_html(html: str | bytes | None) -> etree._Element | None:
    """Parse a page given as text or bytes; None when there is no document."""
    return parse_utf8(to_utf8(html))


# --- extraction -----------------------------------------------------------------------------
# Measured on real pages: libxml2 evaluates element predicates (//*[@role or ...]) slowly, while
# tag iteration and attribute-axis queries are cheap. So candidates come from iter(tags) plus one
# query for the few attributes that matter, and hidden subtrees are collected once instead of
# testing every candidate's ancestors.

_ATTR_NAMES = (
    "role",
    "contenteditable",
    ELEMENT_ID_ATTR,
    "aria-live",
    "data-toast",
    "hidden",
    "aria-hidden",
    HIDDEN_ATTR,
)
_HIDDEN_TAGS = ("noscript", "template")
_SELECTED_OPTION = etree.XPath("(.//option[@selected])[1]")
_FIRST_OPTION = etree.XPath(
    "(.//option)[1]"
)  # what a browser shows when no option is marked selected
_LABELS = ("aria-label", "title", "placeholder", "alt")

# What each attribute of an interactive element means for its descriptor.
_KEEP, _FLAG, _ARIA_FLAG, _KEY, _ID, _NAME, _TYPE, _LABEL = range(8)
_ATTR_KIND = {
    "value": _KEEP, "href": _KEEP, "aria-expanded": _KEEP, "aria-selected": _KEEP, "role": _KEEP,
    "checked": _FLAG, "selected": _FLAG, "disabled": _FLAG,
    "aria-checked": _ARIA_FLAG, "aria-disabled": _ARIA_FLAG,
    ELEMENT_ID_ATTR: _KEY, "id": _ID, "name": _NAME, "type": _TYPE,
    **dict.fromkeys(_LABELS, _LABEL),
}  # fmt: skip
_ARIA_FLAG_FIELD = {"aria-checked": "checked", "aria-disabled": "disabled"}
_KEEP_CHARS = {
    "value": VALUE_CHARS,
    "href": HREF_CHARS,
    "aria-expanded": 20,
    "aria-selected": 20,
    "role": 40,
}


def _text(el: etree._Element, limit: int) -> str:
    if len(el):
        raw = etree.tostring(el, method="text", encoding=str, with_tail=False)
    else:
        raw = el.text
        if not raw:
            return ""
    # Bounded before collapsing so a huge contenteditable costs no more than a button.
    return " ".join(raw[: limit * 40].split())[:limit]


def _element(el: etree._Element, tag: str) -> tuple[str | None, dict[str, Any]] | None:
    """(key or None, descriptor) of an interactive element; None for ``input type=hidden``."""
    desc: dict[str, Any] = {"tag": tag}
    key = el_id = name = label = None
    # One pass over the element's own attributes (usually 1-4) is cheaper than a lookup per field.
    for attr, value in el.items():
        kind = _ATTR_KIND.get(attr)
        if kind is None:
            continue
        if kind == _KEEP:
            value = value.strip()
            if value:
                desc[attr] = value[: _KEEP_CHARS[attr]]
        elif kind == _FLAG:
            desc[attr] = True
        elif kind == _ARIA_FLAG:
            if value == "true":
                desc[_ARIA_FLAG_FIELD[attr]] = True
        elif kind == _KEY:
            key = value
        elif kind == _ID:
            el_id = value
        elif kind == _NAME:
            name = value
        elif kind == _TYPE:
            if tag == "input":
                desc["type"] = value.strip().lower()
        elif label is None or _LABELS.index(attr) < _LABELS.index(label[0]):
            label = (attr, value)
    if tag == "input":
        if desc.setdefault("type", "text") == "hidden":
            return None
    elif tag == "select":
        _describe_select(el, desc)
    else:
        text = _text(el, TEXT_CHARS)
        if text:
            desc["text"] = text
    if label is not None and "text" not in desc:
        desc["label"] = " ".join(label[1].split())[:TEXT_CHARS]
    return key or el_id or name, desc


def _describe_select(el: etree._Element, desc: dict[str, Any]) -> None:
    """A select shows its selected option: that option's text, and its value unless the snapshot wrote one."""
    options = _SELECTED_OPTION(el) or _FIRST_OPTION(el)
    if not options:
        return
    text = _text(options[0], TEXT_CHARS)
    if text:
        desc["text"] = text
    if "value" not in desc:
        value = (options[0].get("value") or text)[:VALUE_CHARS]
        if value:
            desc["value"] = value


def _unique(key: str, taken: dict) -> str:
    n = 2
    while f"{key}[{n}]" in taken:
        n += 1
    return f"{key}[{n}]"


_CLASS_VALUES = etree.XPath("/descendant::*/@class", smart_strings=False)


def _alert_class_tokens(root: etree._Element) -> tuple[str, ...]:
    """Alert class tokens that may be on some element (a substring prefilter; the loop checks tokens).

    One pass fetching every class value as a plain string is several times cheaper than testing
    each class attribute for each token in XPath, and most pages carry none of them.
    """
    classes = " ".join(_CLASS_VALUES(root))
    return tuple(token for token in ALERT_CLASSES if token in classes)


@lru_cache(maxsize=16)
def _attribute_query(tokens: tuple[str, ...]) -> etree.XPath:
    """The attributes that make an element interactive, a message or hidden, in page order."""
    parts = [f"/descendant::*/@{name}" for name in _ATTR_NAMES]
    if tokens:
        parts.append(
            f"/descendant::*/@class[{' or '.join(f'contains(., {token!r})' for token in tokens)}]"
        )
    return etree.XPath(" | ".join(parts))


def skeleton_from_tree(root: etree._Element | None) -> dict:
    """The skeleton of a parsed page (see the module docstring)."""
    if root is None:
        return empty_skeleton()
    hidden_roots = list(root.iter(*_HIDDEN_TAGS))
    # Interactive by role, contenteditable or the snapshot's number; a dict keeps page order once.
    by_attribute: dict[etree._Element, None] = {}
    alert_candidates: list[etree._Element] = []
    for attr in _attribute_query(_alert_class_tokens(root))(root):
        name, el = attr.attrname, attr.getparent()
        if name == "class":
            if not ALERT_CLASSES_SET.isdisjoint(attr.split()):
                alert_candidates.append(el)
        elif name == "role":
            if attr in INTERACTIVE_ROLES:
                by_attribute[el] = None
            elif attr in ALERT_ROLES:
                alert_candidates.append(el)
        elif name == ELEMENT_ID_ATTR:
            by_attribute[el] = None
        elif name == "contenteditable":
            if attr != "false":
                by_attribute[el] = None
        elif name == "aria-live":
            if attr != "off":
                alert_candidates.append(el)
        elif name == "data-toast":
            alert_candidates.append(el)
        elif name != "aria-hidden" or attr == "true":
            hidden_roots.append(el)
    hidden: set[etree._Element] = set()
    for el in hidden_roots:
        if el not in hidden:
            hidden.update(el.iter())

    elements: dict[str, dict] = {}
    unkeyed: Counter[str] = Counter()
    extra = (el for el in by_attribute if el.tag not in INTERACTIVE_TAGS)
    for group in (root.iter(*INTERACTIVE_TAGS), extra):
        for el in group:
            if el in hidden:
                continue
            tag = el.tag
            found = _element(el, tag)
            if found is None:
                continue
            key, desc = found
            if not key:
                key = f"{tag}[{unkeyed[tag]}]"
                unkeyed[tag] += 1
            elements[_unique(key, elements) if key in elements else key] = desc

    alerts: dict[str, str] = {}
    taken: set[etree._Element] = set()
    for el in alert_candidates:
        # A message nested in another message (div.alert inside role=alert) is the same message.
        if el in hidden or el in taken or any(ancestor in taken for ancestor in el.iterancestors()):
            continue
        taken.add(el)
        text = _text(el, ALERT_CHARS)
        if text:
            alerts[str(len(alerts))] = text
    return {"elements": elements, "alerts": alerts}


def extract_semantic_skeleton(html: str | bytes | None) -> dict:
    """Interactive elements and messages of a page; never raises (an unreadable page has an empty skeleton)."""
    try:
        return skeleton_from_tree(parse_html(html))
    except Exception:  # the contract: extraction never raises, whatever the page
        return empty_skeleton()


# --- diff -----------------------------------------------------------------------------------


def _check_shape(skeleton: Any) -> tuple[dict[str, dict], dict[str, str]]:
    if not isinstance(skeleton, dict):
        raise SkeletonError(f"a skeleton is a dict, got {type(skeleton).__name__}")
    elements, alerts = skeleton.get("elements"), skeleton.get("alerts")
    if not isinstance(elements, dict) or not isinstance(alerts, dict):
        raise SkeletonError("a skeleton needs 'elements' and 'alerts' maps")
    return elements, alerts


def _touched(descriptors: dict, keys: list[str]) -> list[str]:
    """``keys``, after checking that their descriptors are dicts (only touched ones are looked at)."""
    for key in keys:
        if not isinstance(descriptors[key], dict):
            raise SkeletonError(f"element {key!r}: a descriptor is a dict")
    return keys


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    return f"'{value}'"


def describe_element(key: str, desc: dict[str, Any]) -> str:
    """``'save' (button 'Save')``: an element as a diff line names it."""
    parts = [str(desc.get("tag", "?"))]
    if desc.get("type"):
        parts.append(f"type={desc['type']}")
    words = desc.get("text") or desc.get("label")
    if words:
        parts.append(f"'{words}'")
    if desc.get("value"):
        parts.append(f"value='{desc['value']}'")
    return f"'{key}' ({' '.join(parts)})"


def _field_changes(
    before: dict[str, dict], after: dict[str, dict], keys: list[str]
) -> dict[str, dict]:
    """``{key: {field: (old, new)}}`` for elements present in both skeletons whose descriptors differ."""
    # threshold_to_diff_deeper=0: always report per field, however much of a descriptor changed.
    diff = DeepDiff(
        {k: before[k] for k in keys},
        {k: after[k] for k in keys},
        view="tree",
        threshold_to_diff_deeper=0,
    )
    changes: dict[str, dict] = {key: {} for key in keys}
    for report in (
        "values_changed",
        "type_changes",
        "dictionary_item_added",
        "dictionary_item_removed",
    ):
        for level in diff.get(report, ()):
            key, field = level.path(output_format="list")[:2]
            default = FIELD_DEFAULTS.get(field)
            old = default if report == "dictionary_item_added" else level.t1
            new = default if report == "dictionary_item_removed" else level.t2
            changes[key][field] = (old, new)
    return changes


def _field_order(field: str) -> tuple[int, str]:
    order = list(FIELD_DEFAULTS)
    return (order.index(field) if field in order else len(order), field)


_ABSENT = object()


def diff_skeletons(before: dict, after: dict, limit: int = 40) -> list[str]:
    """Human-readable changes from ``before`` to ``after``, in a stable order, at most ``limit`` lines
    plus one summary line (``... and 37 more changes``).

    Order: new messages, changed elements (page order), new elements, elements that disappeared,
    messages that disappeared. Raises :class:`SkeletonError` on a malformed skeleton.
    """
    b_elements, b_alerts = _check_shape(before)
    a_elements, a_alerts = _check_shape(after)
    # One pass comparing whole descriptors keeps deepdiff to the few elements that actually changed.
    changed: list[str] = []
    appeared: list[str] = []
    for key, desc in a_elements.items():
        previous = b_elements.get(key, _ABSENT)
        if previous is _ABSENT:
            appeared.append(key)
        elif previous != desc:
            changed.append(key)
    # ``before`` has keys ``after`` lacks only if it has more than the shared ones (usually not).
    shared = len(a_elements) - len(appeared)
    gone = [k for k in b_elements if k not in a_elements] if len(b_elements) > shared else []
    b_texts, a_texts = Counter(b_alerts.values()), Counter(a_alerts.values())
    if not (changed or appeared or gone) and b_texts == a_texts:
        return []

    lines = [
        f"New message/alert appeared: '{text}'"
        for text in _each(a_alerts.values(), a_texts - b_texts)
    ]
    _touched(a_elements, appeared)
    _touched(b_elements, gone)
    if changed:
        _touched(a_elements, _touched(b_elements, changed))
        for key, fields in _field_changes(b_elements, a_elements, changed).items():
            for field in sorted(fields, key=_field_order):
                old, new = fields[field]
                lines.append(f"Element '{key}' changed '{field}' from {_fmt(old)} to {_fmt(new)}")
    lines += [f"New element appeared: {describe_element(k, a_elements[k])}" for k in appeared]
    lines += [f"Element disappeared: {describe_element(k, b_elements[k])}" for k in gone]
    lines += [
        f"Message/alert disappeared: '{text}'"
        for text in _each(b_alerts.values(), b_texts - a_texts)
    ]

    if len(lines) > limit:
        return lines[:limit] + [f"... and {len(lines) - limit} more changes"]
    return lines


def _each(texts: Any, wanted: Counter[str]) -> list[str]:
    """The texts in ``wanted`` (with multiplicity), in the page order of ``texts``."""
    remaining = Counter(wanted)
    picked = []
    for text in texts:
        if remaining[text] > 0:
            remaining[text] -= 1
            picked.append(text)
    return picked
