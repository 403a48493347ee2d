"""What page text looks like once it is prompt data: ``normalise`` against its definition."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from veriloop.prompts.page_data import _BRACKETS, _LINE_BREAKS, normalise


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
