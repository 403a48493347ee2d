"""Tests the operator named: each must be collected and pass, and a run may not lose any.

The operator names tests three ways: ``fail_to_pass`` and ``pass_to_pass`` in a step (node ids or
files, as SWE-bench names them), and the tests the step's test command runs as they stand before
the step (the snapshot's). :func:`named_tests_command` makes sure the command runs the named ones;
:func:`named_problems` says which of them were not collected (missing, deselected) or did not pass
(failed, errored, skipped, xfailed); :func:`lost_tests` which tests of the pre-step collection the
judge's run did not collect.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from veriloop.engines.plan.judge.testrun import is_pytest_command
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
    named = named_tests(step)
    if not named:
        return command
    if command is None:
        return "pytest " + shlex.join(named)
    if not is_pytest_command(command):
        return command
    paths = [token for token in shlex.split(command)[1:] if not token.startswith("-")]
    paths = [path for path in paths if path not in {"-m", "pytest"} and "=" not in path]
    if not paths:
        return command
    extra = [test for test in named if not any(_covers(path, test) for path in paths)]
    return f"{command} {shlex.join(extra)}" if extra else command


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


__all__ = ["lost_tests", "named_problems", "named_tests", "named_tests_command"]
