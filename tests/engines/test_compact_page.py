"""The compact page, written in one compiled pass that only reads the tree, is byte for byte what
stripping the tree in place and serialising it with lxml writes (the oracle below: the old path's
steps, in Python), on hostile little documents."""

from __future__ import annotations

import re

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from lxml import etree

from veriloop.engines.dom_context import _KEPT_ATTRS, _NOISE_TAGS, compact_tree
from veriloop.engines.skeleton import parse_html
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR, HIDDEN_ATTR

_SPACES = re.compile(r"\s+")
_UNWRITABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")  # lxml refuses to write them
_SQUASHED_VALUE = re.compile(r"[\x00-\x1f]|  |[\ufffe\uffff]")
_DROPPED = "veriloop-dropped"


def squash(text: str | None) -> str | None:
    """Text as the compact page shows it: None when blank, else without the characters lxml cannot
    write and with each run of whitespace one space."""
    if text is None or not text.strip():
        return None
    return _SPACES.sub(" ", _UNWRITABLE.sub("", text))


def oracle(page: str) -> tuple[str, frozenset[int]]:
    """The compact page as the four in-place steps made it (ValueError: a page with an attribute
    name lxml will not take, such as "\x0b", which the compiled pass deleted)."""
    root = parse_html(page)
    # isdecimal, not the old isdigit: int("²") raised.
    # and at most 18 digits: int("9" * 5000) raised.
    numbers = (v.strip() for v in root.xpath(f"//@{ELEMENT_ID_ATTR}"))
    ids = frozenset(int(v) for v in numbers if v.isdecimal() and len(v) <= 18)
    for element in root.xpath(f"//*[@{HIDDEN_ATTR}='1']"):
        element.tag = _DROPPED
    etree.strip_elements(root, _DROPPED, *_NOISE_TAGS, with_tail=False)
    for element in root.iter():
        for name, value in element.attrib.items():
            if name not in _KEPT_ATTRS:
                del element.attrib[name]
            elif _SQUASHED_VALUE.search(value):
                element.set(name, squash(value) or "")
        element.text, element.tail = squash(element.text), squash(element.tail)
    body = root.find("body")
    html = etree.tostring(body if body is not None else root, encoding="unicode", method="html")
    return html.strip(), ids


TAGS = [
    "div", "p", "span", "a", "b", "li", "ul", "ol", "table", "tr", "td", "th", "tbody", "select",
    "option", "optgroup", "textarea", "button", "label", "form", "input", "img", "br", "hr", "area",
    "col", "param", "base", "basefont", "frame", "isindex", "embed", "iframe", "title", "pre",
    "script", "style", "noscript", "template", "svg", "canvas", "head", "link", "meta", "html",
    "body", _DROPPED, "x-y", "h1",
]  # fmt: skip
ATTR_NAMES = sorted(_KEPT_ATTRS) + [
    "class", "style", "src", "action", "onclick", "hidden", HIDDEN_ATTR, HIDDEN_ATTR, "HREF",
    "Name", "multiple", "readonly", "nowrap", "data-x",
]  # fmt: skip
PIECES = [
    "a", "Z", "0", "7", " ", "  ", "\t", "\n", "\r", "\r\n", "&amp;", "&lt;", "&gt;", "&quot;",
    "&#39;", "&", "&{x}", "&{", "}", "<", ">", "<!--", "-->", "<!--x-->", '"', "'", "%", "%20",
    "=", "/", "?", "#", "é", "語", "\xa0", "\u2028", "\u3000", "\u0085", "\x0b", "\x0c", "\x1c",
    "\x01", "\x7f", "&#1;", "&#xFFFE;", "&#xffff;", "\ufffe", "😀", "&nbsp;", "&#160;", "1",
]  # fmt: skip
text = st.lists(st.sampled_from(PIECES), max_size=6).map("".join)


def _attribute(name: str, value: str, quoting: int) -> str:
    if quoting == 0:
        return name
    if quoting == 1:
        return f'{name}="{value.replace(chr(34), "&quot;")}"'
    if quoting == 2:
        return f"{name}='{value.replace(chr(39), '&#39;')}'"
    return f"{name}={value}"  # unquoted: whatever the parser makes of it


attribute = st.builds(
    _attribute,
    st.sampled_from(ATTR_NAMES),
    st.one_of(text, st.sampled_from(["1", "0", " 1", "12", " 3 ", "x", "", "١٢", "²"])),
    st.integers(0, 3),
)
start_tag = st.builds(
    lambda tag, attrs: f"<{tag}{''.join(' ' + a for a in attrs)}>",
    st.sampled_from(TAGS),
    st.lists(attribute, max_size=4),
)
end_tag = st.sampled_from(TAGS).map(lambda tag: f"</{tag}>")
document = st.lists(st.one_of(start_tag, start_tag, end_tag, text), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(document)
@example('<html data-veriloop-hidden="1"><body data-veriloop-hidden="1"><p>x</p></body></html>')
@example('<a name=" a b" href="\te\u0301 &amp; &{x}<!--y-->\'&quot;">x</a><b name="a b">y</b>')
@example("<ul><li>\x01</li><li> </li><li><script>x</script></li><li>a<br>b</li></ul>  tail \xa0")
@example("<p>a <veriloop-dropped>x</veriloop-dropped> b<style>s</style>  c</p>")
def test_the_compact_page_is_what_lxml_wrote_of_the_stripped_tree(page):
    root = parse_html(page)
    assume(root is not None)
    try:
        html, ids = oracle(page)
    except ValueError:
        assume(False)
    compact = compact_tree(root, len(page))
    assert compact.html == html
    assert compact.element_ids == ids
    assert etree.tostring(root) == etree.tostring(parse_html(page))  # the tree is only read


def test_an_element_number_too_long_to_be_one_names_nothing():
    """A hostile page's 5,000-digit number (``int`` refuses more than 4,300) is no element's."""
    longest = "9" * 18
    page = (
        f'<button {ELEMENT_ID_ATTR}="{"9" * 5000}">a</button><button {ELEMENT_ID_ATTR}="{"7" * 19}">b'
        f'</button><button {ELEMENT_ID_ATTR}=" {longest} ">c</button><button {ELEMENT_ID_ATTR}="12">d'
        "</button>"
    )
    compact = compact_tree(parse_html(page), len(page))
    assert compact.element_ids == {int(longest), 12}
