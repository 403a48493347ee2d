"""The one place where text from outside (HTTP bodies, LangServe inputs) is made safe to store and parse.

JSON can carry code points that no UTF-8 encoder, XML tree or PostgreSQL
``jsonb`` value accepts: a lone UTF-16 surrogate (``"\\ud800"``), the
noncharacters U+FFFE and U+FFFF, NUL and the other C0 controls. Every request
model of the service cleans its strings on the way in (:func:`clean_strings`
as a ``mode="before"`` model validator), so nothing behind the boundary ever
sees them:

- lone surrogates, U+FFFE and U+FFFF become U+FFFD (the replacement character);
- C0 controls other than tab, newline and carriage return are dropped (NUL included).

The service's routes read a JSON body with :func:`parse_json_body`, which skips the cleaning for a
body that cannot carry any of them.

Everything else (bidi controls, zero-width characters, any script) is kept:
it is legitimate page text, and the prompt fence normalises it where it matters
(``veriloop.prompts.page_data``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic_core import from_json

from veriloop.schemas.json_marks import may_need_cleaning

_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_REPLACED = re.compile("[\ud800-\udfff\ufffe\uffff]")
_DROPPED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")


def clean_text(text: str) -> str:
    """``text`` with lone surrogates and U+FFFE/U+FFFF replaced by U+FFFD and C0 controls (not tab/newlines) dropped."""
    if _UNSAFE.search(text) is None:  # the usual case: one scan, no copy of a 5 MB DOM
        return text
    return _DROPPED.sub("", _REPLACED.sub("\ufffd", text))


class CleanJSON(dict):
    """A JSON object parsed from a body that cannot carry anything :func:`clean_text` changes
    (:func:`parse_json_body`): :func:`clean_strings` returns it as it is."""


def parse_json_body(body: bytes) -> Any:
    """A request body's JSON, parsed the fast way when it cannot need cleaning.

    One compiled pass (:func:`~veriloop.schemas.json_marks.may_need_cleaning`) looks for the
    escapes and bytes that can carry a C0 control, U+FFFE or U+FFFF; lone surrogates need no
    search, because pydantic's JSON parser refuses them. A body without any (the body of every
    corpus page, with its text escaped or not) is parsed by that parser, and its strings are
    left as they are: scanning a large page's text for what cannot be in it cost more than
    parsing it. Any other body, and any body that parser refuses, goes through ``json.loads``
    and is cleaned by the request model, with ``json.loads``'s error for malformed JSON.
    """
    if not may_need_cleaning(body):
        try:
            data = from_json(body)
        except ValueError:
            pass
        else:
            return CleanJSON(data) if isinstance(data, dict) else data
    return json.loads(body)


def clean_strings(value: Any) -> Any:
    """A copy of ``value`` (JSON data) with every string, keys included, passed through :func:`clean_text`.

    Iterative, so JSON nested as deep as the parser allowed cannot exhaust the stack here.
    """
    if isinstance(value, CleanJSON):
        return value
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
