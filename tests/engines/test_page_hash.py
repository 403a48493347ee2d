"""The DOM hash's compiled digest is XXH3-128 of the page without its ASCII whitespace."""

from __future__ import annotations

import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from veriloop.engines.page_hash import whitespace_free_digest

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
