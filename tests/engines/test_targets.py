"""The element an action targets, named as a person would: reports show ``click(9) "Save"``.

The names come from the page's one parse (its compact page), as a step's page work makes it."""

from __future__ import annotations

import pytest

from veriloop.engines.dom_context import read_compact_page
from veriloop.engines.observation import stored_page_state
from veriloop.engines.targets import shorten
from veriloop.engines.verification import observe_page

PAGE = """<html><body>
<label for="name">Full name</label><input id="name" data-veriloop-id="1" placeholder="e.g. Jas">
<button data-veriloop-id="2"> Save
  <span>patient</span></button>
<button data-veriloop-id="3" aria-label="Close dialog">x</button>
<input data-veriloop-id="4" placeholder="Search by name">
<input data-veriloop-id="6" name="q">
<div data-veriloop-id="7"></div>
<button data-veriloop-id="8">{long}</button>
</body></html>""".format(long="Export every patient record " * 5)


@pytest.mark.parametrize(
    ("element_id", "label"),
    [
        (1, "Full name"),  # its <label for>, before its placeholder
        (2, "Save patient"),  # its text, whitespace collapsed
        (3, "Close dialog"),  # aria-label beats the text
        (4, "Search by name"),
        (6, "q"),  # nothing better than its name
        (7, None),  # nothing to call it
        (99, None),  # not on the page
        (None, None),  # finish(), navigate(...): no element
    ],
)
def test_target_label(element_id: int | None, label: str | None) -> None:
    assert read_compact_page(PAGE).target(element_id) == label


def test_the_step_that_reads_the_page_names_its_elements() -> None:
    """The first page and every verified page are named by the parse that made their skeleton."""
    _, first = stored_page_state("https://a.test/", PAGE, None)
    observed, _ = observe_page(
        {"url": "https://a.test/", "dom_hash": "0"}, PAGE, "https://a.test/", None, None, "click(2)"
    )
    for page in (first, observed.compact_page):
        assert page is not None
        assert [page.target(n) for n in (1, 2, 3, 7)] == [
            "Full name",
            "Save patient",
            "Close dialog",
            None,
        ]


def test_names_read_hidden_elements_fields_and_labels_that_come_later() -> None:
    page = read_compact_page(
        """<html><head><script>var x = 1;</script></head><body>
        <div hidden><a data-veriloop-id="1" href="/x"> Hidden\n  link </a></div>
        <input id="e" data-veriloop-id="2" value="typed">
        <textarea data-veriloop-id="3" title="Notes">draft text</textarea>
        <button data-veriloop-id="4">Go<script>ignored()</script><style>b{}</style> now</button>
        <button data-veriloop-id="4">Second with the same number</button>
        <label for="e"> Your   e-mail </label> after the label
        <select data-veriloop-id="5" name="country"><option>Chile</option></select>
        </body></html>"""
    )
    assert [page.target(n) for n in range(1, 6)] == [
        "Hidden link",  # a hidden element still has its name
        "Your e-mail",  # its label, found after it; the label's tail is not its text
        "Notes",  # a field's text is not its name
        "Go now",  # the first with the number; no script or style text
        "country",
    ]


def test_a_long_name_is_cut_at_a_word_with_an_ellipsis() -> None:
    label = read_compact_page(PAGE).target(8)
    assert label is not None and len(label) <= 60
    assert label.endswith("…") and label[:-1] == label[:-1].rstrip()
    assert "Export every patient record Export" in label and not label[:-1].endswith("Expo")


def test_shorten_keeps_short_text_and_closes_a_quote_it_cut() -> None:
    assert shorten("Settings saved", 40) == "Settings saved"
    cut = shorten("New message/alert appeared: '1 patient matching \"Maria\" in the records'", 50)
    assert cut == "New message/alert appeared: '1 patient matching…'"
    assert read_compact_page("<html><body></body></html>").target(1) is None
    assert read_compact_page("").target(1) is None
