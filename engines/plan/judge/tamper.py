"""The tamper scan: the second line behind the write scope and the judge's tree.

The first line is structural: a step may change only the paths of its scope, and checks and tests
run in a tree built from the pre-step snapshot plus those in-scope changes (DESIGN.md, Trust). What
is left for this scan is code the step *was* allowed to write that games the judge from inside the
code under test. :func:`scan_changes` compares each changed file with its pre-step copy, both parsed
with :mod:`ast` (never a regex over text), and reports what the step *added*: a construct already
in the pre-step copy is not the step's doing. Names are resolved through the file's imports and
simple aliases (``import inspect as i``, ``from sys import _getframe as g``, ``b = builtins``,
``m = __import__("builtins")``, ``getattr(sys, "_getframe")``, ``vars(builtins)["all"]``), and code
in a constant string handed to ``exec``/``eval``/``compile`` is scanned as if written in place.

====================== ===========================================================================
rule                   what was added
====================== ===========================================================================
caller_frames          reading the caller's frames or source in non-test code: ``sys._getframe``,
                       ``inspect.stack``/``currentframe``/``getouterframes``/``getsource``...,
                       ``linecache``, ``traceback.extract_stack``..., or a frame attribute
                       (``f_back``, ``f_locals``, ``tb_frame``...)
constant_eq            a comparison dunder (``__eq__``, ``__ne__``, ``__lt__``..., ``__contains__``)
                       or ``__hash__`` whose every return is a constant (``return True``, ``True
                       or x``, ``other == other``), defined, assigned or passed to ``type()``
mock_object            ``unittest.mock``/``mock``/``pytest_mock`` used in non-test code
runtime_skip           a test-skipping exception in non-test code: ``pytest.skip``/``xfail``/
                       ``importorskip``/``exit``, ``unittest.SkipTest``, ``_pytest.outcomes``
patched_module         builtins or an imported module (or something imported from one) patched:
                       an attribute assigned or deleted, ``setattr``/``delattr``/``__setattr__``,
                       ``X.__dict__[...] =``, ``vars(X)[...] =``, ``__builtins__[...] =``,
                       ``sys.modules[...] =`` (or its ``update``/``setdefault``), an import hook
                       (``sys.meta_path``, ``sys.path_hooks``), ``monkeypatch`` in a conftest.py
shadowed_module        a new module named like a standard-library module or an installed package
                       (``json.py``, ``pytest.py``, ``random/__init__.py``)
startup_hook           a new ``sitecustomize.py``, ``usercustomize.py`` or ``.pth`` file
dynamic_code           ``exec``/``eval``/``compile``/``marshal.loads`` of code that is not a
                       constant string in non-test code (code that cannot be read cannot be cleared)
exit_handler           ``atexit.register(...)`` outside a CLI entry point
hard_exit              ``os._exit``/``sys.exit``/``exit``/``quit`` in library code (not under
                       ``if __name__ == "__main__"``, not in a ``main``/``cli`` function, not in
                       ``__main__.py``)
skip_marker            a skip/skipif/xfail marker or a ``pytest.skip``/``xfail`` call added to a
                       test that existed before the step
test_hook              a ``pytest_*`` hook added to a conftest.py or plugin
empty_assertion        a test function whose assertions are all constants (``assert True``) or
                       that asserts nothing at all
unparseable            a file that does not parse, is too large or too deep to scan
====================== ===========================================================================

Test code (``test_*.py``, ``*_test.py``, ``conftest.py``) may read frames, use mocks and skip:
those rules hold only for the code under test. Honest code next to the tricks passes: an
``atexit`` or ``sys.exit`` in a CLI entry point, an ``__eq__`` that compares fields, ``time.time()``
called rather than replaced, ``os.environ[...]`` set, a module named after nothing installed.

Bounded on hostile input: a file over :data:`MAX_SCAN_BYTES`, a tree over :data:`MAX_NODES` nodes
or one too deep for the parser is an ``unparseable`` finding, and the walk is iterative (no
recursion on deep nesting).
"""

from __future__ import annotations

import ast
import builtins
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import PurePosixPath
from typing import NamedTuple

EXIT_CALLS = frozenset({"os._exit", "sys.exit", "builtins.exit", "builtins.quit", "os.abort"})
ENTRY_FUNCTIONS = frozenset({"main", "cli", "run_cli", "entry_point", "console_main"})
"""Functions treated as CLI entry points, where exiting and exit handlers are honest."""
SKIP_MARKERS = frozenset({"skip", "skipif", "xfail"})
FRAME_READERS = frozenset(
    {
        "sys._getframe",
        "sys._getframemodulename",
        "sys._current_frames",
        "inspect.stack",
        "inspect.currentframe",
        "inspect.getouterframes",
        "inspect.getinnerframes",
        "inspect.getframeinfo",
        "inspect.trace",
        "inspect.getsource",
        "inspect.getsourcelines",
        "inspect.findsource",
        "inspect.getblock",
        "inspect.getlineno",
        "traceback.extract_stack",
        "traceback.walk_stack",
        "traceback.format_stack",
        "traceback.print_stack",
        "traceback.StackSummary",
        "traceback.FrameSummary",
    }
)
"""Calls that reach the caller's frames or source (``linecache`` counts whole)."""
FRAME_MODULES = frozenset({"linecache"})
FRAME_ATTRIBUTES = frozenset(
    {"f_back", "f_locals", "f_globals", "f_code", "tb_frame", "gi_frame", "cr_frame", "ag_frame"}
)
COMPARE_DUNDERS = frozenset(
    {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__", "__hash__"}
)
MOCK_MODULES = ("unittest.mock", "mock", "pytest_mock", "_pytest.monkeypatch")
SKIP_NAMES = (
    "pytest.skip",
    "pytest.xfail",
    "pytest.importorskip",
    "pytest.exit",
    "pytest.mark.skip",
    "pytest.mark.skipif",
    "pytest.mark.xfail",
    "_pytest.outcomes",
    "_pytest.skipping",
    "unittest.SkipTest",
    "unittest.case.SkipTest",
    "unittest.skip",
    "unittest.skipIf",
    "unittest.skipUnless",
    "unittest.expectedFailure",
    "unittest.case.skip",
    "unittest.case.expectedFailure",
)
"""Names (and their dotted children) whose use skips or fails tests from the code under test."""
SETATTR_CALLS = frozenset(
    {
        "builtins.setattr",
        "builtins.delattr",
        "builtins.object.__setattr__",
        "builtins.object.__delattr__",
        "builtins.type.__setattr__",
        "builtins.type.__delattr__",
    }
)
MUTATING_METHODS = frozenset(
    {"update", "setdefault", "__setitem__", "__delitem__", "pop", "popitem", "clear"}
)
IMPORT_HOOKS = frozenset({"sys.meta_path", "sys.path_hooks", "sys.path_importer_cache"})
DYNAMIC_CODE = frozenset(
    {"builtins.exec", "builtins.eval", "builtins.compile", "marshal.loads", "types.CodeType"}
)
IMPORT_CALLS = frozenset({"builtins.__import__", "importlib.__import__", "importlib.import_module"})
STARTUP_HOOKS = frozenset({"sitecustomize", "usercustomize"})
BUILTIN_NAMES = frozenset(dir(builtins)) | {"__builtins__"}
MAX_SCAN_BYTES = 1_000_000
"""A larger file is not parsed (and is a finding: it cannot be cleared)."""
MAX_TOTAL_BYTES = 8_000_000
"""Python text one scan parses at most over all files; files past it are findings."""
MAX_NODES = 400_000
"""A file whose tree holds more nodes is not walked (and is a finding)."""
MAX_EXEC_DEPTH = 3
"""Constant strings run by exec/eval/compile are scanned this many levels deep."""


@dataclass(frozen=True)
class TamperFinding:
    """One trick found in one changed file."""

    rule: str
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.message}"


def scan_changes(changes: Mapping[str, tuple[str | None, str]]) -> list[TamperFinding]:
    """Findings the step added, over ``{path: (pre-step text or None when new, post-step text)}``."""
    findings: list[TamperFinding] = []
    budget = MAX_TOTAL_BYTES
    for path, (before, after) in sorted(changes.items()):
        if before is None:
            findings += new_module_findings(path)
        if not path.endswith(".py"):
            continue
        budget -= len(after) + len(before or "")
        if budget < 0:
            findings.append(TamperFinding("unparseable", path, 1, "past the scan's size budget"))
        else:
            findings += scan_file(path, before, after)
    return findings


def new_module_findings(path: str) -> list[TamperFinding]:
    """Findings a new file earns by its name alone: a start-up hook or a shadowing module.

    Any folder counts, packages too: a script run from its folder (``cd checks && python3
    x.py``, ``python3 checks/x.py``) and pytest's rootdir insertion put that folder first on
    ``sys.path``."""
    pure = PurePosixPath(path)
    if pure.suffix == ".pth":
        return [
            TamperFinding("startup_hook", path, 1, f"{pure.name}: a .pth file runs at start-up")
        ]
    if pure.suffix != ".py":
        return []
    module = pure.parent.name if pure.name == "__init__.py" else pure.stem
    if module in STARTUP_HOOKS:
        return [TamperFinding("startup_hook", path, 1, f"{module} runs at interpreter start-up")]
    if not module or module.startswith("__"):
        return []
    if module in sys.stdlib_module_names:
        return [TamperFinding("shadowed_module", path, 1, f"{module} shadows the standard library")]
    if module in installed_modules():
        return [TamperFinding("shadowed_module", path, 1, f"{module} shadows an installed package")]
    return []


@cache
def installed_modules() -> frozenset[str]:
    """Top-level module names of the installed distributions (this interpreter's)."""
    return frozenset(name for name in packages_distributions() if name.isidentifier())


def scan_file(path: str, before: str | None, after: str) -> list[TamperFinding]:
    """Findings in ``after`` that ``before`` (the pre-step text, None for a new file) did not have."""
    new = _scan_text(path, after)
    if isinstance(new, TamperFinding):
        return [new]
    old: list[TamperFinding] = []
    old_tests: set[str] = set()
    if before is not None:
        scanned = _scan_text(path, before)
        if not isinstance(scanned, TamperFinding):
            old, old_tests = scanned
    new_findings, _ = new
    seen = Counter(_key(f) for f in old)
    added = []
    for finding in new_findings:
        key = _key(finding)
        if seen[key]:
            seen[key] -= 1
            continue
        if finding.rule == "skip_marker" and not _silences(finding, old_tests):
            continue  # a new test may be born skipped; only existing tests must not be silenced
        added.append(finding)
    return added


def _scan_text(path: str, text: str) -> tuple[list[TamperFinding], set[str]] | TamperFinding:
    """(findings, test function names), or the one ``unparseable`` finding."""
    if len(text) > MAX_SCAN_BYTES:
        return TamperFinding("unparseable", path, 1, "too large to scan")
    try:
        scanner = _Scanner(path, text)
        return scanner.run(), scanner.tests
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        line = getattr(exc, "lineno", None) or 1
        return TamperFinding("unparseable", path, line, f"does not parse: {type(exc).__name__}")
    except _TooLarge:
        return TamperFinding("unparseable", path, 1, "too many nodes to scan")


def _silences(finding: TamperFinding, old_tests: set[str]) -> bool:
    """A skip finding that hits a test of the pre-step copy (``*``: every test of the module)."""
    target = finding.message.split(" ", 1)[0]
    return bool(old_tests) if target == "*" else target in old_tests


def _key(finding: TamperFinding) -> tuple[str, str]:
    return finding.rule, finding.message


class _TooLarge(Exception):
    """The tree holds more than MAX_NODES nodes."""


class _Context(NamedTuple):
    """Where a node sits: what holds for everything below it."""

    entry: bool
    """Inside a CLI entry point (main guard, main()/cli() function, __main__.py)."""
    test: str
    """The enclosing test function of a test file, or ""."""
    shadowed: frozenset[str]
    """Names bound locally (function parameters) that hide module-level imports."""
    line: int
    """The line findings report: the exec call's for code scanned from a string, else 0."""
    depth: int
    """How many exec strings deep this code sits."""


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain, else ""."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _is_main_guard(node: ast.If) -> bool:
    test = node.test
    return (
        isinstance(test, ast.Compare)
        and _dotted(test.left) == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _constant_like(node: ast.AST | None) -> bool:
    """An expression whose value does not depend on its inputs (as far as a glance shows)."""
    if node is None:
        return False
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _constant_like(node.operand)
    if isinstance(node, ast.BoolOp):
        truthy = isinstance(node.op, ast.Or)
        return any(isinstance(v, ast.Constant) and bool(v.value) is truthy for v in node.values)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = node.left, node.comparators[0]
        simple = isinstance(left, ast.Name | ast.Constant) and isinstance(
            right, ast.Name | ast.Constant
        )
        same = simple and ast.dump(left) == ast.dump(right)
        return same or (
            isinstance(node.ops[0], ast.Is | ast.IsNot | ast.Eq | ast.NotEq)
            and isinstance(left, ast.Constant)
            and isinstance(right, ast.Constant)
        )
    if isinstance(node, ast.Call) and _dotted(node.func) == "isinstance" and len(node.args) == 2:
        return _dotted(node.args[1]) == "object"
    if isinstance(node, ast.Call) and _dotted(node.func) == "bool" and len(node.args) == 1:
        return isinstance(node.args[0], ast.Constant)
    return False


def _always_constant(function: ast.AST) -> bool:
    """A function or lambda every return of which is constant-like (and that returns at all)."""
    if isinstance(function, ast.Lambda):
        return _constant_like(function.body)
    if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    returns = []
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            returns.append(node)
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))
    return bool(returns) and all(_constant_like(r.value) for r in returns)


class _Scanner:
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.name = PurePosixPath(path).name
        self.tree = ast.parse(text, filename=path)
        self.findings: list[TamperFinding] = []
        self._seen: set[tuple[str, int]] = set()
        self.tests: set[str] = set()
        self.aliases: dict[str, str] = {}
        """Local name -> the dotted name it stands for (imports and simple aliases)."""
        self.defined: set[str] = set()
        """Module-level names the file defines (they hide builtins of the same name)."""
        self.nodes = 0
        self.is_conftest = self.name == "conftest.py"
        self.is_test_file = (
            self.name.startswith("test_") or self.name.endswith("_test.py") or self.is_conftest
        )

    def run(self) -> list[TamperFinding]:
        self._bind(self.tree)
        start = _Context(self.name == "__main__.py", "", frozenset(), 0, 0)
        self._walk(self.tree, start)
        return self.findings

    def add(self, rule: str, node: ast.AST, message: str, ctx: _Context) -> None:
        line = ctx.line or getattr(node, "lineno", 1)
        if (rule, line) not in self._seen:  # one finding a rule a line (``a.b.c`` is one use)
            self._seen.add((rule, line))
            self.findings.append(TamperFinding(rule, self.path, line, message))

    # -- names ---------------------------------------------------------------------------------

    def _bind(self, tree: ast.AST) -> None:
        """Imports, simple aliases (``b = builtins``) and module-level definitions, file-wide."""
        assigns: list[ast.Assign] = []
        for node in self._nodes(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        head = alias.name.split(".")[0]
                        self.aliases[head] = head
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                assigns.append(node)
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.defined.add(node.name)
        for _ in range(3):  # alias chains (a = sys; b = a._getframe) settle in a few rounds
            for node in assigns:
                target = node.targets[0]
                if isinstance(target, ast.Name) and target.id not in self.aliases:
                    resolved = self.resolve(node.value, _EMPTY)
                    if resolved:
                        self.aliases[target.id] = resolved
                    elif target.id in BUILTIN_NAMES:
                        self.defined.add(target.id)

    def _nodes(self, tree: ast.AST) -> Iterator[ast.AST]:
        """Every node, iteratively, counting them against MAX_NODES."""
        stack = [tree]
        while stack:
            node = stack.pop()
            self.nodes += 1
            if self.nodes > MAX_NODES:
                raise _TooLarge
            yield node
            stack.extend(ast.iter_child_nodes(node))

    def resolve(self, node: ast.AST, ctx: _Context) -> str:
        """The dotted name an expression stands for, through imports and aliases, or "".

        Only names that reach an import or a builtin resolve: a local variable called ``mock``
        resolves to nothing.
        """
        parts: list[str] = []
        while True:
            if isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            elif isinstance(node, ast.Subscript) and _const_str(node.slice) is not None:
                key = _const_str(node.slice)
                inner = self.resolve(node.value, ctx)
                if inner == "sys.modules":
                    base = key
                elif inner.endswith(".__dict__") or inner in ("builtins", "builtins.globals()"):
                    base = f"{inner.removesuffix('.__dict__').removesuffix('.globals()')}.{key}"
                    base = "builtins" if base == "builtins.__builtins__" else base
                elif inner.startswith("builtins.vars(") and inner.endswith(")"):
                    base = f"{inner[len('builtins.vars(') : -1]}.{key}"
                else:
                    return ""
                return ".".join([base, *reversed(parts)]) if base else ""
            elif isinstance(node, ast.Call):
                base = self._call_value(node, ctx)
                return ".".join([base, *reversed(parts)]) if base else ""
            elif isinstance(node, ast.Name):
                base = self._name(node.id, ctx)
                return ".".join([base, *reversed(parts)]) if base else ""
            else:
                return ""

    def _name(self, name: str, ctx: _Context) -> str:
        if name in ctx.shadowed:
            return ""
        if name in self.aliases:
            return self.aliases[name]
        if name == "__builtins__":
            return "builtins"
        if name in BUILTIN_NAMES and name not in self.defined:
            return f"builtins.{name}"
        return ""

    def _call_value(self, node: ast.Call, ctx: _Context) -> str:
        """What a call returns, when it returns a module or a named object: ``__import__("x")``,
        ``importlib.import_module("x")``, ``getattr(x, "name")``, ``vars(x)``, ``globals()``."""
        func = self.resolve(node.func, ctx)
        first = node.args[0] if node.args else None
        if func in IMPORT_CALLS and func != "importlib.import_module":
            name = _const_str(first)
            return name.split(".")[0] if name and not node.args[3:] else (name or "")
        if func == "importlib.import_module":
            return _const_str(first) or ""
        if func == "builtins.getattr" and len(node.args) >= 2 and _const_str(node.args[1]):
            owner = self.resolve(node.args[0], ctx)
            return f"{owner}.{_const_str(node.args[1])}" if owner else ""
        if func == "builtins.vars" and first is not None:
            owner = self.resolve(first, ctx)
            return f"builtins.vars({owner})" if owner else ""
        if func == "builtins.globals":
            return "builtins.globals()"
        return ""

    def _imported(self, node: ast.AST, ctx: _Context) -> str:
        """The dotted name of ``node`` when it is builtins, an imported module or something
        imported from one (what a step must not patch), else ""."""
        name = self.resolve(node, ctx)
        if name.startswith(("builtins.globals()", "builtins.vars(")):
            return ""
        if name.startswith("builtins.") and name.count(".") == 1:
            return ""  # a builtin function or type itself (``len``, ``object``) is not a module
        return name

    # -- the walk ------------------------------------------------------------------------------

    def _walk(self, tree: ast.AST, start: _Context) -> None:
        stack: list[tuple[ast.AST, _Context]] = [(tree, start)]
        while stack:
            node, ctx = stack.pop()
            children = self._visit(node, ctx)
            if children is None:
                stack.extend((child, ctx) for child in ast.iter_child_nodes(node))
            else:
                stack.extend(children)

    def _visit(self, node: ast.AST, ctx: _Context) -> list[tuple[ast.AST, _Context]] | None:
        """Findings at ``node``; the children to walk with their context (None: all, same)."""
        if isinstance(node, ast.If) and _is_main_guard(node):
            inner = ctx._replace(entry=True)
            return [(c, inner) for c in node.body] + [(c, ctx) for c in node.orelse]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return self._function(node, ctx)
        if isinstance(node, ast.Lambda):
            names = frozenset(a.arg for a in _arguments(node.args))
            return [(node.body, ctx._replace(shadowed=ctx.shadowed | names))]
        if isinstance(node, ast.Import | ast.ImportFrom):
            self._import(node, ctx)
        elif isinstance(node, ast.Call):
            self._call(node, ctx)
            value = self._call_value(node, ctx)  # getattr(sys, "_getframe"), __import__("mock")
            if value:
                self._flag_name(value, node, ctx)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            self._assign(node, ctx)
        elif isinstance(node, ast.Attribute | ast.Name | ast.Subscript):
            self._reference(node, ctx)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if _const_str(key) in COMPARE_DUNDERS and _always_constant(value):
                    self.add(
                        "constant_eq", node, f"{_const_str(key)} always returns a constant", ctx
                    )
        return None

    def _function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, ctx: _Context
    ) -> list[tuple[ast.AST, _Context]]:
        if node.name in COMPARE_DUNDERS and _always_constant(node):
            self.add("constant_eq", node, f"{node.name} always returns a constant", ctx)
        if node.name.startswith("pytest_") and (self.is_conftest or not self.is_test_file):
            self.add("test_hook", node, f"{node.name} hook", ctx)
        test = ctx.test
        if node.name.startswith("test") and self.is_test_file and not self.is_conftest:
            self.tests.add(node.name)
            self._test_function(node, ctx)
            test = node.name
        names = frozenset(a.arg for a in _arguments(node.args))
        inner = ctx._replace(
            entry=ctx.entry or node.name in ENTRY_FUNCTIONS,
            test=test,
            shadowed=ctx.shadowed | names,
        )
        outer = [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]
        children = [(c, ctx) for c in outer if c is not None]
        return children + [(c, inner) for c in node.body]

    def _test_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, ctx: _Context) -> None:
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if _is_skip_mark(self.resolve(target, ctx) or _dotted(target)):
                self.add("skip_marker", decorator, f"{node.name} gets @{_dotted(target)}", ctx)
        asserts, checks = False, False
        for child in ast.walk(node):
            if isinstance(child, ast.Assert) and not isinstance(child.test, ast.Constant):
                asserts = True
            elif isinstance(child, ast.Call):
                last = _dotted(child.func).split(".")[-1]
                checks = checks or last.startswith("assert") or last in ("raises", "fail", "approx")
        if not asserts and not checks:
            constant = any(isinstance(c, ast.Assert) for c in ast.walk(node))
            what = "asserts only constants" if constant else "asserts nothing"
            self.add("empty_assertion", node, f"{node.name} {what}", ctx)

    def _import(self, node: ast.Import | ast.ImportFrom, ctx: _Context) -> None:
        if isinstance(node, ast.ImportFrom) and node.level:
            return  # a relative import names the project's own module
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [f"{node.module}.{a.name}" for a in node.names]
        )
        for name in names:
            self._flag_name(name, node, ctx)

    def _reference(self, node: ast.Attribute | ast.Name | ast.Subscript, ctx: _Context) -> None:
        if not isinstance(node.ctx, ast.Load):
            return  # an assignment target: patching is _assign's
        if isinstance(node, ast.Attribute) and node.attr in FRAME_ATTRIBUTES:
            if not self.is_test_file:
                self.add("caller_frames", node, f"reads the frame attribute {node.attr}", ctx)
        name = self.resolve(node, ctx)
        if name:
            self._flag_name(name, node, ctx)

    def _flag_name(self, name: str, node: ast.AST, ctx: _Context) -> None:
        """Rules that a name alone breaks, wherever it is used (non-test code)."""
        if self.is_test_file:
            return
        if name in FRAME_READERS or name.split(".")[0] in FRAME_MODULES:
            self.add("caller_frames", node, f"reads the caller's frames or source ({name})", ctx)
        elif _under(name, MOCK_MODULES) or name.endswith((".MagicMock", ".Mock")):
            self.add("mock_object", node, f"{name} in code under test", ctx)
        elif _under(name, SKIP_NAMES):
            self.add("runtime_skip", node, f"{name} in library code", ctx)

    def _call(self, node: ast.Call, ctx: _Context) -> None:
        name = self.resolve(node.func, ctx)
        imported = _const_str(node.args[0]) if node.args else None
        if imported and name in IMPORT_CALLS:
            self._flag_name(imported, node, ctx)  # __import__("unittest.mock") imports the mock
        if name == "atexit.register" and not ctx.entry:
            self.add("exit_handler", node, "atexit.register in library code", ctx)
        elif name in EXIT_CALLS and not ctx.entry:
            self.add("hard_exit", node, f"{name.removeprefix('builtins.')}() in library code", ctx)
        elif name in SETATTR_CALLS or name.endswith((".__setattr__", ".__delattr__")):
            self._setattr(node, name, ctx)
        elif name.endswith(tuple(f".{m}" for m in MUTATING_METHODS)):
            owner = name.rsplit(".", 1)[0]
            if owner == "sys.modules" or owner.endswith(".__dict__") or owner in IMPORT_HOOKS:
                self.add("patched_module", node, f"{name}() changes {owner}", ctx)
            elif owner.startswith("builtins.vars("):
                self.add("patched_module", node, f"{name}() changes the namespace", ctx)
        elif name.startswith(tuple(f"{h}." for h in IMPORT_HOOKS)):
            self.add("patched_module", node, f"{name}() installs an import hook", ctx)
        elif name in DYNAMIC_CODE:
            self._dynamic(node, name, ctx)
        elif name.startswith("builtins.type") and len(node.args) == 3:
            pass  # type(name, bases, namespace): its namespace dict is checked as a Dict
        elif (
            self.is_conftest
            and name.startswith("monkeypatch.")
            and name.split(".")[-1] in ("setattr", "setitem", "delattr")
        ):
            self.add("patched_module", node, f"{name} in conftest.py", ctx)
        if name in ("pytest.skip", "pytest.xfail", "pytest.exit") and ctx.test:
            self.add("skip_marker", node, f"{ctx.test} calls {name}", ctx)

    def _setattr(self, node: ast.Call, name: str, ctx: _Context) -> None:
        """``setattr(x, a, v)``/``object.__setattr__(x, a, v)`` or ``x.__setattr__(a, v)``."""
        args = list(node.args)
        if name in SETATTR_CALLS:
            target = args.pop(0) if args else None
        else:
            target = node.func.value if isinstance(node.func, ast.Attribute) else None
        if target is None:
            return
        owner = self._imported(target, ctx)
        if owner:
            self.add("patched_module", node, f"{name.split('.')[-1]} on {owner}", ctx)
        elif len(args) > 1 and _const_str(args[0]) in COMPARE_DUNDERS:
            if _always_constant(args[1]):
                self.add(
                    "constant_eq", node, f"{_const_str(args[0])} always returns a constant", ctx
                )

    def _assign(
        self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete, ctx: _Context
    ) -> None:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.Delete):
            targets = node.targets
        else:
            targets = [node.target]
        value = getattr(node, "value", None)
        stack = list(targets)
        while stack:
            target = stack.pop()
            if isinstance(target, ast.Tuple | ast.List):
                stack.extend(target.elts)
            elif isinstance(target, ast.Starred):
                stack.append(target.value)
            elif isinstance(target, ast.Name):
                if target.id in COMPARE_DUNDERS and value is not None and _always_constant(value):
                    self.add("constant_eq", node, f"{target.id} always returns a constant", ctx)
                elif target.id == "__builtins__" and target.id not in ctx.shadowed:
                    self.add("patched_module", node, "rebinds __builtins__", ctx)
                elif target.id == "pytestmark" and self.is_test_file and _marks_skip(value, self):
                    self.add("skip_marker", node, "* module-wide pytestmark skip/xfail", ctx)
            elif isinstance(target, ast.Attribute):
                if target.attr in COMPARE_DUNDERS and value is not None and _always_constant(value):
                    self.add("constant_eq", node, f"{target.attr} always returns a constant", ctx)
                owner = self._imported(target.value, ctx)
                if owner:
                    self.add("patched_module", node, f"assigns {owner}.{target.attr}", ctx)
            elif isinstance(target, ast.Subscript):
                container = self.resolve(target.value, ctx)
                if _reaches_builtins(target):
                    self.add("patched_module", node, "assigns into __builtins__", ctx)
                elif (
                    container == "sys.modules"
                    or container in IMPORT_HOOKS
                    or container.endswith(".__dict__")
                    or container.startswith("builtins.vars(")
                    or container == "builtins"
                    or (
                        container == "builtins.globals()"
                        and _const_str(target.slice) == "__builtins__"
                    )
                ):
                    key = _const_str(target.slice)
                    self.add("patched_module", node, f"assigns {container}[{key!r}]", ctx)

    def _dynamic(self, node: ast.Call, name: str, ctx: _Context) -> None:
        source = _const_str(node.args[0]) if node.args else None
        if source is None:
            if not self.is_test_file:
                self.add("dynamic_code", node, f"{name.removeprefix('builtins.')}() of code", ctx)
            return
        if ctx.depth >= MAX_EXEC_DEPTH or name == "marshal.loads":
            self.add("dynamic_code", node, "code nested too deep in strings", ctx)
            return
        try:
            inner = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return  # the call itself fails at run time: nothing runs
        self._bind(inner)
        line = ctx.line or node.lineno
        self._walk(inner, ctx._replace(line=line, depth=ctx.depth + 1))


_EMPTY = _Context(False, "", frozenset(), 0, 0)


def _reaches_builtins(target: ast.Subscript) -> bool:
    """``x["__builtins__"][...]``/``f.__globals__["__builtins__"]...``: the builtins namespace
    reached through a chain that names it."""
    node: ast.AST = target.value
    while isinstance(node, ast.Subscript | ast.Attribute | ast.Call):
        if isinstance(node, ast.Subscript) and _const_str(node.slice) == "__builtins__":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "__builtins__":
            return True
        node = node.func if isinstance(node, ast.Call) else node.value
    return False


def _arguments(args: ast.arguments) -> list[ast.arg]:
    extra = [a for a in (args.vararg, args.kwarg) if a is not None]
    return [*args.posonlyargs, *args.args, *args.kwonlyargs, *extra]


def _under(name: str, roots: Iterable[str]) -> bool:
    """``name`` is one of ``roots`` or a dotted child of one."""
    return any(name == root or name.startswith(f"{root}.") for root in roots)


def _marks_skip(value: ast.AST | None, scanner: _Scanner) -> bool:
    if value is None:
        return False
    for node in ast.walk(value):
        target = node.func if isinstance(node, ast.Call) else node
        if _is_skip_mark(scanner.resolve(target, _EMPTY) or _dotted(target)):
            return True
    return False


def _is_skip_mark(name: str) -> bool:
    """``pytest.mark.skip``/``skipif``/``xfail`` or ``unittest.skip*``/``expectedFailure``."""
    last = name.split(".")[-1]
    if name.startswith("unittest."):
        return last.startswith("skip") or last == "expectedFailure"
    return last in SKIP_MARKERS and ".mark." in f".{name}"


def describe(findings: Iterable[TamperFinding]) -> list[str]:
    """Findings as ``path:line: rule: message`` lines."""
    return [str(f) for f in findings]


__all__ = ["TamperFinding", "describe", "new_module_findings", "scan_changes", "scan_file"]
