"""The semantic skeleton: what a user sees of a page, and a granular diff of two skeletons.

A skeleton is a small JSON map of the UI state that matters for judging an
action::

    {"elements": {key: descriptor}, "alerts": {"0": text, ...},
     "content": {"headings": [...], "texts": [...], "truncated": false},
     "background": [[locator, value, kinds], ...], "scroll": {"position": "x,y", "viewport": "1-9"}}

Interactive elements are the semantic ones (tags, roles, contenteditable),
every element the snapshot script numbered
(:data:`~veriloop.schemas.page_contract.ELEMENT_ID_ATTR`: it numbers what the
page makes clickable, such as a ``div`` with a pointer cursor) and containers
that carry ``aria-expanded``. Elements are keyed by that id, then ``id``, then
``name``, then ``tag[n]``; elements the browser does not show are left out.
Messages are live regions, alert/status/log roles, the usual validation
classes and whatever a field names with ``aria-describedby`` /
``aria-errormessage``, one entry per text block. The content layer is the
other visible text, one normalised entry per text block (heading, paragraph,
list item, table row...), in page order, bounded by :data:`MAX_BLOCKS`.

Background: an element the snapshot script marked with
:data:`~veriloop.schemas.page_contract.BACKGROUND_ATTR` changed on its own
(clock, relative time, rotating ad); the diff ignores such a change unless the
action targeted the element. Without a mark, non-interactive text that only
changed digits (an unmarked ticker) is ignored too.
"""

from __future__ import annotations

import codecs
import re
import threading
from collections import Counter
from collections.abc import Iterable
from itertools import compress, repeat
from operator import ne
from typing import Any

import orjson
from lxml import etree

from veriloop.engines import skeleton_walk
from veriloop.engines.markup_guard import bound_markup
from veriloop.schemas.page_contract import (
    BACKGROUND_ATTR,
    BACKGROUND_KINDS,
    ELEMENT_ID_ATTR,
    HIDDEN_ATTR,
    SCROLL_ATTR,
    VIEWPORT_ATTR,
)

TEXT_CHARS = 50
"""Visible text kept per element (trimmed, whitespace collapsed)."""
VALUE_CHARS = 100
HREF_CHARS = 150
ALERT_CHARS = 200
"""Text kept per message block; a longer one keeps a digest of the whole, like a content block."""
BLOCK_CHARS = 100
"""Text kept per content block; a longer block ends in ``…#`` and a digest of the whole, so an
edit past the kept part still changes it."""
MAX_BLOCKS = 1500
"""Budget of the content layer: the first this many text blocks of the page (``truncated`` says so)."""
MAX_MARKS = 100
"""Background marks kept per page (each costs one lookup in the next page)."""

INTERACTIVE_TAGS = ("a", "button", "input", "select", "textarea")
INTERACTIVE_ROLES = (
    "button", "link", "menuitem", "menuitemcheckbox", "menuitemradio",
    "checkbox", "radio", "tab", "option", "switch", "combobox",
)  # fmt: skip
ALERT_ROLES = ("alert", "status", "log")
# Message conventions: Bootstrap, Django, ASP.NET, Parsley and the plain names.
ALERT_CLASSES = (
    "toast", "error", "success", "alert", "invalid-feedback", "text-danger", "help-block",
    "errorlist", "errornote", "field-validation-error", "validation-summary-errors",
    "error-message", "errormessage", "form-error", "field-error", "parsley-errors-list",
)  # fmt: skip
ALERT_CLASSES_SET = frozenset(ALERT_CLASSES)
MESSAGE_REFERENCES = ("aria-describedby", "aria-errormessage")
"""A field's pointers to its own messages: the elements they name are messages."""
HEADING_TAGS = frozenset(("h1", "h2", "h3", "h4", "h5", "h6"))
# Text inside these does not start a block of its own: it belongs to the nearest other ancestor.
INLINE_TAGS = frozenset(
    "abbr b bdi bdo big br cite code data del dfn em font i img ins kbd label mark nobr q rp rt "
    "ruby s samp small span strike strong sub sup td th time tt u var wbr".split()
)
# Text that is not shown as page text; for the content layer also the text of links and buttons,
# which their descriptors already carry.
_NOT_TEXT = frozenset(
    ("script", "style", "noscript", "template", "title", "select", "option", "textarea", "iframe")
)
_NOT_CONTENT = _NOT_TEXT | {"a", "button"}

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
    "aria-invalid": "",
    "aria-current": "",
    "href": "",
    "role": "",
}
BACKGROUND_TEXT = "⟨…⟩"
"""Stands in a content block for text the snapshot marked as background: the block then matches
any text in that place, so a page marked on one side only still compares equal."""
BACKGROUND_FIELD = "background"
"""Descriptor field (never a diff line of its own): the background kinds of the element or of
text inside it."""
_BACKGROUND_FIELDS = {"text": ("text", "label"), "href": ("href",), "src": ()}
"""The descriptor fields each background kind covers (``src`` is not in a descriptor)."""


class SkeletonError(ValueError):
    """A skeleton is not in the shape this module produces."""


def empty_skeleton() -> dict:
    """The skeleton of a page with nothing on it."""
    return {
        "elements": {},
        "alerts": {},
        "content": {"headings": [], "texts": [], "truncated": False},
        "background": [],
        "scroll": {},
    }


# --- reading HTML ---------------------------------------------------------------------------

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


# --- extraction ---------------------------------------------------------------------------
# Measured on real pages: libxml2 evaluates element predicates (//*[@role or ...]) very slowly,
# an XPath union of attribute paths walks the tree once per path, and the content layer needs a
# walk in any case. So one walk in document order (compiled: :mod:`skeleton_walk`) reads each
# element's attributes once and does all the work of the page: hidden subtrees, interactive
# candidates, messages, marks and page text.

_LABELS = ("aria-label", "title", "placeholder", "alt")
"""The attributes that can name an interactive element without text, most telling first."""

# What each attribute of an interactive element means for its descriptor: kept (cut to
# ``_KEEP_CHARS``), a flag, an ARIA flag (``_ARIA_FLAG_FIELD``), its key (number, id, name), its
# input type, a label. The compiled walk builds the descriptors from these tables.
_ATTR_KIND = {
    "value": "keep", "href": "keep", "aria-expanded": "keep", "aria-selected": "keep",
    "role": "keep", "aria-invalid": "keep", "aria-current": "keep",
    "checked": "flag", "selected": "flag", "disabled": "flag",
    "aria-checked": "aria_flag", "aria-disabled": "aria_flag",
    ELEMENT_ID_ATTR: "key", "id": "id", "name": "name", "type": "type",
    **dict.fromkeys(_LABELS, "label"),
}  # fmt: skip
_ARIA_FLAG_FIELD = {"aria-checked": "checked", "aria-disabled": "disabled"}
_KEEP_CHARS = {
    "value": VALUE_CHARS,
    "href": HREF_CHARS,
    "aria-expanded": 20,
    "aria-selected": 20,
    "aria-invalid": 20,
    "aria-current": 20,
    "role": 40,
}


_BY_NUMBER = etree.XPath(f"/descendant::*[@{ELEMENT_ID_ATTR}=$value]")
_BY_ID = etree.XPath("/descendant::*[@id=$value]")
_HIDING_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_DIGITS = b"0123456789"
_NO_DIGITS = str.maketrans("", "", _DIGITS.decode())


def digits_masked(text: str) -> str:
    """``text`` without its digits: equal masks mean only digits changed."""
    return text.translate(_NO_DIGITS)


def shown_text(text: str) -> str:
    """A kept block as an observation line shows it: without the digest."""
    return text.rpartition("…#")[0] + "…" if "…#" in text else text


def carry_background(root: etree._Element | None, before: Any) -> None:
    """Mark on ``root`` (in place) the elements ``before`` (a skeleton) knew as background.

    The snapshot script marks what it saw change on its own; a client that marked only the page an
    action was chosen on still gets those elements treated as background in the page after it.
    """
    if root is None or not isinstance(before, dict):
        return
    marks = before.get("background")
    if not isinstance(marks, list):
        return
    for mark in marks[:MAX_MARKS]:
        if not (
            isinstance(mark, list) and len(mark) == 3 and all(isinstance(m, str) for m in mark)
        ):
            continue
        how, value, kinds = mark
        try:
            if how == "number":
                found = _BY_NUMBER(root, value=value)
            elif how == "id":
                found = _BY_ID(root, value=value)
            else:
                found = root.xpath(value) if value.startswith("/") else []
        except (etree.XPathError, TypeError):  # a path from another page or version
            continue
        for el in found[:1]:
            if isinstance(el, etree._Element):
                merged = set((el.get(BACKGROUND_ATTR) or "").split()) | set(kinds.split())
                el.set(BACKGROUND_ATTR, " ".join(sorted(merged)))


_RULES = skeleton_walk.Rules(
    interactive_tags=INTERACTIVE_TAGS,
    inline_tags=INLINE_TAGS,
    not_content=_NOT_CONTENT,
    not_text=_NOT_TEXT,
    heading_tags=HEADING_TAGS,
    hidden_tags=("noscript", "template"),
    interactive_roles=INTERACTIVE_ROLES,
    alert_roles=ALERT_ROLES,
    alert_classes=ALERT_CLASSES,
    number_attr=ELEMENT_ID_ATTR,
    hidden_attr=HIDDEN_ATTR,
    mark_attr=BACKGROUND_ATTR,
    scroll_attr=SCROLL_ATTR,
    viewport_attr=VIEWPORT_ATTR,
    reference_attrs=MESSAGE_REFERENCES,
    hiding_style=_HIDING_STYLE,
    max_blocks=MAX_BLOCKS,
    max_marks=MAX_MARKS,
    block_chars=BLOCK_CHARS,
    alert_chars=ALERT_CHARS,
    background_text=BACKGROUND_TEXT,
    background_field=BACKGROUND_FIELD,
    background_kinds=BACKGROUND_KINDS,
    attribute_kinds=_ATTR_KIND,
    kept_chars=_KEEP_CHARS,
    aria_flags=_ARIA_FLAG_FIELD,
    labels=_LABELS,
    text_chars=TEXT_CHARS,
    value_chars=VALUE_CHARS,
)
"""What the walk looks for. An element is hidden by ``hidden``, ``aria-hidden="true"``, the
snapshot's hidden flag, a hiding style, or being ``noscript``/``template`` (its subtree with it).
Interactive: an interactive tag, role, ``contenteditable`` or the snapshot's number; a container
whose only state is ``aria-expanded`` is kept without its text. Messages: live regions,
alert/status/log roles, :data:`ALERT_CLASSES`, ``data-toast``, and what a field names. Page text:
the text of ``<body>`` by block element (an element's block is itself, or its parent's block when
it is inline), without hidden subtrees, messages, editable text and :data:`_NOT_CONTENT` tags;
the text of an element marked as ticking is :data:`BACKGROUND_TEXT`."""


def skeleton_from_tree(root: etree._Element | None) -> dict:
    """The skeleton of a parsed page (see the module docstring), made by the compiled walk."""
    if root is None:
        return empty_skeleton()
    return skeleton_walk.walk(root, _RULES)


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
    if not all(isinstance(text, str) for text in alerts.values()):
        raise SkeletonError("a skeleton's messages are texts")
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


_ABSENT = object()


def _field_changes(
    before: dict[str, dict], after: dict[str, dict], keys: list[str]
) -> dict[str, dict]:
    """``{key: {field: (old, new)}}`` for elements present in both skeletons whose descriptors differ.

    A field only one side has changed from (or to) its :data:`FIELD_DEFAULTS` value; a value of
    another type is a change even when it compares equal (``1`` and ``True``).
    """
    changes: dict[str, dict] = {}
    for key in keys:
        old_desc, new_desc = before[key], after[key]
        fields: dict[str, tuple[Any, Any]] = {}
        for field, new in new_desc.items():
            old = old_desc.get(field, _ABSENT)
            if old is _ABSENT:
                fields[field] = (FIELD_DEFAULTS.get(field), new)
            elif old != new or type(old) is not type(new):
                fields[field] = (old, new)
        for field, old in old_desc.items():
            if field not in new_desc:
                fields[field] = (old, FIELD_DEFAULTS.get(field))
        changes[key] = fields
    return changes


def _field_order(field: str) -> tuple[int, str]:
    order = list(FIELD_DEFAULTS)
    return (order.index(field) if field in order else len(order), field)


_MARK_ONLY = frozenset({BACKGROUND_FIELD})


def _ignored_fields(key: str, before: dict, after: dict, target: str | None) -> frozenset[str]:
    """Fields of element ``key`` that change on their own (its background kinds), unless targeted."""
    if key == target or (BACKGROUND_FIELD not in before and BACKGROUND_FIELD not in after):
        return _MARK_ONLY
    kinds = set(before.get(BACKGROUND_FIELD, "").split()) | set(
        after.get(BACKGROUND_FIELD, "").split()
    )
    return _MARK_ONLY.union(*(_BACKGROUND_FIELDS.get(kind, ()) for kind in kinds))


def _blocks(content: Any, field: str) -> list[str]:
    blocks = content.get(field, [])
    if not isinstance(blocks, list) or not all(map(isinstance, blocks, repeat(str))):
        raise SkeletonError(f"content {field!r} is a list of texts")
    return blocks


def _changed_blocks(before: list[str], after: list[str]) -> tuple[list[str], list[str]]:
    """(gone, new) blocks as multisets, in page order, without pairs that differ only in digits
    (an unmarked ticker: background by the old rule)."""
    # The blocks both lists start and end with cancel out of both multisets, so only the middle
    # is counted (counting every block of a long page twice was most of a step's diff).
    shared = min(len(before), len(after))
    start = _shared_run(before, after, shared)
    end = _shared_run(reversed(before), reversed(after), shared - start)
    b_count = Counter(before[start : len(before) - end])
    a_count = Counter(after[start : len(after) - end])
    gone, new = _each(before, b_count - a_count), _each(after, a_count - b_count)
    if not (gone and new):
        return gone, new
    if not set(map(digits_masked, gone)).isdisjoint(map(digits_masked, new)):
        ticked = Counter(map(digits_masked, gone)) & Counter(map(digits_masked, new))
        gone, new = _without(gone, ticked), _without(new, ticked)
    return _unmatched(gone, new)


def _shared_run(a: Iterable[str], b: Iterable[str], limit: int) -> int:
    """How many leading blocks ``a`` and ``b`` have in common, up to ``limit`` (compared in C)."""
    return next(compress(range(limit), map(ne, a, b)), limit)


def _unmatched(gone: list[str], new: list[str]) -> tuple[list[str], list[str]]:
    """(gone, new) without pairs where a block with background text matches the other one."""
    if not any(BACKGROUND_TEXT in text for text in (*gone, *new)):
        return gone, new
    new = list(new)
    kept = []
    for old in gone:
        match = next((n for n, text in enumerate(new) if _same_but_background(old, text)), None)
        if match is None:
            kept.append(old)
        else:
            del new[match]
    return kept, new


def _same_but_background(a: str, b: str) -> bool:
    for pattern, text in ((a, b), (b, a)):
        if BACKGROUND_TEXT in pattern:
            parts = map(re.escape, pattern.split(BACKGROUND_TEXT))
            if re.fullmatch(".*".join(parts), text, re.DOTALL):
                return True
    return False


def _without(texts: list[str], masks: Counter[str]) -> list[str]:
    remaining = Counter(masks)
    kept = []
    for text in texts:
        mask = digits_masked(text)
        if remaining[mask] > 0:
            remaining[mask] -= 1
        else:
            kept.append(text)
    return kept


def _content_lines(before: dict, after: dict) -> list[str]:
    """Headings and text blocks that changed; nothing when either skeleton has no content layer."""
    b_content, a_content = before.get("content"), after.get("content")
    if b_content is None or a_content is None:
        return []  # a before_state from before the content layer
    if not isinstance(b_content, dict) or not isinstance(a_content, dict):
        raise SkeletonError("a skeleton's 'content' is a map")
    lines = []
    for field, noun in (("headings", "Heading"), ("texts", "Text")):
        # Equal page text has no lines: its blocks are checked only when they differ (a check of
        # every block was a tenth of the diff on a page of text).
        if b_content.get(field, []) == a_content.get(field, []):
            continue
        gone, new = _changed_blocks(_blocks(b_content, field), _blocks(a_content, field))
        # As many gone as new: edits in place, read in page order.
        if gone and len(gone) == len(new):
            lines += [
                f"{noun} changed from '{shown_text(old)}' to '{shown_text(text)}'"
                for old, text in zip(gone, new, strict=True)
            ]
            continue
        lines += [f"New {noun.lower()} appeared: '{shown_text(text)}'" for text in new]
        lines += [f"{noun} disappeared: '{shown_text(text)}'" for text in gone]
    if lines and (b_content.get("truncated") or a_content.get("truncated")):
        lines.append(f"(page text compared over its first {MAX_BLOCKS} blocks)")
    return lines


def _numbers(viewport: Any) -> set[str]:
    """Element numbers of a viewport attribute (``"1-4 7"``); nothing for anything malformed."""
    numbers: set[str] = set()
    for part in str(viewport or "").split():
        first, _, last = part.partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            numbers.update(str(n) for n in range(int(first), int(last or first) + 1)[:10_000])
    return numbers


def _scroll_lines(before: dict, after: dict, elements: dict[str, dict]) -> list[str]:
    """A line when the window scrolled, naming the numbered elements that came into view."""
    b_scroll, a_scroll = before.get("scroll"), after.get("scroll")
    if not (isinstance(b_scroll, dict) and isinstance(a_scroll, dict)):
        return []
    was, now = b_scroll.get("position"), a_scroll.get("position")
    if not was or not now or was == now:
        return []
    seen = _numbers(b_scroll.get("viewport"))
    came = [
        key for key in elements if key in _numbers(a_scroll.get("viewport")) and key not in seen
    ]
    line = f"Page scrolled from ({was}) to ({now})"
    if came:
        shown = ", ".join(describe_element(key, elements[key]) for key in came[:5])
        more = f" and {len(came) - 5} more" if len(came) > 5 else ""
        line += f"; {len(came)} elements came into view: {shown}{more}"
    return [line]


def diff_skeletons(
    before: dict, after: dict, limit: int = 40, target: str | None = None
) -> list[str]:
    """Human-readable changes from ``before`` to ``after``, in a stable order, at most ``limit`` lines
    plus one summary line (``... and 37 more changes``).

    ``target`` is the key of the element the action named: its background fields count.
    Order: new messages, heading changes, changed elements (page order), new elements, elements
    that disappeared, text changes, messages that disappeared, scrolling. Raises
    :class:`SkeletonError` on a malformed skeleton.
    """
    b_elements, b_alerts = _check_shape(before)
    a_elements, a_alerts = _check_shape(after)
    # One pass comparing whole descriptors (in C: a Python loop was most of a small page's diff)
    # leaves the per-field work to the few elements that differ, new ones among them.
    differ = list(
        compress(
            a_elements,
            map(ne, map(b_elements.get, a_elements, repeat(_ABSENT)), a_elements.values()),
        )
    )
    appeared = [key for key in differ if key not in b_elements]
    changed = [key for key in differ if key in b_elements] if appeared else differ
    # ``before`` has keys ``after`` lacks only if it has more than the shared ones (usually not).
    shared = len(a_elements) - len(appeared)
    gone = [k for k in b_elements if k not in a_elements] if len(b_elements) > shared else []
    gone_messages, new_messages = _changed_messages(b_alerts, a_alerts)
    content = _content_lines(before, after)
    scrolled = _scroll_lines(before, after, a_elements)
    if not (changed or appeared or gone or content or scrolled or gone_messages or new_messages):
        return []

    lines = [f"New message/alert appeared: '{shown_text(text)}'" for text in new_messages]
    lines += [line for line in content if line.startswith(("Heading", "New heading"))]
    _touched(a_elements, appeared)
    _touched(b_elements, gone)
    if changed:
        _touched(a_elements, _touched(b_elements, changed))
        for key, fields in _field_changes(b_elements, a_elements, changed).items():
            ignored = _ignored_fields(key, b_elements[key], a_elements[key], target)
            for field in sorted(fields.keys() - ignored, key=_field_order):
                old, new = fields[field]
                lines.append(f"Element '{key}' changed '{field}' from {_fmt(old)} to {_fmt(new)}")
    lines += [f"New element appeared: {describe_element(k, a_elements[k])}" for k in appeared]
    lines += [f"Element disappeared: {describe_element(k, b_elements[k])}" for k in gone]
    lines += [line for line in content if not line.startswith(("Heading", "New heading"))]
    lines += [f"Message/alert disappeared: '{shown_text(text)}'" for text in gone_messages]
    lines += scrolled

    if len(lines) > limit:
        return lines[:limit] + [f"... and {len(lines) - limit} more changes"]
    return lines


def _changed_messages(before: dict[str, str], after: dict[str, str]) -> tuple[list[str], list[str]]:
    """(gone, new) messages as multisets of texts, in page order."""
    if before == after:  # the usual case, without building four counters
        return [], []
    if not before or not after:  # messages only came, or only went: all of them, in page order
        return _unmatched(list(before.values()), list(after.values()))
    b_texts, a_texts = Counter(before.values()), Counter(after.values())
    # Messages with background text match any text in its place (a mark on one side only).
    return _unmatched(
        _each(before.values(), b_texts - a_texts), _each(after.values(), a_texts - b_texts)
    )


_FEW = 16
"""Wanted texts that are found by a search each rather than by one pass over all the texts."""


def _each(texts: Any, wanted: Counter[str]) -> list[str]:
    """The texts in ``wanted`` (with multiplicity), in the page order of ``texts``."""
    if isinstance(texts, list) and wanted.total() <= _FEW:
        # A few changed blocks of a long page: each found by list.index, in C.
        found = []
        for text, times in wanted.items():
            at = -1
            for _ in range(times):
                at = texts.index(text, at + 1)
                found.append((at, text))
        return [text for _, text in sorted(found)]
    remaining = Counter(wanted)
    picked = []
    for text in texts:
        if remaining[text] > 0:
            remaining[text] -= 1
            picked.append(text)
    return picked


def _without_fields(desc: dict, ignored: frozenset[str]) -> dict:
    return {field: value for field, value in desc.items() if field not in ignored}


_MARKED = f'"{BACKGROUND_FIELD}":'.encode()


def page_identity(skeleton: dict) -> bytes:
    """The skeleton as stable bytes without what changes on its own: fields an element's background
    mark covers, digits of page text, the marks themselves and the scroll position. Fingerprints
    digest it.

    orjson writes it with sorted keys (a quarter of the compiled writer's time, which wrote
    ``json.dumps``'s text); the page text follows, its digits removed from the written bytes.
    Raises ``TypeError`` for what JSON cannot hold (not a skeleton read from JSON)."""
    elements = skeleton.get("elements")
    stable = {"elements": elements, "alerts": skeleton.get("alerts")}
    written = orjson.dumps(stable, option=orjson.OPT_SORT_KEYS)
    if _MARKED in written and isinstance(elements, dict):
        # Only marked elements have the field (or an element keyed by its name): they stand
        # without the fields their marks cover; the others as they are.
        stable["elements"] = {
            key: _unmarked(key, desc)
            if isinstance(desc, dict) and BACKGROUND_FIELD in desc
            else desc
            for key, desc in elements.items()
        }
        written = orjson.dumps(stable, option=orjson.OPT_SORT_KEYS)
    content = skeleton.get("content")
    if isinstance(content, dict):
        content = [content.get("headings"), content.get("texts")]
    return (
        written
        + b"\n"
        + orjson.dumps(content, option=orjson.OPT_SORT_KEYS).translate(None, _DIGITS)
    )


def _unmarked(key: str, desc: dict) -> dict:
    """What stands for a descriptor with background kinds in the identity."""
    return _without_fields(desc, _ignored_fields(key, desc, desc, None))
