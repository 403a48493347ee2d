"""Inserting text. The plan step ``insert_text`` writes this module."""

from __future__ import annotations


def insert(text: str, pos: int, new: str) -> str:
    """``text`` with ``new`` inserted before index ``pos``.

    Requires ``0 <= pos <= len(text)``; any other ``pos`` raises IndexError.
    """
    raise NotImplementedError("insert() is written by the plan step insert_text")
