"""Request bodies: the fast parse of a body that needs no cleaning gives what the standard way gives."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veriloop.schemas.api import InteractRequest
from veriloop.schemas.text import CleanJSON, clean_strings, parse_json_body
from veriloop.server.app import PageBodyRoute, create_app
from veriloop.server.settings import Settings

# What cleaning changes or keeps on purpose, mixed into ordinary text.
SPECIAL = ["\ud800", "\udfff", "\ufffe", "\uffff", "\ufffd", "\x00", "\x1f", "\t", "é", "\\", '"']
TEXT = st.text(st.one_of(st.characters(), st.sampled_from(SPECIAL)), max_size=30)


def body_of(value: object, ascii_only: bool) -> bytes:
    # A browser's JSON.stringify writes non-ASCII as UTF-8 and escapes only controls and lone
    # surrogates; Python clients often escape every non-ASCII character.
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@given(st.dictionaries(TEXT, st.one_of(TEXT, st.lists(TEXT, max_size=3))), st.booleans())
def test_the_fast_parse_gives_what_parsing_and_cleaning_give(value, ascii_only):
    body = body_of(value, ascii_only)
    standard = clean_strings(json.loads(body))
    parsed = parse_json_body(body)
    assert clean_strings(parsed) == standard
    if isinstance(parsed, CleanJSON):  # returned as it is: it must have needed no cleaning
        assert json.loads(body) == standard


@pytest.mark.parametrize("ascii_only", [False, True], ids=["utf-8", "escaped"])
def test_a_page_takes_the_fast_parse_whether_its_text_is_escaped_or_not(ascii_only):
    # Tabs, newlines, quotes, backslashes (also before a "b"), emoji as surrogate pairs: all fine.
    page = '<p class="x">Größe:\t42 € 😀</p>\n<script>/\\bword\\b/</script>' * 1000
    body = body_of({"url": "https://shop.test/", "dom": page}, ascii_only)
    parsed = parse_json_body(body)
    assert isinstance(parsed, CleanJSON) and clean_strings(parsed) is parsed
    assert InteractRequest.model_validate(parsed).dom == page


@pytest.mark.parametrize(
    "body",
    [
        b'{"dom": "a\\u0001b"}',  # a control character, escaped
        b'{"dom": "a\\bb"}',  # a backspace, escaped the short way
        b'{"dom": "a\\u001Fb"}',
        b'{"dom": "a\\uFfFeb"}',  # a noncharacter, escaped
        b'{"dom": "a\\ud800b"}',  # a lone surrogate, escaped
        '{"dom": "a\ufffeb"}'.encode(),  # a noncharacter, as UTF-8
    ],
)
def test_a_body_that_may_need_cleaning_is_parsed_and_cleaned_the_standard_way(body):
    parsed = parse_json_body(body)
    assert not isinstance(parsed, CleanJSON)
    assert clean_strings(parsed)["dom"] in {"ab", "a\ufffdb"}


@pytest.mark.parametrize("body", [b'{"dom": "a\x01b"}', b'{"dom": 1,}', b"\xff{}"])
def test_malformed_json_gets_the_standard_parser_error(body):
    with pytest.raises(ValueError) as fast:
        parse_json_body(body)
    with pytest.raises(ValueError) as standard:
        json.loads(body)
    assert type(fast.value) is type(standard.value) and str(fast.value) == str(standard.value)


def test_the_interact_route_reads_its_body_the_fast_way():
    app = create_app(Settings())
    (route,) = [r for r in app.routes if getattr(r, "path", None) == "/api/agent/interact"]
    assert isinstance(route, PageBodyRoute)
