"""Finding and running a step's tests (seed 001: TESTING -> COMPLETED | TEST_FAILED).

Discovery is by convention, in this order, for a step ``build_parser``:

1. ``tests/test_build_parser.py`` -> ``pytest tests/test_build_parser.py``;
2. a Makefile with a target ``test-build_parser`` -> ``make test-build_parser``;
3. a file ``test_build_parser.py`` or ``build_parser_test.py`` anywhere under the workspace (hidden
   folders, virtualenvs, ``node_modules`` and caches excluded; the shallowest, then the first by
   name) -> ``pytest <that file>``.

A run is a shell command in the workspace, in its own process group (the whole group is killed
on timeout, on cancellation and, to reap stray children, when the command ends). When the command
is pytest (``pytest ...``, ``python -m pytest ...``, ``python3 -m pytest ...``) it gets
``--junitxml=<a temporary file> -p no:cacheprovider`` and the counts and failure messages are read
from that JUnit XML, never scraped from the text. A bare ``pytest`` or ``python -m pytest`` runs
with ``sys.executable`` (the interpreter that runs veriloop, and its pytest), like ``-m pytest``
but importing the installed pytest before the working directory goes on ``sys.path``, so a
``pytest.py`` the step wrote into the workspace cannot pose as the test runner. Any
other command (``make test-x``) is judged by its exit code; it also gets the JUnit option through
``PYTEST_ADDOPTS``, so when it runs pytest underneath, the XML is read as well (``structured``
says whether counts came from XML).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veriloop.engines.plan.sandbox import DEFAULT_CONFINEMENT, Confinement, launch

OUTPUT_TAIL_CHARS = 20_000
"""How much of a command's combined stdout/stderr is kept (its end, where the summary is)."""
FAILURE_MESSAGE_CHARS = 600
"""How much of one failure's message and traceback is kept."""
MAX_FAILURES = 50
"""Failures listed per run (the counts are always complete)."""
MAX_JUNIT_BYTES = 50_000_000
"""A larger JUnit file is not parsed."""
SKIP_DIRS = frozenset(
    {"node_modules", "__pycache__", "site-packages", "venv", "env", "build", "dist"}
)
"""Folders (besides hidden ones, starting with ".") that test discovery and fingerprints skip."""
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")

_ASSIGNMENT = r"(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*"
_PYTEST = re.compile(
    rf"^\s*(?P<env>{_ASSIGNMENT})(?P<prog>(?:\S*/)?(?:py\.test|pytest)|(?:\S*/)?python(?:3(?:\.\d+)?)?\s+-m\s+pytest)(?=\s|$)(?P<rest>.*)$",
    re.DOTALL,
)
_REAL_PYTEST = (
    "import os, sys, pytest; sys.path.insert(0, os.getcwd()); sys.exit(pytest.console_main())"
)
"""``python -m pytest`` that cannot be shadowed: the interpreter starts without the working directory
on ``sys.path`` (``-P``), imports the installed pytest, and only then puts the working directory
first, as ``-m`` would (so a ``pytest.py`` written into the workspace is never the pytest that runs).
"""
_SHELL_OPERATORS = frozenset({"&&", "||", ";", "|", "&", ";;", "(", ")", ">", "<", ">>", "<<"})


@dataclass
class TestRun:
    """One test command's outcome. Counts are None unless ``structured`` (read from JUnit XML)."""

    __test__ = False  # not a pytest test class

    command: str
    exit_code: int | None
    timed_out: bool
    collected: int | None = None
    passed: int | None = None
    failed: int | None = None
    errors: int | None = None
    skipped: int | None = None
    failures: list[dict[str, str]] = field(default_factory=list)
    output: str = ""
    structured: bool = False

    @property
    def ok(self) -> bool:
        """Exit 0 in time, and (when structured) at least one test, none failed or errored."""
        if self.timed_out or self.exit_code != 0:
            return False
        if not self.structured:
            return True
        return bool(self.collected) and not self.failed and not self.errors


@dataclass
class CommandRun:
    """A shell command's exit status and the tail of its output."""

    exit_code: int | None
    timed_out: bool
    output: str
    stderr: str = ""
    """The tail of standard error when it was kept apart (otherwise it is in ``output``)."""
    sandboxed: bool = False
    """The command ran in bubblewrap."""


def discover_test_command(step_id: str, workspace: Path) -> str | None:
    """The step's test command by convention (see the module docstring), or None."""
    workspace = Path(workspace)
    if not step_id or "/" in step_id or step_id.startswith("."):
        return None
    conventional = workspace / "tests" / f"test_{step_id}.py"
    if conventional.is_file():
        return f"pytest {shlex.quote(f'tests/test_{step_id}.py')}"
    target = f"test-{step_id}"
    for name in MAKEFILES:
        makefile = workspace / name
        if makefile.is_file() and _has_make_target(makefile, target):
            return f"make {shlex.quote(target)}"
    names = {f"test_{step_id}.py", f"{step_id}_test.py"}
    found = sorted(
        (path for path in workspace_files(workspace) if path.name in names),
        key=lambda p: (len(p.relative_to(workspace).parts), str(p)),
    )
    if found:
        return f"pytest {shlex.quote(found[0].relative_to(workspace).as_posix())}"
    return None


def workspace_files(workspace: Path):
    """Every regular file under ``workspace``, skipping hidden folders, virtualenvs and caches."""
    for root, dirs, files in os.walk(workspace):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d not in SKIP_DIRS
            and not (Path(root) / d / "pyvenv.cfg").exists()
        )
        for name in sorted(files):
            path = Path(root) / name
            if path.is_file() and not path.is_symlink():
                yield path


def is_pytest_command(command: str) -> bool:
    """A single pytest invocation (not a pipeline or a compound command)."""
    return _pytest_parts(command) is not None


def uses_make(command: str | None) -> bool:
    """The command runs make (so its Makefile is part of the test definition)."""
    try:
        tokens = shlex.split(command or "")
    except ValueError:
        return False
    return bool(tokens) and Path(tokens[0]).name in {"make", "gmake"}


async def run_command(
    command: str,
    workspace: Path,
    *,
    timeout_s: float,
    env: dict[str, str] | None = None,
    tail_chars: int = OUTPUT_TAIL_CHARS,
    split_stderr: bool = False,
    confinement: Confinement = DEFAULT_CONFINEMENT,
    writable: Sequence[Path] = (),
) -> CommandRun:
    """Run ``command`` through the shell in ``workspace``, in its own process group; kill the group
    after ``timeout_s`` (exit_code None, timed_out True), when cancelled, and once the command has
    ended (its stray children go with it). Output goes to temporary files, so a child that keeps
    the output open cannot hold the run, and only the tails are read back. Raises OSError when
    the command cannot start (e.g. a missing workspace).

    The process never sees this process's environment: it gets the scrubbed one of
    :mod:`~veriloop.engines.plan.sandbox` plus ``env`` (veriloop's own plumbing), and runs in
    bubblewrap as ``confinement`` says, with ``writable`` folders besides the workspace. A command
    that must not start (``confinement`` forbids processes, or requires a sandbox that cannot
    start) raises ProcessRefused and runs nothing."""
    # Finding bwrap (and probing it once), temporary files and reading them back are blocking
    # calls: keep them off the event loop.
    how = await asyncio.to_thread(
        launch, Path(workspace), confinement, extra_env=env, writable=writable
    )
    sink, errors = await asyncio.to_thread(
        lambda: (tempfile.TemporaryFile(), tempfile.TemporaryFile())
    )
    try:
        proc = await asyncio.create_subprocess_exec(
            *how.argv,
            "-c",
            command,
            cwd=str(workspace),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=sink,
            stderr=errors if split_stderr else asyncio.subprocess.STDOUT,
            start_new_session=True,
            env=how.env,
        )
        timed_out = False
        try:
            try:
                await asyncio.wait_for(proc.wait(), timeout=timeout_s)
            except TimeoutError:
                timed_out = True
                _kill_group(proc.pid)
                await proc.wait()
        finally:
            _kill_group(proc.pid)
        output, stderr = await asyncio.to_thread(
            lambda: (_tail(sink, tail_chars), _tail(errors, tail_chars) if split_stderr else "")
        )
    finally:
        sink.close()
        errors.close()
    if timed_out:
        output += f"\n[killed after {timeout_s:g} s]"
    return CommandRun(
        None if timed_out else proc.returncode, timed_out, output, stderr, sandboxed=how.sandboxed
    )


async def run_tests(
    command: str,
    workspace: Path,
    *,
    timeout_s: float,
    confinement: Confinement = DEFAULT_CONFINEMENT,
) -> TestRun:
    """Run a test command; pytest's counts and failures come from its JUnit XML."""
    tmpdir = await asyncio.to_thread(tempfile.mkdtemp, prefix="veriloop-junit-")
    junit = Path(tmpdir) / "junit.xml"
    options = f"--junitxml={shlex.quote(str(junit))} -p no:cacheprovider"
    parts = _pytest_parts(command)
    env: dict[str, str] = {}
    if parts is not None:
        prefix, prog, rest = parts
        if prog in {"pytest", "py.test", "python -m pytest", "python3 -m pytest"}:
            prog = f"{shlex.quote(sys.executable)} -P -c {shlex.quote(_REAL_PYTEST)}"
        to_run = f"{prefix}{prog}{rest} {options}"
    else:
        to_run = command
        env["PYTEST_ADDOPTS"] = f"{os.environ.get('PYTEST_ADDOPTS', '')} {options}".strip()
    try:
        run = await run_command(
            to_run,
            workspace,
            timeout_s=timeout_s,
            env=env,
            confinement=confinement,
            writable=(Path(tmpdir),),
        )
        # pytest's "generated xml file: <our temporary path>" line is our plumbing, not test output.
        output = "\n".join(line for line in run.output.split("\n") if str(junit) not in line)
        result = TestRun(
            command=command, exit_code=run.exit_code, timed_out=run.timed_out, output=output
        )
        await asyncio.to_thread(_read_junit_if_written, junit, result)
        return result
    finally:
        await asyncio.to_thread(shutil.rmtree, tmpdir, ignore_errors=True)


def format_failures(run: TestRun, *, limit: int = 20) -> str:
    """``FAILED test: message`` lines for the failures the JUnit XML reported."""
    lines = []
    for failure in run.failures[:limit]:
        lines.append(f"{failure['kind'].upper()} {failure['test']}: {failure['message']}")
    more = len(run.failures) - limit
    if more > 0:
        lines.append(f"... and {more} more")
    return "\n".join(lines)


# --- internals --------------------------------------------------------------------------------


def _pytest_parts(command: str) -> tuple[str, str, str] | None:
    match = _PYTEST.match(command)
    if match is None or re.search(r"(^|\s)#", command):
        return None
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return None
    if any(token in _SHELL_OPERATORS or set(token) <= set("&|;<>()") for token in tokens):
        return None
    prog = " ".join(match.group("prog").split())
    return match.group("env"), prog, match.group("rest").rstrip()


def _has_make_target(makefile: Path, target: str) -> bool:
    try:
        text = makefile.read_text(errors="replace")
    except OSError:
        return False
    pattern = re.compile(rf"^(?:[^\s:#=][^:#=]*\s)?{re.escape(target)}(?:\s[^:#=]*)?:(?!=)", re.M)
    return pattern.search(text) is not None


def _tail(sink: Any, limit: int) -> str:
    """The last ``limit`` characters written to ``sink``, saying how much came before them."""
    size = sink.seek(0, os.SEEK_END)
    start = max(0, size - 4 * limit)  # bytes, with room for multi-byte characters
    sink.seek(start)
    text = sink.read().decode("utf-8", errors="replace")
    dropped = start
    if len(text) > limit:
        dropped += len(text[:-limit].encode())
        text = text[-limit:]
    if dropped:
        return f"[... {dropped} bytes of earlier output omitted ...]\n{text}"
    return text


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _read_junit_if_written(path: Path, run: TestRun) -> None:
    if path.is_file():
        _read_junit(path, run)


def _read_junit(path: Path, run: TestRun) -> None:
    """Counts and failures from pytest's JUnit XML, one status per test case."""
    if path.stat().st_size > MAX_JUNIT_BYTES:
        return
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failures: list[dict[str, str]] = []
    for case in root.iter("testcase"):
        failure, error, skipped = case.find("failure"), case.find("error"), case.find("skipped")
        if failure is not None:
            counts["failed"] += 1
            problem, kind = failure, "failed"
        elif error is not None:
            counts["errors"] += 1
            problem, kind = error, "error"
        elif skipped is not None:
            counts["skipped"] += 1
            continue
        else:
            counts["passed"] += 1
            continue
        if len(failures) < MAX_FAILURES:
            failures.append({"test": _test_id(case), "message": _message(problem), "kind": kind})
    run.collected = sum(counts.values())
    run.passed, run.failed = counts["passed"], counts["failed"]
    run.errors, run.skipped = counts["errors"], counts["skipped"]
    run.failures = failures
    run.structured = True


def _test_id(case: Any) -> str:
    classname, name = case.get("classname", ""), case.get("name", "")
    return f"{classname}::{name}" if classname else name


def _message(problem: Any) -> str:
    message = (problem.get("message") or "").strip()
    detail = (problem.text or "").strip()
    if detail and detail != message:
        room = FAILURE_MESSAGE_CHARS - len(message) - 1
        if room > 80:
            tail = detail[-room:]
            message = f"{message}\n{tail}" if message else tail
    return message[:FAILURE_MESSAGE_CHARS]


__all__ = [
    "CommandRun",
    "TestRun",
    "discover_test_command",
    "format_failures",
    "is_pytest_command",
    "run_command",
    "run_tests",
    "uses_make",
    "workspace_files",
]
