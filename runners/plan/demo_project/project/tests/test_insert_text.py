"""Tests of textbuffer.insert (the plan step insert_text)."""

import pytest
from textbuffer.insert import insert


def test_insert_in_the_middle():
    assert insert("helo", 3, "l") == "hello"


def test_insert_at_both_ends():
    assert insert("bc", 0, "a") == "abc"
    assert insert("ab", 2, "c") == "abc"


def test_insert_into_empty_text():
    assert insert("", 0, "text") == "text"


def test_insert_nothing():
    assert insert("same", 2, "") == "same"


@pytest.mark.parametrize("pos", [-1, 5, 100])
def test_insert_outside_the_text_raises(pos):
    with pytest.raises(IndexError):
        insert("abcd", pos, "x")
