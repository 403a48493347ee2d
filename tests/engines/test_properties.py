"""Property tests: extraction never raises, a skeleton never differs from itself, whitespace never moves the hash."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from veriloop.engines.observation import (
    build_observation_list,
    capture_page_state,
    compute_dom_hash,
)
from veriloop.engines.skeleton import (
    diff_skeletons,
    digits_masked,
    empty_skeleton,
    extract_semantic_skeleton,
)

TAGS = [
    "div",
    "a",
    "button",
    "input",
    "select",
    "option",
    "textarea",
    "span",
    "form",
    "p",
    "script",
    "noscript",
]
ATTRS = [
    'id="x"', 'name="n"', 'role="button"', 'role="alert"', "hidden", 'aria-hidden="true"', 'type="hidden"',
    'class="toast"', 'class="error alert"', 'aria-live="polite"', "contenteditable", 'data-veriloop-id="3"',
    'value="v"', "checked", "selected", "disabled", 'href="/p"', 'data-veriloop-hidden="1"',
]  # fmt: skip

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
start_tag = st.builds(
    lambda tag, attrs: f"<{tag} {' '.join(attrs)}>",
    st.sampled_from(TAGS),
    st.lists(st.sampled_from(ATTRS), max_size=3),
)
end_tag = st.sampled_from(TAGS).map(lambda tag: f"</{tag}>")
html_soup = st.lists(
    st.one_of(start_tag, end_tag, text, st.just("<!--"), st.just("&amp;"), st.just("<")),
    max_size=40,
).map("".join)


def is_skeleton(value: object) -> bool:
    json.dumps(value)  # JSON-serialisable
    return isinstance(value, dict) and set(value) == set(empty_skeleton())


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_extraction_never_raises_on_arbitrary_text(value):
    assert is_skeleton(extract_semantic_skeleton(value))


@settings(max_examples=150, deadline=None)
@given(st.binary())
def test_extraction_never_raises_on_arbitrary_bytes(value):
    assert is_skeleton(extract_semantic_skeleton(value))


@settings(max_examples=200, deadline=None)
@given(html_soup)
def test_extraction_never_raises_on_tag_soup_and_a_skeleton_has_no_diff_with_itself(html):
    skeleton = extract_semantic_skeleton(html)
    assert is_skeleton(skeleton)
    assert diff_skeletons(skeleton, skeleton) == []
    assert diff_skeletons(skeleton, json.loads(json.dumps(skeleton))) == []


@settings(max_examples=100, deadline=None)
@given(html_soup, html_soup)
def test_diff_is_empty_exactly_when_skeletons_are_equal(a, b):
    before, after = extract_semantic_skeleton(a), extract_semantic_skeleton(b)

    def masked(skeleton: dict, field: str) -> list[str]:
        # Page text that changed only digits is the old rule's unmarked ticker: not a change.
        return sorted(map(digits_masked, skeleton["content"][field]))

    same = (
        before["elements"] == after["elements"]
        and sorted(before["alerts"].values()) == sorted(after["alerts"].values())
        and all(masked(before, f) == masked(after, f) for f in ("headings", "texts"))
    )
    assert (diff_skeletons(before, after) == []) is same


@settings(max_examples=100, deadline=None)
@given(
    html_soup,
    st.lists(
        st.tuples(st.integers(min_value=0), st.sampled_from([" ", "\n", "\t", "\r\n  "])),
        max_size=5,
    ),
)
def test_whitespace_insertions_never_change_the_hash(html, insertions):
    spaced = html
    for position, whitespace in insertions:
        at = position % (len(spaced) + 1)
        spaced = spaced[:at] + whitespace + spaced[at:]
    assert compute_dom_hash(spaced) == compute_dom_hash(html)


@settings(max_examples=60, deadline=None)
@given(html_soup)
def test_a_page_compared_with_itself_has_no_meaningful_change(html):
    result = build_observation_list(capture_page_state("https://x/", html), html, "https://x/")
    assert not (
        result.url_changed or result.meaningful_content_change or result.client_saw_something
    )
