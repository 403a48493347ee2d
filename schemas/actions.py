"""The typed action vocabulary and its canonical extension-protocol string form.

``click(169)``, ``setValue(12, "Jas")``, ``selectOption(7, "Red")``,
``press("Enter")`` or ``press(12, "Enter")``, ``navigate("https://...")``,
``goBack()``, ``refresh()``, ``scroll("down")`` or ``scroll(12)``, ``wait(0.5)``,
``finish()``, ``fail("reason")``. The parser is strict: anything that is not
exactly one of these forms raises :class:`ActionParseError`, never a guess.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Literal

from pydantic import Field, model_validator

from veriloop.schemas.base import WireModel

ActionKind = Literal[
    "click",
    "set_value",
    "select_option",
    "press",
    "navigate",
    "go_back",
    "refresh",
    "scroll",
    "wait",
    "finish",
    "fail",
]

# Canonical protocol name for each kind, and back.
PROTOCOL_NAMES: dict[str, str] = {
    "click": "click",
    "set_value": "setValue",
    "select_option": "selectOption",
    "press": "press",
    "navigate": "navigate",
    "go_back": "goBack",
    "refresh": "refresh",
    "scroll": "scroll",
    "wait": "wait",
    "finish": "finish",
    "fail": "fail",
}
KINDS_BY_PROTOCOL_NAME: dict[str, str] = {v: k for k, v in PROTOCOL_NAMES.items()}

ELEMENT_KINDS = frozenset({"click", "set_value", "select_option"})
TERMINAL_KINDS = frozenset({"finish", "fail"})
SCROLL_DIRECTIONS = ("up", "down", "top", "bottom")
MAX_WAIT_SECONDS = 30.0


class ActionParseError(ValueError):
    """The text is not a valid action in the extension protocol."""


class Action(WireModel):
    """One action for a client to execute."""

    kind: ActionKind
    element_id: int | None = Field(
        default=None, ge=0, description="The numbered element the action targets."
    )
    text: str | None = Field(
        default=None,
        description="Value to type, option to select, key to press, URL to open, scroll direction or failure reason.",
    )
    seconds: float | None = Field(
        default=None, ge=0, le=MAX_WAIT_SECONDS, description="Seconds to wait."
    )

    @model_validator(mode="after")
    def _check_arguments(self) -> Action:
        k = self.kind
        if k in ELEMENT_KINDS and self.element_id is None:
            raise ValueError(f"{PROTOCOL_NAMES[k]} needs an element id")
        if k in {"set_value", "select_option", "navigate", "fail"} and self.text is None:
            raise ValueError(f"{PROTOCOL_NAMES[k]} needs a text argument")
        if k == "press" and not self.text:
            raise ValueError("press needs a key name")
        if k == "scroll" and self.element_id is None and self.text not in SCROLL_DIRECTIONS:
            raise ValueError(f"scroll needs an element id or one of {SCROLL_DIRECTIONS}")
        if k == "wait" and self.seconds is None:
            raise ValueError("wait needs a number of seconds")
        return self

    @property
    def is_terminal(self) -> bool:
        """finish() and fail() end the task."""
        return self.kind in TERMINAL_KINDS

    def to_string(self) -> str:
        """The canonical protocol form, e.g. ``setValue(12, "Jas")``."""
        args: list[str] = []
        if self.element_id is not None:
            args.append(str(self.element_id))
        if self.kind == "wait":
            args.append(_format_number(self.seconds or 0.0))
        elif self.text is not None:
            args.append(json.dumps(self.text, ensure_ascii=False))
        return f"{PROTOCOL_NAMES[self.kind]}({', '.join(args)})"

    def __str__(self) -> str:
        return self.to_string()


def _format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


# The common forms, read without compiling the text (every verification step parses its action):
# a known name and at most two arguments, each a plain decimal number (of at most 18 digits: int
# refuses more than 4,300) or a quoted string without escapes, where the literal is its text.
# Anything else is read by ``ast``, the definition.
_LITERAL = r"""(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,17})?|"[^"\\\n\r\x00\ud800-\udfff]*"|'[^'\\\n\r\x00\ud800-\udfff]*'"""
_PLAIN_CALL = re.compile(
    rf"([A-Za-z]+)\([ \t]*(?:({_LITERAL})[ \t]*(?:,[ \t]*({_LITERAL})[ \t]*)?)?\)"
)


def _literal(text: str) -> int | float | str:
    if text[0] in "\"'":
        return text[1:-1]
    return float(text) if "." in text else int(text)


def parse_action(text: str) -> Action:
    """Parse one action in protocol form; raise :class:`ActionParseError` on anything else."""
    if not isinstance(text, str):
        raise ActionParseError(f"an action must be a string, got {type(text).__name__}")
    source = text.strip()
    if not source or len(source) > 10_000:
        raise ActionParseError("an action must be a non-empty string of at most 10000 characters")
    plain = _PLAIN_CALL.fullmatch(source)
    if plain and plain[1] in KINDS_BY_PROTOCOL_NAME:
        args = [_literal(arg) for arg in plain.groups()[1:] if arg is not None]
        return _build(KINDS_BY_PROTOCOL_NAME[plain[1]], plain[1], args)
    return _parsed_by_ast(source)


def _parsed_by_ast(source: str) -> Action:
    """:func:`parse_action` by its definition: a Python call of constants."""
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte or a lone surrogate
        raise ActionParseError(f"not an action call: {source[:80]!r}") from exc
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.keywords:
        raise ActionParseError(f"not an action call: {source[:80]!r}")
    kind = KINDS_BY_PROTOCOL_NAME.get(call.func.id)
    if kind is None:
        raise ActionParseError(
            f"unknown action {call.func.id!r}; expected one of {', '.join(PROTOCOL_NAMES.values())}"
        )
    args = []
    for node in call.args:
        if (
            not isinstance(node, ast.Constant)
            or isinstance(node.value, bool | bytes)
            or node.value is None
        ):
            raise ActionParseError(f"{call.func.id}: arguments must be numbers or strings")
        args.append(node.value)
    return _build(kind, call.func.id, args)


# The argument shapes each action accepts, as (types of the positional arguments) -> fields.
_SIGNATURES: dict[str, list[tuple[tuple[type, ...], tuple[str, ...]]]] = {
    "click": [((int,), ("element_id",))],
    "set_value": [((int, str), ("element_id", "text"))],
    "select_option": [((int, str), ("element_id", "text"))],
    "press": [((str,), ("text",)), ((int, str), ("element_id", "text"))],
    "navigate": [((str,), ("text",))],
    "go_back": [((), ())],
    "refresh": [((), ())],
    "scroll": [((str,), ("text",)), ((int,), ("element_id",))],
    "wait": [((float,), ("seconds",))],
    "finish": [((), ())],
    "fail": [((str,), ("text",)), ((), ())],
}


def _build(kind: str, name: str, args: list) -> Action:
    for types, fields in _SIGNATURES[kind]:
        if len(types) != len(args):
            continue
        if all(_fits(value, t) for value, t in zip(args, types, strict=True)):
            values = dict(zip(fields, args, strict=True))
            if kind == "fail" and not args:
                values["text"] = ""
            try:
                return Action(kind=kind, **values)
            except ValueError as exc:
                raise ActionParseError(f"{name}: {_first_error(exc)}") from exc
    raise ActionParseError(f"{name}: wrong arguments {args!r}")


def _fits(value: object, expected: type) -> bool:
    if expected is float:
        return isinstance(value, int | float)
    return isinstance(value, expected)


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        return str(first.get("msg", exc))
    return str(exc)
