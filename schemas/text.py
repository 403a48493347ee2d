"""The one place where text from outside (HTTP bodies, LangServe inputs) is made safe to store and parse.

JSON can carry code points that no UTF-8 encoder, XML tree or PostgreSQL
``jsonb`` value accepts: a lone UTF-16 surrogate (``"\\ud800"``), the
noncharacters U+FFFE and U+FFFF, NUL and the other C0 controls. Every request
model of the service cleans its strings on the way in (:func:`clean_strings`
as a ``mode="before"`` model validator), so nothing behind the boundary ever
sees them:

- lone surrogates, U+FFFE and U+FFFF become U+FFFD (the replacement character);
- C0 controls other than tab, newline and carriage return are dropped (NUL included).

Everything else (bidi controls, zero-width characters, any script) is kept:
it is legitimate page text, and the prompt fence normalises it where it matters
(``veriloop.prompts.page_data``).
"""

from __future__ import annotations

import re
from typing import Any

_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_REPLACED = re.compile("[\ud800-\udfff\ufffe\uffff]")
_DROPPED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")


def clean_text(text: str) -> str:
    """``text`` with lone surrogates and U+FFFE/U+FFFF replaced by U+FFFD and C0 controls (not tab/newlines) dropped."""
    if _UNSAFE.search(text) is None:  # the usual case: one scan, no copy of a 5 MB DOM
        return text
    return _DROPPED.sub("", _REPLACED.sub("\ufffd", text))


def clean_strings(value: Any) -> Any:
    """A copy of ``value`` (JSON data) with every string, keys included, passed through :func:`clean_text`.

    Iterative, so JSON nested as deep as the parser allowed cannot exhaust the stack here.
    """
    result: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, result, 0)]
    while stack:
        item, parent, key = stack.pop()
        if isinstance(item, str):
            item = clean_text(item)
        elif isinstance(item, dict):
            copy: dict[Any, Any] = {}
            for k, v in item.items():
                k = clean_text(k) if isinstance(k, str) else k
                copy[k] = None
                stack.append((v, copy, k))
            item = copy
        elif isinstance(item, list):
            copy_list: list[Any] = [None] * len(item)
            stack.extend((v, copy_list, i) for i, v in enumerate(item))
            item = copy_list
        parent[key] = item
    return result[0]
