"""Predicates: a sandboxed expression over a step's ``input``, ``result`` and ``depends``.

A predicate is one Python-syntax expression (no statements, imports, lambdas or assignments). It
sees three names, each a plain JSON-like copy (dicts, lists, strings, numbers, booleans, None):

* ``input``: the step's input;
* ``result``: the step's output;
* ``depends``: ``{dependency step id: its result}``.

It answers ``True`` (passed), ``False`` (failed, "predicate returned false") or a string (failed,
the string is the diagnosis that goes to people and into the corrective prompt)::

    result["city"] == input["city"]
    len(result.items) >= len(depends.fetch_products.items)
    True if len(result.items) >= 5 else f"expected 5+ items, got {len(result.items)}"

``x.key`` reads a dict key like ``x["key"]``; a key the value does not have is an error, not None
(use ``x.get("key")`` or ``"key" in x``). Functions: ``len min max sum abs round any all sorted str
int float bool list set type_of`` (``type_of`` answers "object", "array", "string", "number",
"boolean" or "null"), and a few read-only methods of strings (``lower``, ``startswith``, ``split``...),
dicts (``get``, ``keys``, ``values``, ``items``) and lists (``count``, ``index``). Comprehensions
and generator expressions work; ``true``, ``false`` and ``null`` are accepted as JSON spellings.

:func:`compile_predicate` rejects, before any step runs, an expression that does not parse, is too
long or too deeply nested, uses a construct outside the language (import, lambda, walrus, set
comprehensions, format specs), a name other than the three inputs, the functions and comprehension
variables, or any attribute that starts with ``_``. :meth:`Predicate.evaluate` then runs under a
cost budget: every evaluated node costs one unit and every operation on a sized value (comparison,
``in``, concatenation, repetition, slicing, conversion to text, a function or method call) costs
its size, so that a single C-level operation cannot outrun the limit; the budget
(:data:`MAX_COST`) and a CPU-time deadline (:data:`DEFAULT_TIMEOUT_S`) end the evaluation with a
:class:`PredicateError`. Integers are capped at :data:`MAX_INT_BITS` bits, strings and repetitions
at 100,000 characters or items, comprehensions at 10,000 iterations per evaluation.

Why simpleeval, not CEL. All three candidates were installed and tried on the same predicates and
the same attacks. All three parse the natural predicates above (CEL spells them
``size(result.items) > 5 ? true : 'expected ...'``) and all three reject ``__import__('os')``,
``().__class__.__bases__``-style attribute chains and string repetition (CEL has no
``string * int``). They differ in bounding the run. The Rust CEL bindings
(``common-expression-language`` 0.10) evaluate holding the GIL, with no cost limit: a nested
comprehension over a 2,000-item result (``a.map(x, a.map(y, a.exists(z, z < 0))) ...``, 8e9 steps)
froze the whole interpreter (a watchdog thread never ran, ``join(timeout=3)`` never returned)
until the process was killed after 20 s, so a CEL predicate could only be bounded in a separate
process. ``cel-python`` 0.5 is pure Python (other threads keep running) but cannot be cancelled
either and was still evaluating the same expression after 5 s; it needed 272 ms to fail with a
RecursionError on 3,000 nested parentheses, took 0.5-12 ms per evaluation (Rust bindings
0.2-1.7 ms, simpleeval 0.1-0.2 ms), and brings lark, pendulum, google-re2 and jmespath.
simpleeval 1.0 rejects dunder attributes, ``9**9**9`` (NumberTooHigh), ``'a' * 10**9``
(IterableTooLong) and deep nesting (SyntaxError) out of the box, and as a small tree-walking
interpreter in Python it lets this module charge a cost on every node and every sized operation:
the in-process bound CEL could not give. Its own gaps, found in the same trial, are closed here:
``9**4000000`` passed its exponent check and took 2 s (integers are capped by size instead),
``'a'.ljust(10**8)`` built a 100 MB string (only a whitelist of read-only methods is reachable),
and it re-walks every container value after every node (skipped: values are plain JSON copies).
Python expression syntax is also what the authors of manifests, people and models, already write
most reliably.
"""

from __future__ import annotations

import ast
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import simpleeval

MAX_EXPR_CHARS = 2000
"""Longest predicate source accepted."""
MAX_DEPTH = 32
"""Deepest nesting of the expression tree accepted."""
MAX_NODES = 400
"""Most syntax nodes in one predicate."""
MAX_COST = 1_000_000
"""Cost units one evaluation may spend (one per node, plus the size of every sized operation)."""
DEFAULT_TIMEOUT_S = 1.0
"""CPU-time limit of one evaluation, on its own thread: time spent waiting for a busy machine's
cores does not count, so a trivial predicate cannot fail a correct step under load."""
MAX_INT_BITS = 4096
"""Largest integer a predicate may compute."""
MAX_TEXT = simpleeval.MAX_STRING_LENGTH
"""Longest string (or repeated sequence) a predicate may build."""
NAMES = ("input", "result", "depends")
CONSTANTS: dict[str, Any] = {
    "True": True,
    "False": False,
    "None": None,
    "true": True,
    "false": False,
    "null": None,
}

_STR_METHODS = frozenset(
    {
        "lower",
        "upper",
        "strip",
        "lstrip",
        "rstrip",
        "startswith",
        "endswith",
        "split",
        "splitlines",
        "count",
        "find",
        "rfind",
        "isdigit",
        "isalpha",
        "isalnum",
        "isspace",
        "islower",
        "isupper",
        "isnumeric",
        "title",
        "capitalize",
        "casefold",
    }
)
_DICT_METHODS = frozenset({"get", "keys", "values", "items"})
_LIST_METHODS = frozenset({"count", "index"})

_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.Compare,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.In,
    ast.NotIn,
    ast.Is,
    ast.IsNot,
    ast.IfExp,
    ast.Call,
    ast.keyword,
    ast.Name,
    ast.Load,
    ast.Store,
    ast.Constant,
    ast.Attribute,
    ast.Subscript,
    ast.Slice,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.GeneratorExp,
    ast.DictComp,
    ast.comprehension,
    ast.JoinedStr,
    ast.FormattedValue,
    ast.Starred,
)
_ALLOWED_TYPES = frozenset(_ALLOWED_NODES)
"""The same, for a lookup by a node's exact type."""


class PredicateError(ValueError):
    """A predicate that does not compile, fails at run time, exceeds its budget or returns a
    value that is neither a bool nor a string."""


class _BudgetExceeded(Exception):
    pass


@dataclass(frozen=True)
class Predicate:
    """A compiled predicate; :meth:`evaluate` it as often as needed."""

    expr: str
    _tree: ast.expr = field(repr=False, compare=False)

    def evaluate(
        self,
        *,
        input: Any,
        result: Any,
        depends: Mapping[str, Any],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_cost: int = MAX_COST,
    ) -> tuple[bool, str]:
        """``(passed, diagnosis)``: ``(True, "")``, ``(False, "predicate returned false")`` or
        ``(False, <the string it returned>)``. Raises PredicateError for a runtime error, an
        exhausted budget or any other kind of value."""
        names = {
            **CONSTANTS,
            "input": _plain(input),
            "result": _plain(result),
            "depends": _plain(dict(depends)),
        }
        sandbox = _Sandbox(names, max_cost=max_cost, deadline=time.thread_time() + timeout_s)
        try:
            value = sandbox.run(self.expr, self._tree)
        except _BudgetExceeded as exc:
            raise PredicateError(f"predicate {self.expr!r} {exc}") from None
        except PredicateError:
            raise
        except Exception as exc:  # the expression's own failure: KeyError, TypeError, ...
            raise PredicateError(f"predicate {self.expr!r} failed: {_describe(exc)}") from None
        if value is True:
            return True, ""
        if value is False:
            return False, "predicate returned false"
        if isinstance(value, str):
            return False, value if value.strip() else "predicate returned an empty string"
        raise PredicateError(
            f"predicate {self.expr!r} returned {type_of(value)} {_short(value)}; "
            "expected true, false or a diagnosis string"
        )


def compile_predicate(expr: str) -> Predicate:
    """Parse and check ``expr``; PredicateError says why it is not a valid predicate."""
    if not isinstance(expr, str) or not expr.strip():
        raise PredicateError("a predicate needs a non-empty expression")
    source = expr.strip()
    if len(source) > MAX_EXPR_CHARS:
        raise PredicateError(
            f"predicate is {len(source)} characters long; at most {MAX_EXPR_CHARS} are accepted"
        )
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise PredicateError(f"predicate {source!r} does not parse: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise PredicateError(f"predicate {source!r} does not parse: {_describe(exc)}") from None
    _check_tree(source, tree)
    return Predicate(source, tree.body)


def type_of(value: Any) -> str:
    """JSON type name of a value: object, array, string, number, boolean or null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple | set | frozenset):
        return "array"
    return type(value).__name__


# --- compile-time checks ---------------------------------------------------------------------


def _check_tree(source: str, tree: ast.Expression) -> None:
    known = _KNOWN_NAMES
    if "for" in source:  # only a comprehension binds names, and it needs the keyword
        known = known | {
            target.id
            for node in ast.walk(tree)
            if isinstance(node, ast.comprehension)
            for target in ast.walk(node.target)
            if isinstance(target, ast.Name)
        }
    count = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise PredicateError(f"predicate {source!r} is too large (more than {MAX_NODES} nodes)")
        if depth > MAX_DEPTH:
            raise PredicateError(
                f"predicate {source!r} is nested too deeply (more than {MAX_DEPTH} levels)"
            )
        # One type test a node, not one isinstance a rule: ast.parse builds the exact classes.
        kind = type(node)
        if kind not in _ALLOWED_TYPES:
            raise PredicateError(
                f"predicate {source!r} uses {kind.__name__}, which predicates do not allow"
            )
        if kind is ast.Name and node.id not in known:
            raise PredicateError(
                f"predicate {source!r} uses unknown name {node.id!r}; it can read "
                f"{', '.join(NAMES)} and call {', '.join(sorted(_FUNCTION_NAMES))}"
            )
        elif kind is ast.Attribute and node.attr.startswith("_"):
            raise PredicateError(
                f"predicate {source!r} reads attribute {node.attr!r}; names starting with _ are not allowed"
            )
        elif kind is ast.Call and not (
            isinstance(node.func, ast.Attribute)
            or (isinstance(node.func, ast.Name) and node.func.id in _FUNCTION_NAMES)
        ):
            raise PredicateError(
                f"predicate {source!r} calls something that is not one of its functions"
            )
        elif kind is ast.FormattedValue and node.format_spec is not None:
            raise PredicateError(f"predicate {source!r} uses a format spec, which is not allowed")
        elif kind is ast.Constant and not isinstance(
            node.value, str | int | float | bool | type(None)
        ):
            raise PredicateError(
                f"predicate {source!r} uses a {type(node.value).__name__} literal, which is not allowed"
            )
        # ast.iter_child_nodes inlined (same order): its generators were most of a compile's time.
        depth += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        stack.append((item, depth))
            elif isinstance(value, ast.AST):
                stack.append((value, depth))


# --- run time ----------------------------------------------------------------------------------


class _Sandbox(simpleeval.EvalWithCompoundTypes):
    """simpleeval with a cost budget, plain-data attribute access and size-charged operations."""

    def __init__(self, names: dict[str, Any], *, max_cost: int, deadline: float) -> None:
        self._cost = 0
        self._max_cost = max_cost
        self._deadline = deadline
        super().__init__(operators=self._operators(), functions={}, names=names)
        # The parent adds list/tuple/dict/set; only ours are offered.
        self.functions = self._functions()

    def run(self, expr: str, tree: ast.expr) -> Any:
        return self.eval(expr, previously_parsed=tree)

    def charge(self, units: int) -> None:
        self._cost += units
        if self._cost > self._max_cost:
            raise _BudgetExceeded(f"exceeded its budget of {self._max_cost} operations")
        if time.thread_time() > self._deadline:
            raise _BudgetExceeded("ran out of time")

    # Every node costs one unit. The parent also re-walks every container result looking for
    # modules and forbidden functions; values here are plain JSON copies and only our functions
    # are reachable, so that walk (quadratic on large data) is skipped.
    def _eval(self, node: ast.AST) -> Any:
        self.charge(1)
        handler = self.nodes.get(type(node))
        if handler is None:
            raise simpleeval.FeatureNotAvailable(f"{type(node).__name__} is not available")
        return handler(node)

    def _eval_attribute(self, node: ast.Attribute) -> Any:
        if node.attr.startswith("_"):
            raise simpleeval.FeatureNotAvailable(f"attribute {node.attr!r} is not available")
        value = self._eval(node.value)
        if isinstance(value, Mapping):
            if node.attr in value:
                return value[node.attr]
            if node.attr in _DICT_METHODS:
                return self._method(value, node.attr)
            raise KeyError(node.attr)
        allowed = (
            _STR_METHODS
            if isinstance(value, str)
            else _LIST_METHODS
            if isinstance(value, list | tuple)
            else frozenset()
        )
        if node.attr in allowed:
            return self._method(value, node.attr)
        raise simpleeval.FeatureNotAvailable(
            f"{type_of(value)} has no attribute or method {node.attr!r} a predicate may use"
        )

    def _method(self, owner: Any, name: str) -> Callable[..., Any]:
        bound = getattr(owner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.charge(_size(owner) + sum(_size(a) for a in args))
            return bound(*args, **kwargs)

        return call

    def _eval_subscript(self, node: ast.Subscript) -> Any:
        container = self._eval(node.value)
        key = self._eval(node.slice)
        if isinstance(key, slice):
            self.charge(_size(container))
        return container[key]

    def _eval_joinedstr(self, node: ast.JoinedStr) -> str:
        parts = []
        length = 0
        for value in node.values:
            text = value.value if isinstance(value, ast.Constant) else self._text(self._eval(value))
            length += len(text)
            if length > MAX_TEXT:
                raise simpleeval.IterableTooLong("f-string result is too long")
            parts.append(text)
        return "".join(parts)

    def _eval_formattedvalue(self, node: ast.FormattedValue) -> Any:
        return self._eval(node.value)

    def _text(self, value: Any) -> str:
        """str() of a value, charged and capped before any large text is built."""
        if isinstance(value, str):
            return value
        budget = [MAX_TEXT]

        def measure(item: Any) -> None:
            self.charge(1)
            if isinstance(item, str):
                budget[0] -= len(item) + 4
            elif isinstance(item, Mapping):
                budget[0] -= 2
                for key, sub in item.items():
                    measure(key)
                    measure(sub)
            elif isinstance(item, list | tuple | set | frozenset):
                budget[0] -= 2
                for sub in item:
                    measure(sub)
            else:
                budget[0] -= 24
            if budget[0] < 0:
                raise simpleeval.IterableTooLong("text of this value is too long")

        measure(value)
        return str(value)

    # --- operators and functions, each charged by the size it touches

    def _operators(self) -> dict[type, Callable[..., Any]]:
        def sized(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
            def op(a: Any, b: Any) -> Any:
                self.charge(_size(a) + _size(b))
                return fn(a, b)

            return op

        def add(a: Any, b: Any) -> Any:
            self.charge(_size(a) + _size(b))
            if _sized(a) and _sized(b) and len(a) + len(b) > MAX_TEXT:
                raise simpleeval.IterableTooLong("concatenation result is too long")
            return a + b

        def mult(a: Any, b: Any) -> Any:
            if _sized(b) and isinstance(a, int):
                a, b = b, a
            if _sized(a) and isinstance(b, int):
                if len(a) * max(b, 0) > MAX_TEXT:
                    raise simpleeval.IterableTooLong("repetition result is too long")
                if not isinstance(a, str) and any(_sized(item) for item in a):
                    raise simpleeval.FeatureNotAvailable("only strings and flat lists repeat")
                self.charge(len(a) * max(b, 0))
            elif _is_int(a) and _is_int(b) and a.bit_length() + b.bit_length() > MAX_INT_BITS:
                raise simpleeval.NumberTooHigh("product is too large")
            return a * b

        def power(a: Any, b: Any) -> Any:
            if (
                _is_int(a)
                and _is_int(b)
                and b > 0
                and abs(a) > 1
                and b * abs(a).bit_length() > MAX_INT_BITS
            ):
                raise simpleeval.NumberTooHigh(f"{a} ** {b} is too large")
            if isinstance(a, float) or isinstance(b, float):
                if abs(a) > 1 and abs(b) > 1 and abs(b) * math.log2(abs(a)) > 1024:
                    raise simpleeval.NumberTooHigh(f"{a} ** {b} is too large")
            return a**b

        def contains(container: Any, item: Any) -> bool:
            self.charge(_size(container) + _size(item))
            return item in container

        def mod(a: Any, b: Any) -> Any:
            if isinstance(a, str):  # no printf-style formatting: % on text is a format bomb
                raise simpleeval.FeatureNotAvailable("% formatting of text is not available")
            return a % b

        ops = dict(simpleeval.DEFAULT_OPERATORS)
        for kind in (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Sub):
            ops[kind] = sized(ops[kind])
        for kind in (ast.LShift, ast.RShift, ast.BitXor, ast.BitOr, ast.BitAnd, ast.Invert):
            ops.pop(kind, None)
        ops[ast.Add] = add
        ops[ast.Mult] = mult
        ops[ast.Pow] = power
        ops[ast.Mod] = mod
        ops[ast.In] = lambda a, b: contains(b, a)
        ops[ast.NotIn] = lambda a, b: not contains(b, a)
        return ops

    def _functions(self) -> dict[str, Callable[..., Any]]:
        def charged(fn: Callable[..., Any]) -> Callable[..., Any]:
            def call(*args: Any, **kwargs: Any) -> Any:
                self.charge(sum(_size(a) for a in args))
                return fn(*args, **kwargs)

            return call

        functions = {name: charged(fn) for name, fn in _PURE_FUNCTIONS.items()}
        functions["str"] = lambda value="": self._text(value)
        return functions


_PURE_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "len": len,
    "min": min,
    "max": max,
    "sum": sum,
    "abs": abs,
    "round": round,
    "any": any,
    "all": all,
    "sorted": sorted,
    "int": int,
    "float": float,
    "bool": bool,
    "list": list,
    "set": set,
    "type_of": type_of,
}
_FUNCTION_NAMES = frozenset(_PURE_FUNCTIONS) | {"str"}
_KNOWN_NAMES = frozenset(NAMES) | frozenset(CONSTANTS) | _FUNCTION_NAMES
"""The names any predicate may use (a comprehension adds its own)."""


def _sized(value: Any) -> bool:
    return isinstance(value, str | list | tuple | dict | set | frozenset)


def _size(value: Any) -> int:
    if _sized(value):
        return len(value)
    if _is_int(value):
        return value.bit_length() // 64
    return 0


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _plain(value: Any) -> Any:
    """A JSON-like deep copy: the predicate can neither reach objects nor change the caller's data."""

    def default(obj: Any) -> Any:
        dump = getattr(obj, "model_dump", None)
        if callable(dump):
            return dump(mode="json")
        if isinstance(obj, set | frozenset | tuple):
            return list(obj)
        return str(obj)

    try:
        return json.loads(json.dumps(value, default=default))
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"no key {exc.args[0]!r}" if exc.args else "missing key"
    if isinstance(exc, simpleeval.InvalidExpression):
        message = str(exc).split(", for expression", 1)[0]
        return message or type(exc).__name__
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return f"{type(exc).__name__}: {exc}"


def _short(value: Any) -> str:
    if callable(value):
        return "(a function; call it)"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_COST",
    "Predicate",
    "PredicateError",
    "compile_predicate",
    "type_of",
]
