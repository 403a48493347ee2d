"""The child process of a python step, and how a function is found from its reference.

A python step never runs in the runner's process: :func:`~veriloop.engines.plan.executors.
run_python_step` starts ``python -I -B -c <this module's source>`` through the same confinement as a
shell step and writes one JSON request to its standard input::

    {"function": "package.module:attr" | "/path/to/file.py:attr",
     "sys_path": [...], "input": ..., "depends": {step id: output}}

The child finds the function as a tools spec names it (:func:`import_object`, which
:mod:`~veriloop.engines.plan.tools` uses too), calls it, and writes one JSON result on the standard
output it was given (the function's own prints go to standard error)::

    {"output": ..., "notes": str | None, "error": str | None, "leftovers": [...]}

It makes itself the subreaper of everything it starts, so once the function has returned it can
find what the function left running (threads, processes, detached ones included), kill them and
say so in ``leftovers``. Standard library only: the sandbox shows neither veriloop's source nor
anything the function does not need, and the child starts in a few tens of milliseconds.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

# Imported when needed (asyncio, ctypes, hashlib, importlib.util): the child starts for every
# python step, and asyncio alone would double its start-up time.

PR_SET_CHILD_SUBREAPER = 36
KILL_ROUNDS = 50
"""How many times the child looks for processes left behind (a killed process's children come back
to it one generation at a time)."""


# -- references ----------------------------------------------------------------------------------


def import_object(path: str, *, what: str = "tools") -> Any:
    """The object ``module:attr`` or ``path/to/file.py:attr`` names (``attr`` may be dotted); a
    module is looked up on sys.path and then in the current directory, like ``python -m``.
    ValueError, naming ``what`` was being imported, when it cannot be found."""
    target, sep, attr = path.rpartition(":")
    if not sep or not target.strip() or not attr.strip():
        raise ValueError(
            f"{what} import path must look like 'package.module:attr' or 'path/to/file.py:attr', "
            f"got {path!r}"
        )
    target = target.strip()
    if is_file_target(target):
        obj: Any = module_from_file(Path(target), what=what)
    else:
        obj = import_module(target, what=what)
    for part in attr.strip().split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ValueError(f"{what} import path {path!r}: no attribute {part!r}") from exc
    return obj


def is_file_target(target: str) -> bool:
    """The part before ``:`` names a file rather than a module."""
    return target.endswith(".py") or "/" in target or os.sep in target


def import_module(name: str, *, what: str = "tools") -> Any:
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ValueError(
            f"cannot import {what} module {name!r} ({exc}); for a file that is not an installed "
            "module use path/to/file.py:attr"
        ) from exc
    except Exception as exc:  # importing user code can raise anything
        raise ValueError(
            f"importing {what} module {name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    finally:
        if added:
            sys.path.remove(cwd)


FILE_MODULE_PREFIX = "veriloop_user_tools_"
"""Modules loaded from a file path are named this plus a hash of the path."""


def module_from_file(path: Path, *, what: str = "tools") -> Any:
    """A Python file loaded as a module once per resolved path."""
    import hashlib
    import importlib.util

    if not path.is_file():
        raise ValueError(f"no {what} file {str(path)!r}")
    name = f"{FILE_MODULE_PREFIX}{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot load {str(path)!r} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # user code
        sys.modules.pop(name, None)
        raise ValueError(
            f"loading {what} file {str(path)!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return module


def step_function(obj: Any) -> Any:
    """The function a python step calls: a LangChain tool's own function (``@tool`` replaces the
    module's name with the tool), otherwise ``obj``."""
    if inspect.isroutine(obj):
        return obj
    return getattr(obj, "coroutine", None) or getattr(obj, "func", None) or obj


# -- calling -------------------------------------------------------------------------------------


def python_arguments(fn: Any, input: Any, depends: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """How ``fn`` is called, from its signature: ``fn(input=..., depends=...)`` when it has a
    ``depends`` parameter or ``**kwargs``; otherwise ``fn(input)`` when it takes a positional
    argument; ``fn(input=...)`` for a keyword-only ``input``; otherwise ``fn()``."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no signature (some builtins): the documented default
        return (), {"input": input, "depends": depends}
    kinds = {p.kind for p in parameters}
    names = {p.name for p in parameters}
    if "depends" in names or inspect.Parameter.VAR_KEYWORD in kinds:
        return (), {"input": input, "depends": depends}
    positional = {
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
    }
    if kinds & positional:
        return (input,), {}
    if "input" in names:  # keyword-only input
        return (), {"input": input}
    return (), {}


def call(request: dict[str, Any]) -> dict[str, Any]:
    """The result of one request (``output`` and ``notes``, or ``error``); never raises."""
    reference = str(request.get("function"))
    label = reference.rpartition(":")[2]
    try:
        fn = step_function(import_object(reference, what="python step function"))
    except ValueError as exc:
        return {"error": str(exc)}
    if not callable(fn):
        return {"error": f"{label} is not callable"}
    try:
        args, kwargs = python_arguments(fn, request.get("input"), request.get("depends"))
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            import asyncio

            value = asyncio.run(_awaited(value))
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the step failed
        return {"error": f"{label} raised {type(exc).__name__}: {exc}"}
    if isinstance(value, dict) and ("notes" in value or "output" in value):
        notes = value.get("notes")
        return {"output": value.get("output"), "notes": None if notes is None else str(notes)}
    return {"output": value}


async def _awaited(value: Any) -> Any:
    return await value


# -- what the function left running ---------------------------------------------------------------


def leftovers() -> list[str]:
    """Threads and processes the function left running (processes killed, threads die with this
    process), one description each. Processes are found as this process's children: as the
    subreaper it inherits every orphan of its tree."""
    found = [
        f"thread {thread.name!r}"
        for thread in threading.enumerate()
        if thread is not threading.main_thread() and thread.is_alive()
    ]
    hidden = len(os.listdir("/proc/self/task")) - 1 - len(found)
    if hidden > 0:
        found.append(f"{hidden} thread(s) not known to the threading module")
    seen: set[int] = set()
    for _ in range(KILL_ROUNDS):
        _reap()
        children = [pid for pid in _children() if pid not in seen or _alive(pid)]
        if not children:
            break
        for pid in children:
            if pid not in seen:
                seen.add(pid)
                found.append(f"process {pid} ({_command_line(pid)})")
            _kill_tree(pid)
    _reap()
    return found


def _children() -> list[int]:
    pids: list[int] = []
    for task in os.listdir("/proc/self/task"):
        try:
            text = Path(f"/proc/self/task/{task}/children").read_text()
        except OSError:
            continue
        pids += [int(pid) for pid in text.split()]
    return pids


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` after stopping it and its descendants (so none forks meanwhile)."""
    tree = [pid]
    index = 0
    while index < len(tree):
        current = tree[index]
        index += 1
        try:
            os.kill(current, signal.SIGSTOP)
            for task in os.listdir(f"/proc/{current}/task"):
                text = Path(f"/proc/{current}/task/{task}/children").read_text()
                tree += [int(child) for child in text.split()]
        except OSError:
            continue
    for current in tree:
        try:
            os.kill(current, signal.SIGKILL)
        except OSError:
            continue


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _command_line(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    text = raw.replace(b"\0", b" ").decode(errors="replace").strip()
    return text if len(text) <= 80 else text[:77] + "..."


# -- the child's main ----------------------------------------------------------------------------


def main() -> None:
    """Read the request, answer it on the original standard output, exit (threads and all)."""
    answer = os.fdopen(os.dup(1), "w", encoding="ascii")
    os.dup2(2, 1)  # the function's prints go to standard error, never into the answer
    # The function may replace anything in this interpreter; what is needed afterwards is kept
    # now (a forged answer only lies about the function's own step, which still gets judged).
    dumps, write, exit_now = json.dumps, answer.write, os._exit
    flush, found_leftovers = answer.flush, leftovers
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass  # no prctl: leftovers are still found among direct children
    request = json.loads(sys.stdin.read())
    sys.stdin.close()
    os.close(0)
    sys.path[:0] = [entry for entry in request.get("sys_path") or [] if entry not in sys.path]
    result = call(request)
    try:
        result["leftovers"] = found_leftovers()
    except OSError as exc:
        result["leftovers"] = [f"could not look for them: {exc}"]
    try:
        text = dumps(result)
    except (TypeError, ValueError, RecursionError) as exc:
        text = dumps(
            {
                "error": f"{request.get('function')} returned an output that is not JSON "
                f"({type(exc).__name__}: {exc})",
                "leftovers": result["leftovers"],
            }
        )
    write(text)
    flush()
    exit_now(0)


if __name__ == "__main__":
    main()
