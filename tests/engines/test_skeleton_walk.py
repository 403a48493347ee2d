"""The compiled walk reads attribute values as UTF-8 bytes in place: what it keeps of them is what
Python's ``strip``, ``split`` and slicing make of the same value as a str."""

from __future__ import annotations

import lxml.html
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xxhash import xxh3_64_intdigest

from veriloop.engines.skeleton import BLOCK_CHARS, TEXT_CHARS, skeleton_from_tree

# Whitespace (str.isspace) of every UTF-8 length, characters that share its first bytes but are
# not whitespace, and plain text.
_SPACES = "\t\n\r \x85\xa0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000"
_NEAR = "\x80\xa1\u1681\u200b\u2030\u2060\u3001"
_spaces = st.text(alphabet=_SPACES, max_size=8)
# Padded so that cuts (20 and 40 characters) fall in the text, in its whitespace and past its end.
value = st.builds(
    lambda *parts: "".join(parts),
    _spaces,
    st.text(alphabet=_SPACES + _NEAR + "ab-/é中😀", max_size=45),
    _spaces,
)


@settings(max_examples=400, deadline=None)
@given(role=value, expanded=value, kept=value, label=value, key=value)
def test_attribute_values_are_kept_as_python_strips_and_cuts_them(role, expanded, kept, label, key):
    root = lxml.html.fromstring("<html><body><button></button></body></html>")
    button = root.find(".//button")
    for name, text in (("role", role), ("aria-expanded", expanded), ("value", kept)):
        button.set(name, text)
    button.set("aria-label", label)
    button.set("id", key)
    (got_key, desc), *_ = skeleton_from_tree(root)["elements"].items()
    for name, text, chars in (
        ("role", role, 40),
        ("aria-expanded", expanded, 20),
        ("value", kept, 100),
    ):
        assert desc.get(name) == (text.strip()[:chars] if text.strip() else None)
    assert desc["label"] == " ".join(label.split())[:TEXT_CHARS]
    assert got_key == (key or "button[0]")


def test_numbered_keys_are_written_for_names_of_every_width():
    ids = ["x", "é", "中", "😀"]
    html = "".join(f'<button id="{key}">{n}</button>' for key in ids for n in range(12))
    keys = list(skeleton_from_tree(lxml.html.fromstring(html + "<a href=x>q</a>" * 11))["elements"])
    assert keys == [*(f"{key}[{n}]" if n > 1 else key for key in ids for n in range(1, 13)),
                    *(f"a[{n}]" for n in range(11))]  # fmt: skip


def _block(text: str) -> str:
    """A page text block as the walk keeps it, by its definition in Python."""
    squashed = " ".join(text.split())
    if len(squashed) <= BLOCK_CHARS:
        return squashed
    digest = xxh3_64_intdigest(squashed.encode().translate(None, b"0123456789"))
    letters = "".join(chr(0x67 + ((digest >> (4 * n)) & 0xF)) for n in range(10))
    return f"{squashed[:BLOCK_CHARS]}…#{letters}"


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["", "lead " * 19]),  # none, or close to the cut
    st.lists(
        st.text(alphabet=_SPACES + _NEAR + "ab-/é中😀0189", max_size=90), min_size=1, max_size=4
    ),
)
def test_page_text_is_squashed_and_cut_as_python_splits_and_slices_it(lead, parts):
    # Parts in inline elements join one block; a long one is cut and digested without its digits.
    html = f"<p>{lead}" + "<b>x</b>".join(f"<span>{part}</span>" for part in parts) + "</p>"
    texts = skeleton_from_tree(lxml.html.fromstring(f"<html><body>{html}</body></html>"))
    block = _block(lead + " x ".join(parts))
    assert texts["content"]["texts"] == ([block] if block else [])


@pytest.mark.parametrize("words", [1024, 1025, 3000])  # 4,096 and 4,100 bytes, then far past
def test_a_block_longer_than_the_digests_stack_buffer_is_digested_whole(words):
    text = " ".join(f"é{n % 10}" for n in range(words))[:-1] + "\u3000z"
    html = f"<html><body><p>{text}</p></body></html>"
    changed = html.replace("z</p>", "y</p>")  # past the cut and the 4,096 bytes on the stack
    (block,) = skeleton_from_tree(lxml.html.fromstring(html))["content"]["texts"]
    assert block == _block(text)
    assert skeleton_from_tree(lxml.html.fromstring(changed))["content"]["texts"] != [block]
