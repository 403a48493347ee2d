"""Tests of textbuffer.delete (the plan step delete_text)."""

import pytest
from textbuffer.delete import delete


def test_delete_a_range():
    assert delete("abcdef", 1, 3) == "adef"


def test_delete_to_the_end():
    assert delete("hello world", 5, 11) == "hello"


def test_delete_from_the_start():
    assert delete("hello", 0, 1) == "ello"


def test_delete_an_empty_range():
    assert delete("same", 2, 2) == "same"


@pytest.mark.parametrize(("start", "end"), [(-1, 2), (3, 2), (0, 7)])
def test_delete_outside_the_text_raises(start, end):
    with pytest.raises(IndexError):
        delete("abcdef", start, end)
