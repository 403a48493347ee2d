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

When veriloop's own pytest runs (the bare ``pytest``/``python -m pytest`` forms), it also loads
:mod:`~veriloop.engines.plan.judge.pytest_reporter`, which sends every test's outcome through a FIFO as
it happens. Those outcomes are the counts; they are cross-checked with the JUnit XML, pytest's
summary line and the exit status, and every disagreement is listed in ``TestRun.tampered`` (the
integrity check fails the step on it as "test report tampered").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veriloop.engines.plan.confinement.process import run_command
from veriloop.engines.plan.confinement.sandbox import DEFAULT_CONFINEMENT, Confinement

if TYPE_CHECKING:
    from veriloop.engines.plan.judge.tree import JudgeTree

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
REPORTER_PLUGIN = Path(__file__).with_name("pytest_reporter.py")
"""The reporter's file: the sandbox shows it (read-only) and nothing else of veriloop."""
_REPORTING_PYTEST = (
    "import importlib.util as u, os, sys, pytest; "
    "s = u.spec_from_file_location('veriloop_pytest_reporter', {path}); "
    "m = sys.modules[s.name] = u.module_from_spec(s); s.loader.exec_module(m); "
    "reporter = m.Reporter.attach({fd}); sys.path.insert(0, os.getcwd()); "
    "sys.exit(int(pytest.main(plugins=[reporter])))"
).replace("{path}", repr(str(REPORTER_PLUGIN)))
"""``_REAL_PYTEST`` with the per-test reporter (loaded from its file) on the descriptor the shell
opened as ``{fd}``."""
MAX_CHANNEL_BYTES = 20_000_000
"""Per-test reports beyond this are dropped (and the run counts as tampered)."""
_SUMMARY = re.compile(r"^=*\s*((?:\d+ [a-z]+(?:, )?)+)(?: in [0-9.]+s.*)?\s*=*\s*$", re.MULTILINE)
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
    outcomes: dict[str, str] | None = None
    """Per-test outcome by node id as the reporter sent it (None: no reporter ran)."""
    items: list[str] | None = None
    """Node ids of the tests pytest was about to run, after deselection (None: no reporter ran)."""
    tampered: list[str] = field(default_factory=list)
    """Evidence that the report was forged: where the reporter, the XML, the summary and the exit
    status disagree."""

    @property
    def ok(self) -> bool:
        """Exit 0 in time, and (when structured) at least one test, none failed, errored or
        skipped (a skipped or xfailed test did not pass)."""
        if self.timed_out or self.exit_code != 0:
            return False
        if not self.structured:
            return True
        return bool(self.collected) and not self.failed and not self.errors and not self.skipped


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


def pytest_arguments(command: str) -> tuple[str, list[str]] | None:
    """A pytest command as its head (environment assignments and program) and its arguments;
    None for any other command."""
    parts = _pytest_parts(command)
    if parts is None:
        return None
    prefix, prog, rest = parts
    return f"{prefix}{prog}", shlex.split(rest)


def uses_make(command: str | None) -> bool:
    """The command runs make (so its Makefile is part of the test definition)."""
    try:
        tokens = shlex.split(command or "")
    except ValueError:
        return False
    return bool(tokens) and Path(tokens[0]).name in {"make", "gmake"}


async def run_tests(
    command: str,
    workspace: Path,
    *,
    timeout_s: float,
    confinement: Confinement = DEFAULT_CONFINEMENT,
    judge: JudgeTree | None = None,
    collect_only: bool = False,
) -> TestRun:
    """Run a test command; pytest's counts come from the per-test reporter when veriloop's pytest
    runs, cross-checked with its JUnit XML (failure messages come from the XML). With ``judge``,
    ``workspace`` is its tree: the run gets the judge's environment and the operator's pytest
    configuration, the tree bound read-only and its scratch folder writable.
    ``collect_only``: pytest only collects (``TestRun.items`` lists what it found)."""
    tmpdir = await asyncio.to_thread(tempfile.mkdtemp, prefix="veriloop-junit-")
    os.chmod(tmpdir, 0o777)  # the test process may run as another user
    junit = Path(tmpdir) / "junit.xml"
    options = f"--junitxml={shlex.quote(str(junit))} -p no:cacheprovider"
    env: dict[str, str] = {}
    writable, readonly = [Path(tmpdir)], []
    if judge is not None:
        options += " " + shlex.join(judge.pytest_options())
        env.update(judge.env())
        writable.append(judge.scratch)
        readonly.append(judge.root)
    if collect_only:
        options += " --collect-only"
    parts = _pytest_parts(command)
    channel: _Channel | None = None
    try:
        if parts is not None:
            prefix, prog, rest = parts
            redirect = ""
            if prog in {"pytest", "py.test", "python -m pytest", "python3 -m pytest"}:
                channel = await asyncio.to_thread(_Channel.open, Path(tmpdir) / "reports")
                readonly.append(REPORTER_PLUGIN)
                fd = secrets.choice(range(3, 10))  # sh opens only one-digit descriptors
                bootstrap = _REPORTING_PYTEST.replace("{fd}", str(fd))
                prog = f"{shlex.quote(sys.executable)} -P -c {shlex.quote(bootstrap)}"
                redirect = f" {fd}>{shlex.quote(str(channel.path))}"
            to_run = f"{prefix}{prog}{rest} {options}{redirect}"
        else:
            to_run = command
            env["PYTEST_ADDOPTS"] = f"{os.environ.get('PYTEST_ADDOPTS', '')} {options}".strip()
        if channel is not None:
            channel.start()
        run = await run_command(
            to_run,
            workspace,
            timeout_s=timeout_s,
            env=env,
            confinement=confinement,
            writable=writable,
            readonly=readonly,
        )
        # pytest's "generated xml file: <our temporary path>" line is our plumbing, not test output.
        output = "\n".join(line for line in run.output.split("\n") if str(junit) not in line)
        result = TestRun(
            command=command, exit_code=run.exit_code, timed_out=run.timed_out, output=output
        )
        await asyncio.to_thread(_read_junit_if_written, junit, result)
        if channel is not None:
            _apply_reports(result, channel.finish(), Path(workspace))
        return result
    finally:
        if channel is not None:
            channel.close()
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


class _Channel:
    """The read end of the reporter's FIFO, drained by the event loop while the tests run.

    Opened read-write (Linux), so it never reads end-of-file before the test process opens it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd
        self.data = bytearray()
        self.overflow = False
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def open(cls, path: Path) -> _Channel:
        os.mkfifo(path, 0o600)
        return cls(path, os.open(path, os.O_RDWR | os.O_NONBLOCK))

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.fd, self._read)

    def _read(self) -> bool:
        try:
            chunk = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return False
        if len(self.data) + len(chunk) > MAX_CHANNEL_BYTES:
            self.overflow = True
        else:
            self.data += chunk
        return bool(chunk)

    def finish(self) -> _Reports:
        """Everything sent, read to the end."""
        if self._loop is not None:
            self._loop.remove_reader(self.fd)
            self._loop = None
        while self._read():
            pass
        return _Reports.parse(bytes(self.data), overflow=self.overflow)

    def close(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self.fd)
            self._loop = None
        with contextlib.suppress(OSError):
            os.close(self.fd)


@dataclass
class _Reports:
    """What the reporter sent: per-test phase outcomes, collection errors, the exit status."""

    started: bool = False
    rootdir: str | None = None
    """pytest's rootdir: node ids are relative to it."""
    exitstatus: int | None = None
    phases: dict[str, dict[str, str]] = field(default_factory=dict)
    collect_errors: list[str] = field(default_factory=list)
    items: list[str] = field(default_factory=list)
    """Node ids pytest collected and was about to run."""
    problems: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, data: bytes, *, overflow: bool) -> _Reports:
        reports = cls()
        if overflow:
            reports.problems.append(f"more than {MAX_CHANNEL_BYTES} bytes of per-test reports")
        unreadable = 0
        for line in data.decode("utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
                event = record["event"]
            except (ValueError, TypeError, KeyError):
                unreadable += 1
                continue
            if event == "start":
                if reports.started:
                    reports.problems.append("the test session reported its start twice")
                reports.started = True
                reports.rootdir = str(record.get("rootdir") or "") or None
            elif event == "finish" and isinstance(record.get("exitstatus"), int):
                if reports.exitstatus is not None:
                    reports.problems.append("the test session reported its end twice")
                reports.exitstatus = record["exitstatus"]
            elif event == "collect":
                reports.collect_errors.append(str(record.get("nodeid")))
            elif event == "item":
                reports.items.append(str(record.get("nodeid")))
            elif event == "test" and record.get("outcome") != "rerun":
                phases = reports.phases.setdefault(str(record.get("nodeid")), {})
                when = str(record.get("when"))
                if when in phases:
                    reports.problems.append(f"{record.get('nodeid')} reported its {when} twice")
                phases[when] = str(record.get("outcome"))
            else:
                unreadable += 1
        if unreadable:
            reports.problems.append(f"{unreadable} unreadable per-test report line(s)")
        return reports

    def outcomes(self) -> dict[str, str]:
        """One outcome per test, as the JUnit XML classifies it."""
        found = {}
        for nodeid, phases in self.phases.items():
            if phases.get("call") == "failed":
                found[nodeid] = "failed"
            elif "failed" in phases.values():
                found[nodeid] = "error"
            elif "skipped" in phases.values():
                found[nodeid] = "skipped"
            elif phases.get("call") == "passed":
                found[nodeid] = "passed"
            else:
                found[nodeid] = "incomplete"  # the process died inside the test
        return found

    def junit_counts(self) -> tuple[int, int, int, int]:
        """(passed, failed, errors, skipped) as pytest's JUnit XML counts them: a test that failed
        and then errored in teardown is two test cases there, a failure and an error."""
        passed = failed = errors = skipped = 0
        for phases in self.phases.values():
            broken_fixture = phases.get("setup") == "failed" or phases.get("teardown") == "failed"
            if phases.get("call") == "failed":
                failed += 1
                errors += phases.get("teardown") == "failed"
            elif broken_fixture:
                errors += 1
            elif "skipped" in phases.values():
                skipped += 1
            elif phases.get("call") == "passed":
                passed += 1
        return passed, failed, errors + len(self.collect_errors), skipped

    def summary_counts(self) -> dict[str, int]:
        """The counts pytest's summary line shows: call failures, setup/teardown/collect errors."""
        errors = sum(
            1
            for phases in self.phases.values()
            if phases.get("setup") == "failed" or phases.get("teardown") == "failed"
        )
        failed = sum(1 for phases in self.phases.values() if phases.get("call") == "failed")
        return {"failed": failed, "errors": errors + len(self.collect_errors)}


def _apply_reports(run: TestRun, reports: _Reports, cwd: Path) -> None:
    """Counts from the reporter; every disagreement with the XML, summary or exit status is
    evidence of tampering. Outcomes are keyed by node ids relative to ``cwd`` (pytest's are
    relative to its rootdir, which an ini file elsewhere moves)."""
    evidence = list(reports.problems)
    if not reports.started:
        if run.structured:
            evidence.append("a JUnit XML exists, but the test process never reported a test")
        run.tampered = evidence
        return
    outcomes = reports.outcomes()
    seen = reports.junit_counts()
    if run.structured:
        xml = (run.passed, run.failed, run.errors, run.skipped)
        if xml != seen:
            evidence.append(
                "the JUnit XML says {} passed, {} failed, {} errors, {} skipped; ".format(*xml)
                + "the tests reported {} passed, {} failed, {} errors, {} skipped as they ran".format(
                    *seen
                )
            )
    if reports.exitstatus is None:
        if run.structured:
            evidence.append("a JUnit XML exists, but the test session never reported its end")
        elif run.exit_code == 0 and not run.timed_out:
            evidence.append("the test session never reported its end, yet the process exited 0")
    elif not run.timed_out and run.exit_code != reports.exitstatus:
        evidence.append(
            f"pytest ended its session with status {reports.exitstatus}, "
            f"but the process exited with status {run.exit_code}"
        )
    summary = _summary_line(run.output)
    if summary is not None and reports.exitstatus is not None:
        expected = reports.summary_counts()
        shown = {
            "failed": summary.get("failed", 0),
            "errors": summary.get("errors", 0) + summary.get("error", 0),
        }
        if shown != expected:
            evidence.append(
                f"pytest's summary line shows {shown['failed']} failed and {shown['errors']} errors; "
                f"the tests reported {expected['failed']} failed and {expected['errors']} errors"
            )
    run.outcomes = {_from_cwd(nodeid, reports.rootdir, cwd): o for nodeid, o in outcomes.items()}
    run.items = [_from_cwd(nodeid, reports.rootdir, cwd) for nodeid in reports.items]
    run.collected = sum(seen)
    run.passed, run.failed, run.errors, run.skipped = seen
    run.structured = True
    run.tampered = evidence


def _from_cwd(nodeid: str, rootdir: str | None, cwd: Path) -> str:
    """``nodeid`` with its file relative to ``cwd`` instead of pytest's rootdir (unchanged when
    either is unknown or the file lies outside ``cwd``)."""
    if not rootdir:
        return nodeid
    path, sep, rest = nodeid.partition("::")
    try:
        rel = Path(os.path.relpath(Path(rootdir, path).resolve(), cwd.resolve()))
    except (OSError, ValueError):
        return nodeid
    if rel.parts[:1] == ("..",):
        return nodeid
    return f"{rel.as_posix()}{sep}{rest}"


def _summary_line(output: str) -> dict[str, int] | None:
    """The counts of the last summary line (``== 2 failed, 1 passed in 0.1s ==``), if any."""
    last = None
    for match in _SUMMARY.finditer(output):
        if " in " in match.group(0) or "=" in match.group(0):
            last = match.group(1)
    if last is None:
        return None
    counts: dict[str, int] = {}
    for number, word in re.findall(r"(\d+) ([a-z]+)", last):
        counts[word] = counts.get(word, 0) + int(number)
    return counts


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
    "TestRun",
    "discover_test_command",
    "format_failures",
    "is_pytest_command",
    "pytest_arguments",
    "run_tests",
    "uses_make",
    "workspace_files",
]
