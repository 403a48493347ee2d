"""What a check command executes, resolved to workspace files (so a step cannot rewrite its judge).

:func:`executed_files` parses a shell command (``shlex`` with punctuation, never a regex over the
text) into simple commands, follows ``cd`` between them, and resolves each to the workspace files it
runs:

- ``python [-opts] script.py``, ``python -m pkg.mod`` (``pkg/mod.py`` or ``pkg/mod/__main__.py``,
  with the packages' ``__init__.py``), ``pytest``/``python -m pytest`` with the paths it names;
- ``bash|sh|zsh|dash script``, ``source``/``.`` files, ``bash -c '...'`` (resolved recursively);
- ``make [-C dir] [-f file] target``: the Makefile, the files it ``include``\\s, and what its recipe
  lines run (resolved recursively);
- ``./script`` or ``path/to/script`` (an executable or interpreter script) and any other interpreter
  (``node x.js``, ``perl x.pl``): the workspace files named;
- wrappers (``env``, ``timeout N``, ``nice``, ``exec``, ``command``, ``time``) are looked through;
- a Python check file outside the workspace root brings the modules it imports from its own folder
  (``checks/verify.py`` importing ``checks/helpers.py``), transitively: they are the judge's code.
  Imports from the root are the code under test, which the step is there to change.

What cannot be resolved (an unparseable string, ``$(...)``/backticks/``eval``, a program taken from a
variable) is listed in ``unresolved``: the critic reports it for model-written plans.
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

INTERPRETERS = re.compile(r"^(python[0-9.]*|pypy[0-9.]*|node|nodejs|ruby|perl|php|Rscript|lua)$")
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
WRAPPERS = frozenset({"env", "exec", "command", "nice", "nohup", "time", "timeout", "stdbuf"})
MAKES = frozenset({"make", "gmake"})
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
SEPARATORS = frozenset({"&&", "||", ";", "|", "&", ";;", "\n", "|&"})
MAX_DEPTH = 4
"""Nesting (``bash -c`` inside a Makefile recipe...) beyond which nothing more is resolved."""
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON_VALUE_OPTIONS = frozenset({"-W", "-X", "-Q"})
_NOWHERE = Path("/nonexistent/veriloop-critic")


@dataclass
class Resolution:
    """Workspace files (POSIX, relative) a command executes, and what could not be resolved."""

    files: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)


def executed_files(command: str, workspace: Path) -> Resolution:
    """The workspace files ``command`` (run in ``workspace``) executes; see the module doc."""
    found = Resolution()
    _resolve(command, Path(workspace).resolve(), Path(workspace).resolve(), found, 0)
    found.files = sorted(dict.fromkeys(found.files))
    return found


def unresolvable(command: str) -> list[str]:
    """Why ``command`` cannot be resolved, whatever the workspace holds (substitutions, ``eval``,
    a program from a variable, a string that does not parse); empty when it can be."""
    found = Resolution()
    # An empty root: only what the text itself hides is reported, never a missing file.
    _resolve(command, _NOWHERE, _NOWHERE, found, 0)
    return list(dict.fromkeys(found.unresolved))


def _resolve(command: str, root: Path, cwd: Path, found: Resolution, depth: int) -> None:
    if depth > MAX_DEPTH:
        found.unresolved.append(f"`{_short(command)}` nests too deep")
        return
    if "`" in command or "$(" in command or "<(" in command:
        found.unresolved.append(f"`{_short(command)}` runs a command substitution")
    try:
        lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError as exc:
        found.unresolved.append(f"`{_short(command)}` does not parse: {exc}")
        return
    simple: list[str] = []
    for token in [*tokens, ";"]:
        if token in SEPARATORS or (token and set(token) <= set(";&|")):
            cwd = _simple(simple, root, cwd, found, depth)
            simple = []
        elif token in ("(", ")"):
            continue
        else:
            simple.append(token)


def _simple(argv: list[str], root: Path, cwd: Path, found: Resolution, depth: int) -> Path:
    """Resolve one simple command; returns the working directory for the next one (``cd``)."""
    argv = _strip_redirections(argv)
    while argv and _ASSIGNMENT.match(argv[0]):
        argv = argv[1:]
    while argv and Path(argv[0]).name in WRAPPERS:
        argv = argv[1:]
        while argv and (argv[0].startswith("-") or _ASSIGNMENT.match(argv[0])):
            argv = argv[1:]
        if argv and re.fullmatch(r"[0-9.]+[smhd]?", argv[0]):  # timeout's duration
            argv = argv[1:]
    if not argv:
        return cwd
    program, args = argv[0], argv[1:]
    name = Path(program).name
    if program.startswith("$"):
        found.unresolved.append(f"the program `{program}` comes from a variable")
    elif name == "cd":
        target = _inside(root, cwd / args[0]) if args else root
        return target if target is not None and target.is_dir() else cwd
    elif name == "eval":
        found.unresolved.append("`eval` runs a string built at run time")
    elif name in ("source", "."):
        _add(root, cwd, args[:1], found)
    elif name in ("pytest", "py.test"):
        _add(root, cwd, [a.split("::", 1)[0] for a in args if not a.startswith("-")], found)
    elif name in SHELLS:
        _shell(args, root, cwd, found, depth)
    elif INTERPRETERS.match(name):
        _interpreter(name, args, root, cwd, found, depth)
    elif name in MAKES:
        _make(args, root, cwd, found, depth)
    elif "/" in program:
        _add(root, cwd, [program], found)
        _add(root, cwd, [a for a in args if not a.startswith("-")], found)
    else:
        # A system program: the workspace files it is given are its inputs (``diff expected out``).
        _add(root, cwd, [a for a in args if not a.startswith("-")], found)
    return cwd


def _shell(args: list[str], root: Path, cwd: Path, found: Resolution, depth: int) -> None:
    while args and args[0].startswith("-"):
        option, args = args[0], args[1:]
        if "c" in option.lstrip("-") and not option.startswith("--"):
            if args:
                _resolve(args[0], root, cwd, found, depth + 1)
            return
    _add(root, cwd, args[:1], found)


def _interpreter(
    name: str, args: list[str], root: Path, cwd: Path, found: Resolution, depth: int
) -> None:
    python = name.startswith(("python", "pypy"))
    while args and args[0].startswith("-") and args[0] != "-":
        option, args = args[0], args[1:]
        if python and option == "-m":
            if args:
                _module(args[0], args[1:], root, cwd, found)
            return
        if python and option == "-c":
            return  # the code is in the command itself: the check definition protects it
        if option in _PYTHON_VALUE_OPTIONS and args:
            args = args[1:]
    if args:
        _add(root, cwd, args[:1], found)


def _module(module: str, rest: list[str], root: Path, cwd: Path, found: Resolution) -> None:
    if module == "pytest":
        _add(root, cwd, [a.split("::", 1)[0] for a in rest if not a.startswith("-")], found)
        return
    parts = module.split(".")
    for base in dict.fromkeys((cwd, root)):
        candidates = [
            base.joinpath(*parts).with_suffix(".py"),
            base.joinpath(*parts, "__main__.py"),
        ]
        for candidate in candidates:
            if candidate.is_file():
                packages = [base.joinpath(*parts[:i], "__init__.py") for i in range(1, len(parts))]
                if candidate.name == "__main__.py":
                    packages.append(base.joinpath(*parts, "__init__.py"))
                _add(root, cwd, [str(p) for p in [candidate, *packages] if p.is_file()], found)
                return
    # An installed module is outside the step's reach; a half-resolved workspace one is not.
    if (cwd / parts[0]).exists() or (root / parts[0]).exists():
        found.unresolved.append(f"module `{module}` is not a file of the workspace")


def _make(args: list[str], root: Path, cwd: Path, found: Resolution, depth: int) -> None:
    directory, makefile = cwd, None
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("-C", "--directory") and index + 1 < len(args):
            directory = _inside(root, directory / args[index + 1]) or directory
            index += 1
        elif arg.startswith("-C") and len(arg) > 2:
            directory = _inside(root, directory / arg[2:]) or directory
        elif arg in ("-f", "--file", "--makefile") and index + 1 < len(args):
            makefile = args[index + 1]
            index += 1
        index += 1
    paths = (
        [directory / makefile]
        if makefile
        else [directory / n for n in MAKEFILES if (directory / n).is_file()][:1]
    )
    seen: set[Path] = set()
    while paths:
        path = paths.pop()
        real = _inside(root, path)
        if real is None or real in seen or not real.is_file():
            continue
        seen.add(real)
        _add(root, directory, [str(real)], found)
        for line in real.read_text(encoding="utf-8", errors="replace").splitlines():
            include = re.match(r"^\s*-?s?include\s+(.*)$", line)
            if include:
                for name in include.group(1).split():
                    if "$" not in name:
                        paths.extend(sorted(directory.glob(name)) or [directory / name])
            elif line.startswith("\t"):
                recipe = line.lstrip("\t").lstrip("@-+ ")
                if recipe and "$" not in recipe.split(" ", 1)[0]:
                    _resolve(
                        re.sub(r"\$[({][^)}]*[)}]", "", recipe), root, directory, found, depth + 1
                    )


def _add(root: Path, cwd: Path, names: list[str], found: Resolution) -> None:
    for name in names:
        if not name or len(name) > 300 or "$" in name:
            continue
        path = _inside(root, cwd / name)
        if path is not None and path.is_file():
            rel = path.relative_to(root).as_posix()
            if rel not in found.files:
                found.files.append(rel)
                if path.suffix == ".py" and path.parent != root:
                    _add(root, path.parent, _sibling_imports(path), found)


def _sibling_imports(path: Path) -> list[str]:
    """Files of ``path``'s folder that it imports (``import helpers``, ``from . import x``)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, OSError, RecursionError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 1 and not node.module:
                names += [alias.name for alias in node.names]
            elif node.module and node.level <= 1:
                names.append(node.module.split(".")[0])
    found = []
    for name in dict.fromkeys(names):
        for candidate in (f"{name}.py", f"{name}/__init__.py"):
            if (path.parent / candidate).is_file():
                found.append(candidate)
    return found


def _inside(root: Path, path: Path) -> Path | None:
    """``path`` resolved, when it stays in ``root``."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return None
    return real if real == root or real.is_relative_to(root) else None


def _strip_redirections(argv: list[str]) -> list[str]:
    kept: list[str] = []
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token and set(token) <= set("<>"):
            skip = True
            if kept and kept[-1].isdigit():
                kept.pop()
        else:
            kept.append(token)
    return kept


def _short(command: str) -> str:
    return command if len(command) <= 80 else command[:77] + "..."


__all__ = ["Resolution", "executed_files", "unresolvable"]
