"""Predicates over input/result/depends: values, diagnoses, compile errors and sandbox escapes."""

from __future__ import annotations

import time

import pytest

from veriloop.engines.plan.predicates import (
    MAX_EXPR_CHARS,
    PredicateError,
    compile_predicate,
    type_of,
)

DATA = {
    "input": {"city": "Tokyo", "min_items": 2},
    "result": {"city": "Tokyo", "items": [3, 1, 2], "text": "Hello World", "nested": {"a": 1}},
    "depends": {"fetch_products": {"items": [1, 2]}},
}
BIG = {
    "input": {},
    "result": {"items": list(range(2000)), "text": "a" * 50_000},
    "depends": {},
}


def evaluate(expr: str, data: dict = DATA) -> tuple[bool, str]:
    return compile_predicate(expr).evaluate(**data)


@pytest.mark.parametrize(
    "expr",
    [
        "result.city == input.city",
        'result["city"] == input["city"]',
        "len(result.items) >= len(depends.fetch_products.items)",
        "len(result['items']) >= input.min_items",
        "all(x > 0 for x in result.items) and any(x == 3 for x in result.items)",
        "sorted(result.items) == [1, 2, 3]",
        "result.text.lower().startswith('hello')",
        "'city' in result and 'missing' not in result",
        "result.get('missing') is None",
        "result.nested.a == 1 and type_of(result.nested) == 'object'",
        "true and not false and null is None",
        "sum(result.items) == 6 and max(result.items) == 3 and min(result.items) == 1",
        "{k: v for k, v in result.nested.items()} == {'a': 1}",
        "result.items[0:2] == [3, 1]",
        "str(len(result.items)) == '3'",
    ],
)
def test_true_predicates_pass(expr: str) -> None:
    assert evaluate(expr) == (True, "")


def test_false_is_a_generic_failure() -> None:
    assert evaluate("result.city == 'Paris'") == (False, "predicate returned false")


def test_a_string_is_the_diagnosis() -> None:
    expr = "True if len(result.items) >= 5 else f'Expected 5+ items, got {len(result.items)}'"
    assert evaluate(expr) == (False, "Expected 5+ items, got 3")
    assert evaluate("'wrong city: ' + result.city") == (False, "wrong city: Tokyo")


def test_an_empty_string_still_fails() -> None:
    passed, diagnosis = evaluate("''")
    assert not passed and diagnosis


@pytest.mark.parametrize("expr", ["42", "None", "[True]", "result", "len"])
def test_other_values_are_errors(expr: str) -> None:
    with pytest.raises(PredicateError, match="expected true, false or a diagnosis string"):
        evaluate(expr)


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("result.missing == 1", "no key 'missing'"),
        ("result['missing']", "no key 'missing'"),
        ("1 / 0", "ZeroDivisionError"),
        ("result.items[10] == 1", "IndexError"),
        ("result.city + 1", "TypeError"),
    ],
)
def test_runtime_errors_raise_predicate_error(expr: str, message: str) -> None:
    with pytest.raises(PredicateError, match=message):
        evaluate(expr)


@pytest.mark.parametrize(
    "expr",
    ["", "   ", "1 +", "result ==", "x = 1", "import os", "(x := 1)", "lambda: 1", "yield 1"],
)
def test_compile_errors(expr: str) -> None:
    with pytest.raises(PredicateError):
        compile_predicate(expr)


def test_predicate_error_is_a_value_error() -> None:
    assert issubclass(PredicateError, ValueError)


def test_unknown_names_are_rejected_at_compile_time() -> None:
    with pytest.raises(PredicateError, match="unknown name 'os'"):
        compile_predicate("os.system('true')")


def test_the_callers_data_is_not_changed() -> None:
    data = {"input": {}, "result": {"items": [1, 2]}, "depends": {}}
    with pytest.raises(PredicateError):
        compile_predicate("result.items.clear()").evaluate(**data)
    with pytest.raises(PredicateError):
        compile_predicate("result.update({'x': 1})").evaluate(**data)
    assert data["result"] == {"items": [1, 2]}


def test_objects_are_seen_as_plain_data() -> None:
    class Thing:
        secret = "s3cret"

    passed, _ = compile_predicate("type_of(result.obj) == 'string'").evaluate(
        input=None, result={"obj": Thing()}, depends={}
    )
    assert passed


# --- sandbox escapes and bombs: each rejected, or stopped, quickly ------------------------------

ESCAPES = [
    "__import__('os')",
    "__import__('os').system('echo pwned')",
    "().__class__.__bases__",
    "().__class__.__bases__[0].__subclasses__()",
    "result.__class__",
    "result.items.__class__.__mro__",
    "input.get.__self__",
    "result.text.__len__()",
    "str.__doc__",
    "len.__globals__",
    "getattr(result, '__class__')",
    "eval('1')",
    "open('/etc/passwd').read()",
    "type(result)",
    "result.text.format(result)",
    "'{0.__class__}'.format(1)",
    "'%s' % result",
    "f'{result.text!r:>999999999}'",
    "result.text.ljust(10**8)",
    "result.items.append(1)",
]


@pytest.mark.parametrize("expr", ESCAPES)
def test_escapes_are_rejected(expr: str) -> None:
    started = time.perf_counter()
    with pytest.raises(PredicateError):
        compile_predicate(expr).evaluate(**DATA)
    assert time.perf_counter() - started < 0.5


BOMBS = [
    "9**9**9",
    "9**9**9 == 1",
    "2**100000 > 0",
    "(10**1000)**1000 > 0",
    "10.0**10**6 > 0",
    "'a' * 10**9",
    "'a' * 100001",
    "[1] * 10**9",
    "[[1] * 1000] * 1000",
    "result.text * 1000",
    "len(result.text + result.text + result.text) > 0",
    "len([[b for b in result.items] for a in result.items]) > 0",
    "len([result.text + result.text for x in result.items]) > 0",
    "len([sorted(result.items) for x in result.items]) > 0",
    "len([1 for x in result.items if {'k': 1} in result.items]) > 0",
    "len(str([result.items for x in result.items])) > 0",
    "len(f'{[result.items for x in result.items]}') > 0",
    "(" * 200 + "1" + ")" * 200,
    "(" * 5000 + "1" + ")" * 5000,
    "[" * 100 + "]" * 100,
    "-" * 1500 + "1",
    "not " * 400 + "True",
    "+".join(["1"] * 900),
    "x" * (MAX_EXPR_CHARS + 1),
]


@pytest.mark.parametrize("expr", BOMBS, ids=lambda e: e[:40])
def test_bombs_are_rejected_or_bounded(expr: str) -> None:
    started = time.perf_counter()
    with pytest.raises(PredicateError):
        compile_predicate(expr).evaluate(**BIG)
    assert time.perf_counter() - started < 1.5


def test_the_time_limit_stops_a_long_evaluation() -> None:
    predicate = compile_predicate("all(x >= 0 for x in result.items)")
    with pytest.raises(PredicateError, match="ran out of time|budget"):
        predicate.evaluate(timeout_s=0.0, **BIG)


def test_the_time_limit_counts_cpu_time_not_a_busy_machines_wall_clock(monkeypatch) -> None:
    # Wall-clock time racing ahead (the thread waiting for a loaded machine's cores) must not fail
    # a trivial predicate: only the evaluation's own CPU time counts.
    clock = iter(range(0, 10**9, 10))
    monkeypatch.setattr(time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(clock)))
    passed, _ = compile_predicate("len(result.text) == 3").evaluate(
        input=None, result={"text": "abc"}, depends={}
    )
    assert passed is True


def test_the_operation_budget_stops_a_long_evaluation() -> None:
    predicate = compile_predicate("all(x >= 0 for x in result.items)")
    assert predicate.evaluate(**BIG) == (True, "")
    with pytest.raises(PredicateError, match="budget of 100 operations"):
        predicate.evaluate(max_cost=100, **BIG)


def test_a_compiled_predicate_is_reusable() -> None:
    predicate = compile_predicate("len(result) > 0 or 'empty result'")
    assert predicate.evaluate(input=None, result=[1], depends={}) == (True, "")
    assert predicate.evaluate(input=None, result=[], depends={}) == (False, "empty result")


def test_type_of_names_json_types() -> None:
    assert [type_of(v) for v in ({}, [], "", 1, 1.5, True, None)] == [
        "object",
        "array",
        "string",
        "number",
        "number",
        "boolean",
        "null",
    ]
