"""The compiled identity text writes what the Python definition writes, byte for byte
(fingerprints are digests of it), and leaves shapes it does not know to that definition."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veriloop.engines import skeleton_identity
from veriloop.engines.skeleton import (
    BACKGROUND_FIELD,
    _unmarked,
    extract_semantic_skeleton,
    page_identity,
    written_identity,
)

# Text with what json escapes: quotes, backslashes, control characters, DEL, non-ASCII, astral
# characters (surrogate pairs), lone surrogates, digits (masked in page text).
_TEXT = st.text(
    st.one_of(
        st.sampled_from('09"\\\n\r\t\b\f\x00\x1f\x7f é€😀\ud800\udfff'),
        st.characters(codec=None),
    ),
    max_size=12,
)
_SCALAR = st.one_of(_TEXT, st.booleans(), st.none(), st.integers(-(2**70), 2**70))
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=12,
)
_DESCRIPTOR = st.dictionaries(
    st.one_of(st.sampled_from(["tag", "text", "href", "label", BACKGROUND_FIELD]), _TEXT),
    _VALUE,
    max_size=5,
)
_SKELETON = st.fixed_dictionaries(
    {},
    optional={
        "elements": st.one_of(st.dictionaries(_TEXT, _DESCRIPTOR, max_size=5), _VALUE),
        "alerts": st.one_of(st.dictionaries(_TEXT, _TEXT, max_size=3), _VALUE),
        "content": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "headings": st.lists(st.one_of(_TEXT, _SCALAR), max_size=4),
                    "texts": st.one_of(st.lists(_TEXT, max_size=4), _VALUE),
                    "truncated": st.booleans(),
                },
            ),
            _VALUE,
        ),
        "background": _VALUE,
        "scroll": _VALUE,
    },
)


@settings(max_examples=1500, deadline=None)
@given(_SKELETON)
def test_the_compiled_identity_writes_the_python_definition(skeleton):
    try:
        expected = written_identity(skeleton)
    except (TypeError, AttributeError) as failed:  # e.g. page text that is not iterable
        with pytest.raises(type(failed)):
            page_identity(skeleton)
        return
    try:
        written = skeleton_identity.identity(skeleton, BACKGROUND_FIELD, _unmarked)
    except skeleton_identity.Unusual:
        pass
    else:
        assert written.decode("ascii") == expected
    assert page_identity(skeleton) == expected


def test_a_real_page_is_written_by_the_compiled_identity(page):
    skeleton = extract_semantic_skeleton(
        page(button="Save 2", alert="Saved", quote="Measured at 10:42.")
    )
    assert skeleton["elements"] and skeleton["content"]["texts"]
    written = skeleton_identity.identity(skeleton, BACKGROUND_FIELD, _unmarked)
    assert written.decode("ascii") == written_identity(skeleton)
    assert b"10:42" not in written  # page text without its digits


@pytest.mark.parametrize(
    "skeleton",
    [
        {"elements": {"a": {"tag": "a", "n": 1.5}}},  # a float: json's repr, not ours
        {"elements": {1: {"tag": "a"}}},  # a key that is not text
        {"content": {"texts": ("a", "b")}},  # page text that is not a list
        {"alerts": {"0": ("x",)}},  # a tuple, which json writes as a list
    ],
)
def test_shapes_the_skeleton_module_does_not_make_are_left_to_python(skeleton):
    with pytest.raises(skeleton_identity.Unusual):
        skeleton_identity.identity(skeleton, BACKGROUND_FIELD, _unmarked)
    assert page_identity(skeleton) == written_identity(skeleton)
