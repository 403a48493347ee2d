"""Deleting text. The plan step ``delete_text`` writes this module."""

from __future__ import annotations


def delete(text: str, start: int, end: int) -> str:
    """``text`` without the characters ``text[start:end]``.

    Requires ``0 <= start <= end <= len(text)``; anything else raises IndexError.
    """
    raise NotImplementedError("delete() is written by the plan step delete_text")
