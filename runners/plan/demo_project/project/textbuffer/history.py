"""Undo and redo. The plan step ``undo_history`` writes this module."""

from __future__ import annotations


class History:
    """The states of a text before each edit, for undo, and the undone ones, for redo.

    ``record(state)`` is called with the text *before* each edit and forgets everything that could
    be redone. ``undo(current)`` returns the text before the last edit and keeps ``current`` for
    redo; ``redo(current)`` returns the text of the most recently undone edit and keeps ``current``
    for undo. Both raise IndexError when there is nothing to undo or redo.
    """

    def record(self, state: str) -> None:
        raise NotImplementedError("History is written by the plan step undo_history")

    def undo(self, current: str) -> str:
        raise NotImplementedError("History is written by the plan step undo_history")

    def redo(self, current: str) -> str:
        raise NotImplementedError("History is written by the plan step undo_history")

    @property
    def can_undo(self) -> bool:
        raise NotImplementedError("History is written by the plan step undo_history")

    @property
    def can_redo(self) -> bool:
        raise NotImplementedError("History is written by the plan step undo_history")
