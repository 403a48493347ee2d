"""Tests the operator named: each must be collected and pass, and a run may not lose any.

The operator names tests three ways: ``fail_to_pass`` and ``pass_to_pass`` in a step (node ids or
files, as SWE-bench names them), and the tests the step's test command runs as they stand before
the step (the snapshot's). :func:`named_tests_command` makes sure the command runs the named ones
(:func:`pre_step_command` only those the pre-step tree holds);
:func:`named_problems` says which of them were not collected (missing, deselected) or did not pass
(failed, errored, skipped, xfailed); :func:`lost_tests` which tests of the pre-step collection the
judge's run did not collect.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any

from veriloop.engines.plan.judge.testrun import pytest_arguments
from veriloop.schemas.manifest import ManifestStep

MAX_LISTED = 5
"""Tests spelled out per problem (the count is always given)."""


def named_tests(step: ManifestStep) -> list[str]:
    """The step's FAIL_TO_PASS and PASS_TO_PASS tests, each once."""
    return list(dict.fromkeys([*step.fail_to_pass, *step.pass_to_pass]))


def named_tests_command(step: ManifestStep, command: str | None) -> str | None:
    """``command`` made to run the step's named tests too: a pytest command that names paths gets
    the named tests it does not already cover; none at all becomes ``pytest <named tests>``. A
    bare ``pytest`` (the configuration's test paths) and other commands are left as they are."""
    return _with_named(named_tests(step), command)


def pre_step_command(step: ManifestStep, command: str | None, files: Iterable[str]) -> str | None:
    """:func:`named_tests_command` for the operator's tests alone: the paths of a pytest
    ``command`` and the named tests that ``files`` (the pre-step tree) does not hold (the step
    added them) are left out; None when nothing is left to run."""
    files = frozenset(files)
    named = [test for test in named_tests(step) if in_files(test, files)]
    parts = pytest_arguments(command) if command is not None else None
    if parts is not None:
        head, args = parts
        paths = set(command_paths(args))
        gone = {path for path in paths if not in_files(path, files)}
        if gone == paths and paths:
            command = None
        elif gone:
            command = f"{head} {shlex.join(arg for arg in args if arg not in gone)}"
    return _with_named(named, command)


def _with_named(named: Sequence[str], command: str | None) -> str | None:
    if not named:
        return command
    if command is None:
        return "pytest " + shlex.join(named)
    parts = pytest_arguments(command)
    if parts is None:
        return command
    paths = command_paths(parts[1])
    if not paths:
        return command
    extra = [test for test in named if not any(_covers(path, test) for path in paths)]
    return f"{command} {shlex.join(extra)}" if extra else command


def command_paths(args: Sequence[str]) -> list[str]:
    """The paths (files, folders, test ids) among a pytest command's arguments, as pytest's own
    parser reads them: an option's value (``-k expr``, ``-p plugin``, ``--rootdir DIR``) is not a
    path. An option pytest does not know (a conftest's) counts as a flag; arguments pytest
    rejects have no paths (the run fails on them anyway)."""
    from pytest import UsageError  # pytest runs the tests; veriloop imports it only here

    try:
        return list(_pytest_parser().parse_known_args(list(args)).file_or_dir or [])
    except UsageError:
        return []


@cache
def _pytest_parser() -> Any:
    """pytest's command-line parser with its built-in plugins' options, built once without running
    pytest (no configuration, conftest or plugin from the environment is read)."""
    from _pytest.config import get_config

    return get_config()._parser


def in_files(name: str, files: Iterable[str]) -> bool:
    """``name`` (a file, folder or test id, relative) names one of ``files`` or a folder of
    them."""
    path = posixpath.normpath(name.split("::", 1)[0])
    if path == ".":
        return any(True for _ in files)
    return any(rel == path or rel.startswith(f"{path}/") for rel in files)


def named_problems(
    named: Sequence[str], items: Sequence[str], outcomes: Mapping[str, str]
) -> list[str]:
    """Why each named test did not pass: not collected, or its outcome."""
    problems = []
    for test in named:
        matching = [item for item in items if _covers(test, item)]
        if not matching:
            problems.append(f"{test} was not collected (missing or deselected)")
            continue
        bad = [
            f"{item} {outcomes.get(item, 'did not run')}"
            for item in matching
            if outcomes.get(item) != "passed"
        ]
        if bad:
            more = f" and {len(bad) - MAX_LISTED} more" if len(bad) > MAX_LISTED else ""
            problems.append(f"{test} did not pass: {', '.join(bad[:MAX_LISTED])}{more}")
    return problems


def lost_tests(before: Sequence[str], now: Sequence[str], *, writes_tests: bool) -> str | None:
    """What the judge's run lost of the pre-step collection ``before``: a step that does not
    write tests keeps every test; a test writer may rename, never collect fewer."""
    if writes_tests:
        if len(now) < len(before):
            return f"collected {len(now)} tests, the code before the step had {len(before)}"
        return None
    missing = sorted(set(before) - set(now))
    if not missing:
        return None
    more = f" and {len(missing) - MAX_LISTED} more" if len(missing) > MAX_LISTED else ""
    return (
        f"{len(missing)} of the {len(before)} tests collected before the step were not collected: "
        + ", ".join(missing[:MAX_LISTED])
        + more
    )


def _covers(name: str, nodeid: str) -> bool:
    """``name`` (a file, folder, class or test id) includes ``nodeid``."""
    name = name.rstrip("/")
    return nodeid == name or nodeid.startswith((f"{name}::", f"{name}[", f"{name}/"))


__all__ = [
    "command_paths",
    "in_files",
    "lost_tests",
    "named_problems",
    "named_tests",
    "named_tests_command",
    "pre_step_command",
]
