"""The DOM hash's compiled digest is XXH3-128 of the page without its ASCII whitespace."""

from __future__ import annotations

import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from veriloop.engines.page_hash import utf8_and_digest, whitespace_free_digest

_WHITESPACE = b" \t\n\r\f\v"
_PIECES = st.sampled_from([b" ", b"\t", b"\n", b"\r\n", b"\f", b"\v", b"\x00", b"\x1c", b"\xa0",
                           b"<p>", b"\xc3\xa9", b"\xe2\x80\x83", b"a" * 700, b" " * 700])  # fmt: skip


def _reference(data: bytes) -> str:
    return xxhash.xxh3_128_hexdigest(data.translate(None, _WHITESPACE))


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=120), st.binary(max_size=64))
def test_the_digest_is_xxh3_of_the_bytes_without_ascii_whitespace(pieces, tail):
    # Pages of up to ~84 KB cross the 16 KB chunks at every kind of byte.
    data = b"".join(pieces) + tail
    assert whitespace_free_digest(data) == _reference(data)


def test_whitespace_alone_digests_as_nothing():
    assert whitespace_free_digest(b"") == whitespace_free_digest(b" \n" * 20_000)
    assert whitespace_free_digest(b"a b") == whitespace_free_digest(b"ab") != _reference(b"a\xa0b")


_CHARACTERS = st.sampled_from(["a", "<p>", " ", "\t", "\r\n", "\x0b", "\x00", "\x1f!", "\x7f", "é",
                               "\xa0", "\u20ac", "\u2003", "\ud800", "\udfff", "\U0001f600",
                               "abcdefgh ijklmnop", "x" * 700, " " * 700])  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_CHARACTERS, max_size=120), st.text(max_size=64))
def test_text_is_encoded_and_digested_in_one_pass_as_in_two(pieces, tail):
    # Every width of str (Latin-1, UCS-2, UCS-4; the pieces are sampled, so a list can stay within
    # one), runs of ASCII read eight at a time and broken anywhere, lone surrogates ("replace": ?).
    text = "".join(pieces) + tail
    data, digest = utf8_and_digest(text)
    assert data == text.encode("utf-8", "replace")
    assert digest == whitespace_free_digest(data)
