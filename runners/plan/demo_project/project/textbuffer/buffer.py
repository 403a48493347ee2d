"""TextBuffer: the text, edited through insert/delete, with undo and redo of every edit."""

from __future__ import annotations

from textbuffer.delete import delete
from textbuffer.history import History
from textbuffer.insert import insert


class TextBuffer:
    """A piece of text that remembers its edits."""

    def __init__(self, text: str = "") -> None:
        self.text = text
        self._history = History()

    def insert(self, pos: int, new: str) -> str:
        """Insert ``new`` before index ``pos``; returns the new text."""
        changed = insert(self.text, pos, new)
        self._history.record(self.text)
        self.text = changed
        return self.text

    def delete(self, start: int, end: int) -> str:
        """Delete ``text[start:end]``; returns the new text."""
        changed = delete(self.text, start, end)
        self._history.record(self.text)
        self.text = changed
        return self.text

    def undo(self) -> str:
        """Go back to the text before the last edit (IndexError when there is none)."""
        self.text = self._history.undo(self.text)
        return self.text

    def redo(self) -> str:
        """Re-apply the last undone edit (IndexError when there is none)."""
        self.text = self._history.redo(self.text)
        return self.text

    def apply(self, edit: dict) -> str:
        """One edit as data: ``{"op": "insert", "pos": 0, "text": "..."}``, ``{"op": "delete",
        "start": 0, "end": 3}``, ``{"op": "undo"}`` or ``{"op": "redo"}``."""
        op = edit["op"]
        if op == "insert":
            return self.insert(edit["pos"], edit["text"])
        if op == "delete":
            return self.delete(edit["start"], edit["end"])
        if op == "undo":
            return self.undo()
        if op == "redo":
            return self.redo()
        raise ValueError(f"unknown edit {op!r}")
