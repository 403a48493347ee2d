"""The plain-call reader of ``parse_action`` (a regular expression, so a verification step need not
compile its action's text) reads every action as the definition, a Python call of constants read by
``ast``, does: the same action, or an ActionParseError from both."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from veriloop.schemas.actions import (
    PROTOCOL_NAMES,
    ActionParseError,
    _parsed_by_ast,
    parse_action,
)

NAMES = [*PROTOCOL_NAMES.values(), "click2", "Click", "eval"]
numbers = st.one_of(
    st.integers(0, 10**20).map(str),
    st.sampled_from(["0", "00", "007", "1.5", "1.", ".5", "1e3", "1_000", "-1", "9" * 5000, "0.0"]),
    st.floats(0, 1e6, allow_nan=False).map(repr),
)
strings = st.builds(
    lambda quote, text: f"{quote}{text}{quote}",
    st.sampled_from(['"', "'"]),
    st.text(
        st.one_of(
            st.sampled_from(list("ab é語'\"\\\t\n\r\x00\x0c\u2028#)(,")),
            st.characters(max_codepoint=0x2FFFF),
        ),
        max_size=8,
    ),
)
argument = st.one_of(numbers, strings, st.sampled_from(["True", "None", "x", "b'x'", "[1]"]))
spaces = st.sampled_from(["", " ", "  ", "\t", "\n"])
call = st.builds(
    lambda name, args, a, b, sep: f"{a}{name}({a}{(b + ',' + sep).join(args)}{b})",
    st.sampled_from(NAMES),
    st.lists(argument, max_size=3),
    spaces,
    spaces,
    spaces,
)


def _outcome(read, text: str) -> object:
    try:
        return read(text)
    except ActionParseError:
        return ActionParseError


@settings(max_examples=500, deadline=None)
@given(call)
@example('setValue(3, "x")')
@example("click(" + "9" * 5000 + ")")
@example("wait(0.25)")
@example("click(007)")
@example("click(1_0)")
@example("wait(1.)")
@example("navigate('a\\nb')")
@example('navigate("a\u2028b")')
@example("click(" + "9" * 18 + ")")
@example('navigate("\ud800")')  # a lone surrogate: ast raised UnicodeEncodeError
def test_the_plain_reader_reads_as_the_definition(text):
    assert _outcome(parse_action, text) == _outcome(_parsed_by_ast, text.strip())


@pytest.mark.parametrize("text", ["click(12)", 'setValue(3, "a b")', "scroll('down')", "goBack()"])
def test_plain_actions_are_read_without_compiling(text, monkeypatch):
    expected = _parsed_by_ast(text)

    def refused(*args, **kwargs):
        raise AssertionError("compiled")

    monkeypatch.setattr("veriloop.schemas.actions.ast.parse", refused)
    assert parse_action(text) == expected
