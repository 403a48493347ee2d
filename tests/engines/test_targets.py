"""The element an action targets, named as a person would: reports show ``click(9) "Save"``."""

from __future__ import annotations

import pytest

from veriloop.engines.targets import shorten, target_label

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
    assert target_label(PAGE, element_id) == label


def test_a_long_name_is_cut_at_a_word_with_an_ellipsis() -> None:
    label = target_label(PAGE, 8)
    assert label is not None and len(label) <= 60
    assert label.endswith("…") and label[:-1] == label[:-1].rstrip()
    assert "Export every patient record Export" in label and not label[:-1].endswith("Expo")


def test_shorten_keeps_short_text_and_closes_a_quote_it_cut() -> None:
    assert shorten("Settings saved", 40) == "Settings saved"
    cut = shorten("New message/alert appeared: '1 patient matching \"Maria\" in the records'", 50)
    assert cut == "New message/alert appeared: '1 patient matching…'"
    assert target_label("<html><body></body></html>", 1) is None
    assert target_label(None, 1) is None
