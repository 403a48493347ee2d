"""A small text buffer with insert, delete, undo and redo."""

from textbuffer.buffer import TextBuffer

__all__ = ["TextBuffer"]
