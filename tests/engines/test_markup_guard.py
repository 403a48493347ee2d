"""The bounded parse: start tags with more than MAX_ATTRIBUTES attributes are cut before lxml parses them."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veriloop.engines import skeleton_walk
from veriloop.engines.markup_guard import MAX_ATTRIBUTES, bound_markup
from veriloop.engines.skeleton import parse_html
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR


def crowded(separator: bytes, count: int = 5000, tail: bytes = b"") -> bytes:
    attributes = separator.join(b'a%d="x"' % i for i in range(count))
    return b"<html><body><div " + attributes + tail + b">hi</div><p>after</p></body></html>"


@pytest.mark.parametrize("separator", [b" ", b"/", b"", b"\n\t", b" / "])
def test_a_crowded_tag_keeps_its_first_attributes_and_the_page_contract(separator):
    tail = b' %s="7" value="v" %s="8"' % (ELEMENT_ID_ATTR.encode(), ELEMENT_ID_ATTR.encode())
    root = parse_html(bound_markup(crowded(separator, tail=tail)))
    div = root.find(".//div")
    assert div.get("a0") == "x" and div.get(f"a{MAX_ATTRIBUTES - 1}") == "x"
    assert div.get(f"a{MAX_ATTRIBUTES}") is None
    # The snapshot script appends its attributes: they survive the cut, each once (the first).
    assert div.get(ELEMENT_ID_ATTR) == "7" and div.get("value") == "v"
    assert len(div.attrib) == MAX_ATTRIBUTES + 2
    assert div.text == "hi" and root.findtext(".//p") == "after"


@pytest.mark.parametrize(
    "junk", [b' " ', b" = ", b" < ", b' "" ', b" <b ", b" </ ", b" </b ", b" <!x ", b" <!-- "]
)
def test_stray_characters_libxml2_reads_past_do_not_hide_a_crowded_tag(junk):
    data = b"<html><body><div a" + junk + b" ".join(b"b%d" % i for i in range(5000)) + b">hi</div>"
    assert len(parse_html(bound_markup(data)).find(".//div").attrib) <= MAX_ATTRIBUTES + 3


@pytest.mark.parametrize(
    "raw",
    [
        b"<script>var x = a<b " + b"t " * 300 + b";</script>",
        b"<!-- <b " + b"t " * 300 + b"-->",
        b"<style>a<b " + b"t " * 300 + b"</style>",
    ],
)
def test_tag_like_script_text_is_left_alone(raw):
    data = b"<html><body>" + raw + b"<p>after</p></body></html>"
    assert bound_markup(data) == data
    assert parse_html(data).findtext(".//p") == "after"


def test_ordinary_pages_pass_through_unchanged():
    # (benchmarks.hostile_input checks the whole shared corpus the same way.)
    attributes = " ".join(f'data-k{i}="a b c > d"' for i in range(MAX_ATTRIBUTES))
    data = (
        "<html><head><meta charset=utf-8><style>a>b{}</style></head><body>"
        f"<div {attributes}>x</div>"
        '<input type="text" value="a < b" disabled><a href="/x?a=1&b=2">link</a>'
        "<script>if (a < b && c > d) { x = '<p>' }</script></body></html>"
    ).encode()
    assert bound_markup(data) is data


# The grammar as the regular expressions the compiled scan replaced (they were too slow to run on
# every page): the scan must find what they find.
_ATTRIBUTE = (
    rb"""(?:[\s/]*+(?:[^\s/>="'<]++(?:\s*+=\s*+(?:"[^"]*+"|'[^']*+'|[^\s>]*+))?+"""
    rb"""|["'=][^\s/><]*+|<(?![/!?]?[A-Za-z])[^\s/><]*+))"""
)
_TAG_NAME = rb"<[/!?]?[A-Za-z][^\s<>/]*+"
_SMALL = 3


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from([bytes([c]) for c in b"<a= \"'/>\t\n\x0b!?x1"]), max_size=60))
def test_the_compiled_scan_reads_the_attribute_grammar(chars):
    data = b"".join(chars)
    crowded = re.compile(_TAG_NAME + rb"(?:" + _ATTRIBUTE + rb"){%d}" % (_SMALL + 1))
    for start in range(len(data) + 1):
        match = crowded.search(data, start)
        assert skeleton_walk.crowded_tag(data, start, _SMALL) == (match.start() if match else -1)
    for match in re.finditer(_TAG_NAME, data):
        cut = re.compile(rb"(?:" + _ATTRIBUTE + rb"){0,%d}" % _SMALL).match(data, match.end()).end()
        end = re.compile(rb"(?:" + _ATTRIBUTE + rb")*+").match(data, cut).end()
        assert skeleton_walk.attribute_ends(data, match.start(), _SMALL) == (cut, end)
