"""Tests of textbuffer.history (the plan step undo_history)."""

import pytest
from textbuffer.history import History


def test_nothing_to_undo_or_redo_at_first():
    history = History()
    assert not history.can_undo and not history.can_redo
    with pytest.raises(IndexError):
        history.undo("x")
    with pytest.raises(IndexError):
        history.redo("x")


def test_undo_returns_the_states_in_reverse_order():
    history = History()
    history.record("a")
    history.record("ab")
    assert history.undo("abc") == "ab"
    assert history.undo("ab") == "a"
    assert not history.can_undo


def test_redo_reapplies_the_most_recently_undone_edit():
    history = History()
    history.record("a")
    history.record("ab")
    assert history.undo("abc") == "ab"
    assert history.undo("ab") == "a"
    assert history.redo("a") == "ab"
    assert history.redo("ab") == "abc"
    assert not history.can_redo


def test_a_new_edit_forgets_what_could_be_redone():
    history = History()
    history.record("a")
    assert history.undo("ab") == "a"
    assert history.can_redo
    history.record("a")
    assert not history.can_redo
    with pytest.raises(IndexError):
        history.redo("ax")
