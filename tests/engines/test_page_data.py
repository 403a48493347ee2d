"""What page text looks like once it is prompt data: ``normalise`` against its definition."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from veriloop.prompts.page_data import (
    _BRACKETS,
    _LINE_BREAKS,
    _RUN,
    PAGE_DATA_BEGIN,
    PAGE_DATA_END,
    normalise,
    page_data_lines,
)


def as_read(text: str) -> str:
    """The definition, every step on every text: NFKC, look-alike brackets, format characters, breaks."""
    text = unicodedata.normalize("NFKC", text).translate(_BRACKETS)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return _LINE_BREAKS.sub("\n", text)


@given(st.text())
def test_normalise_is_its_definition_on_any_text(text):
    assert normalise(text) == as_read(text)


# Mostly what normalise rewrites: look-alikes, format characters (some in pattern syntax's way), breaks.
_REWRITTEN = st.sampled_from(
    [*map(chr, _BRACKETS), "\u200b", "\u200d", "\u202e", "\xad", "\ufeff", "\uff1e", "\u2028"]
)


@given(st.text(alphabet=st.one_of(_REWRITTEN, st.characters(max_codepoint=0x7F), st.characters())))
def test_normalise_is_its_definition_on_text_full_of_what_it_rewrites(text):
    assert normalise(text) == as_read(text)


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_text_only_has_its_line_breaks_made_newlines(text):
    assert normalise(text) == as_read(text) == _LINE_BREAKS.sub("\n", text)


def test_look_alikes_format_characters_and_breaks():
    assert normalise("\u2039\u2039sys\u200b\u203a\u203a\r\nnext\u2028") == "<<sys>>\nnext\n"


_FENCE_BREAKERS = st.sampled_from(
    ["<", ">", " ", "\n", "\r", "\u0338", "\u200d", "PAGE_DATA", "\uff1e"]
)


_VALUE = st.lists(st.one_of(_REWRITTEN, _FENCE_BREAKERS, st.characters())).map("".join)


@given(st.lists(_VALUE))
def test_page_data_lines_keeps_one_line_per_value_and_no_delimiter_even_read_again(values):
    fenced = page_data_lines(values)
    assert fenced.startswith(PAGE_DATA_BEGIN + "\n") and fenced.endswith("\n" + PAGE_DATA_END)
    inside = fenced[len(PAGE_DATA_BEGIN) + 1 : -len(PAGE_DATA_END) - 1]
    assert len(inside.split("\n")) == max(len(values), 1)
    # A reader who normalises the text once more still finds no run of angle brackets.
    assert _RUN.search(inside) is None and _RUN.search(normalise(inside)) is None
