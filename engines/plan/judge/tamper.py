"""A tamper scan of a step's diff: tricks that make checks pass without doing the work.

:func:`scan_changes` compares each changed ``.py`` file with its pre-step copy, both parsed with
:mod:`ast` (never a regex over text), and reports what the step *added*: a construct already in
the pre-step copy is not the step's doing. Findings, by rule:

====================== ===========================================================================
rule                   what was added
====================== ===========================================================================
exit_handler           ``atexit.register(...)`` outside a CLI entry point
hard_exit              ``os._exit``/``sys.exit``/``exit``/``quit`` in library code (not under
                       ``if __name__ == "__main__"``, not in a ``main``/``cli`` function, not in
                       ``__main__.py``)
patched_module         an assignment to an attribute of ``time``, ``random``, ``builtins``,
                       ``os``, ``sys``, ``pytest``, ``_pytest`` or ``unittest`` (``time.time =
                       ...``), ``setattr`` on one of them, or ``monkeypatch`` in a conftest.py
constant_eq            an ``__eq__``/``__ne__`` whose every ``return`` is a constant
skip_marker            a skip/skipif/xfail marker or a ``pytest.skip``/``xfail`` call added to a
                       test that existed before the step
runtime_skip           ``pytest.skip``/``xfail``/``exit`` called from library code (the tests that
                       call it are skipped at run time)
test_hook              a ``pytest_*`` hook (``pytest_collection_modifyitems``,
                       ``pytest_runtest_makereport``...) added to a conftest.py or plugin
empty_assertion        a test function whose assertions are all constants (``assert True``) or
                       that asserts nothing at all
====================== ===========================================================================

A file that does not parse is itself a finding (``unparseable``): code that cannot be read cannot
be cleared. Honest code next to the tricks passes: an ``atexit`` or ``sys.exit`` in a CLI entry
point, an ``__eq__`` that compares fields, a test that asserts on values.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PATCHED_MODULES = frozenset(
    {"time", "random", "builtins", "os", "sys", "pytest", "_pytest", "unittest", "datetime"}
)
"""Modules whose attributes code under test must not reassign."""
EXIT_CALLS = frozenset({"os._exit", "sys.exit", "exit", "quit", "os.abort"})
ENTRY_FUNCTIONS = frozenset({"main", "cli", "run_cli", "entry_point", "console_main"})
"""Functions treated as CLI entry points, where exiting and exit handlers are honest."""
SKIP_MARKERS = frozenset({"skip", "skipif", "xfail"})
MAX_SCAN_BYTES = 2_000_000
"""A larger file is not parsed (and is a finding: it cannot be cleared)."""


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
    for path, (before, after) in sorted(changes.items()):
        findings += scan_file(path, before, after)
    return findings


def scan_file(path: str, before: str | None, after: str) -> list[TamperFinding]:
    """Findings in ``after`` that ``before`` (the pre-step text, None for a new file) did not have."""
    if len(after) > MAX_SCAN_BYTES:
        return [TamperFinding("unparseable", path, 1, "too large to scan")]
    try:
        new = _Scanner(path, after).run()
    except (SyntaxError, ValueError, RecursionError) as exc:
        line = getattr(exc, "lineno", None) or 1
        return [TamperFinding("unparseable", path, line, f"does not parse: {exc}")]
    old: list[TamperFinding] = []
    old_tests: set[str] = set()
    if before is not None and len(before) <= MAX_SCAN_BYTES:
        try:
            scanner = _Scanner(path, before)
            old = scanner.run()
            old_tests = scanner.tests
        except (SyntaxError, ValueError, RecursionError):
            old = []
    seen = Counter(_key(f) for f in old)
    added = []
    for finding in new:
        key = _key(finding)
        if seen[key]:
            seen[key] -= 1
            continue
        if finding.rule == "skip_marker" and not _silences(finding, old_tests):
            continue  # a new test may be born skipped; only existing tests must not be silenced
        added.append(finding)
    return added


def _silences(finding: TamperFinding, old_tests: set[str]) -> bool:
    """A skip finding that hits a test of the pre-step copy (``*``: every test of the module)."""
    target = finding.message.split(" ", 1)[0]
    return bool(old_tests) if target == "*" else target in old_tests


def _key(finding: TamperFinding) -> tuple[str, str]:
    return finding.rule, finding.message


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


def _is_main_guard(node: ast.If) -> bool:
    test = node.test
    return (
        isinstance(test, ast.Compare)
        and _dotted(test.left) == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


class _Scanner(ast.NodeVisitor):
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.name = path.rsplit("/", 1)[-1]
        self.tree = ast.parse(text, filename=path)
        self.findings: list[TamperFinding] = []
        self.tests: set[str] = set()
        self.aliases: dict[str, str] = {}
        """Local name -> module, from imports (``import time as t``, ``from os import _exit``)."""
        self.entry_depth = 0
        self.is_conftest = self.name == "conftest.py"
        self.is_test_file = self.name.startswith("test_") or self.name.endswith("_test.py")

    def run(self) -> list[TamperFinding]:
        if self.name == "__main__.py":
            self.entry_depth = 1
        self.visit(self.tree)
        return self.findings

    def add(self, rule: str, node: ast.AST, message: str) -> None:
        self.findings.append(TamperFinding(rule, self.path, getattr(node, "lineno", 1), message))

    def resolve(self, node: ast.AST) -> str:
        """The dotted name with import aliases undone (``t.time`` -> ``time.time``)."""
        name = _dotted(node)
        head, _, rest = name.partition(".")
        if head in self.aliases:
            return f"{self.aliases[head]}.{rest}" if rest else self.aliases[head]
        return name

    # -- imports --

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.aliases[alias.asname or alias.name.split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0]
            )

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and not node.level:
            for alias in node.names:
                self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    # -- entry points --

    def visit_If(self, node: ast.If) -> None:
        if _is_main_guard(node):
            self.entry_depth += 1
            for child in node.body:
                self.visit(child)
            self.entry_depth -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in ("__eq__", "__ne__"):
            returns = [n for n in ast.walk(node) if isinstance(n, ast.Return)]
            if returns and all(
                isinstance(r.value, ast.Constant) and isinstance(r.value.value, bool)
                for r in returns
            ):
                self.add("constant_eq", node, f"{node.name} always returns a constant")
        if node.name.startswith("pytest_") and (self.is_conftest or not self.is_test_file):
            self.add("test_hook", node, f"{node.name} hook")
        if node.name.startswith("test") and self.is_test_file:
            self.tests.add(node.name)
            self._test_function(node)
        entry = node.name in ENTRY_FUNCTIONS
        self.entry_depth += entry
        self.generic_visit(node)
        self.entry_depth -= entry

    visit_AsyncFunctionDef = visit_FunctionDef

    def _test_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if _is_skip_mark(self.resolve(target)):
                self.add("skip_marker", decorator, f"{node.name} gets @{_dotted(target)}")
        asserts = [n for n in ast.walk(node) if isinstance(n, ast.Assert)]
        checks = [
            n
            for n in ast.walk(node)
            if isinstance(n, ast.Call)
            and (
                _dotted(n.func).split(".")[-1].startswith("assert")
                or _dotted(n.func).split(".")[-1] in ("raises", "fail", "approx")
            )
        ]
        real = [a for a in asserts if not isinstance(a.test, ast.Constant)]
        if not real and not checks:
            what = "asserts only constants" if asserts else "asserts nothing"
            self.add("empty_assertion", node, f"{node.name} {what}")

    # -- calls and assignments --

    def visit_Call(self, node: ast.Call) -> None:
        name = self.resolve(node.func)
        if name == "atexit.register" and not self.entry_depth:
            self.add("exit_handler", node, "atexit.register in library code")
        elif name in EXIT_CALLS and not self.entry_depth:
            self.add("hard_exit", node, f"{name}() in library code")
        elif name in ("setattr", "builtins.setattr") and node.args:
            if self._is_patched_module(node.args[0]):
                target = self.resolve(node.args[0]) or ast.unparse(node.args[0])
                self.add("patched_module", node, f"setattr on {target}")
        elif (
            self.is_conftest
            and name.startswith("monkeypatch.")
            and name.split(".")[-1] in ("setattr", "setitem", "delattr")
        ):
            self.add("patched_module", node, f"{name} in conftest.py")
        elif name in ("pytest.skip", "pytest.xfail", "pytest.exit"):
            if self._enclosing_test:
                self.add("skip_marker", node, f"{self._enclosing_test} calls {name}")
            elif not self.is_test_file and not self.is_conftest:
                self.add("runtime_skip", node, f"{name}() in library code")
        self.generic_visit(node)

    _enclosing_test = ""

    def visit_Assign(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if (
                isinstance(target, ast.Name)
                and target.id in ("__eq__", "__ne__")
                and isinstance(node.value, ast.Lambda)
                and isinstance(node.value.body, ast.Constant)
            ):
                self.add("constant_eq", node, f"{target.id} always returns a constant")
            elements = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
            for element in elements:
                if isinstance(element, ast.Attribute) and self._is_patched_module(element.value):
                    owner = self.resolve(element.value)
                    self.add("patched_module", node, f"assigns {owner}.{element.attr}")
                elif (
                    isinstance(element, ast.Name)
                    and element.id == "pytestmark"
                    and self.is_test_file
                    and _marks_skip(node.value, self)
                ):
                    self.add("skip_marker", node, "* module-wide pytestmark skip/xfail")
        self.generic_visit(node)

    def _is_patched_module(self, node: ast.AST) -> bool:
        """``node`` names an imported module of :data:`PATCHED_MODULES` (or something in one),
        directly or as ``sys.modules["time"]``."""
        if (
            isinstance(node, ast.Subscript)
            and self.resolve(node.value) == "sys.modules"
            and isinstance(node.slice, ast.Constant)
        ):
            return str(node.slice.value).split(".")[0] in PATCHED_MODULES
        head = _dotted(node).split(".")[0]
        return head in self.aliases and self.resolve(node).split(".")[0] in PATCHED_MODULES

    visit_AugAssign = visit_Assign
    visit_AnnAssign = visit_Assign

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            outer, self._enclosing_test = self._enclosing_test, node.name
            super().generic_visit(node)
            self._enclosing_test = outer
        else:
            super().generic_visit(node)


def _marks_skip(value: ast.AST | None, scanner: _Scanner) -> bool:
    if value is None:
        return False
    for node in ast.walk(value):
        if _is_skip_mark(scanner.resolve(node.func if isinstance(node, ast.Call) else node)):
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


__all__ = ["TamperFinding", "describe", "scan_changes", "scan_file"]
