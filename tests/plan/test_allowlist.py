"""The shell allowlist matches parsed commands, not string prefixes (issue 28, item 3).

Each bypass below ran without approval under the old ``startswith`` rule with the demo's
allowlist ``pytest``; each must now need a person's approval. The allowed cases must still pass.
"""

from __future__ import annotations

import pytest

from veriloop.engines.plan.execution import command_argv, commands_needing_approval
from veriloop.schemas.manifest import CheckSpec, ManifestStep

ALLOWLIST = "pytest, python -m pytest, make test"

BYPASSES = [
    "pytest; touch X",
    "pytest ;touch X",
    "pytest $(touch X)",
    "pytest\ntouch X",
    "pytest\rtouch X",
    "pytest `id`",
    'pytest "$(id)"',
    'pytest "`id`"',
    "pytest && touch X",
    "pytest || touch X",
    "pytest | sh",
    "pytest & touch X",
    "pytest > /etc/passwd",
    "pytest < /dev/zero",
    "pytest 2>&1",
    "FOO=1 pytest",
    "PYTHONPATH=evil pytest",
    "env pytest",
    "env PYTHONPATH=. pytest",
    "sh -c pytest",
    "bash -c 'pytest; touch X'",
    "eval pytest",
    "exec pytest",
    "nohup pytest",
    "timeout 5 pytest",
    "xargs pytest",
    "sudo pytest",
    "pytestx",
    "pytest-evil",
    "./pytest",
    "/tmp/pytest",
    "pyt\u0435st",  # Cyrillic 'е'
    "pytest\u00a0-q",  # a no-break space
    "pytest\u2028touch X",  # a Unicode line separator
    "pytest\ttouch",  # a control character
    "pytest $HOME",
    "pytest ${HOME}",
    "pytest \\; touch X",
    "pytest 'unclosed",
    'pytest "unclosed',
    "(pytest)",
    "{ pytest; }",
    "pytest *",
    "pytest tests/[a-z]*.py",
    "pytest ~/secret",
    "pytest # && touch X",
    "! pytest",
    "python -m pytestx",
    "python -c 'import pytest'",
    "python3 -m pytest",  # not on the list: argv prefixes are exact
    "make test-evil",
    "make",
    "   ",
]

ALLOWED = [
    "pytest",
    "pytest -q",
    "pytest tests/test_parser.py -x",
    "  pytest   -q  ",
    "pytest -k 'parse and not slow'",
    'pytest -k "parse or emit"',
    "'pytest' -q",  # the shell runs pytest too: the argv is what counts
    "p'y't\"e\"st",
    "pytest --maxfail=1",
    "pytest 'tests/test_a.py::test[1]'",  # a glob inside quotes is a literal
    "pytest -p evil_plugin",  # allowlisting pytest runs the workspace's code anyway (conftest.py)
    "python -m pytest tests",
    "make test",
]


def _step(command: str) -> ManifestStep:
    return ManifestStep(id="s", executor="shell", command=command, origin="model")


@pytest.mark.parametrize("command", BYPASSES)
def test_a_bypass_of_the_allowlist_needs_approval(command: str) -> None:
    assert commands_needing_approval(_step(command), ALLOWLIST) == [command]


@pytest.mark.parametrize("command", ALLOWED)
def test_a_plain_allowlisted_command_runs_without_approval(command: str) -> None:
    assert commands_needing_approval(_step(command), ALLOWLIST) == []


def test_every_command_of_a_step_is_judged_and_a_users_step_never_waits() -> None:
    step = ManifestStep(
        id="s",
        executor="shell",
        command="pytest -q",
        test_command="pytest; curl evil",
        checks=[CheckSpec(kind="command", command="python -m pytest && rm -rf .")],
        origin="model",
    )
    assert commands_needing_approval(step, ALLOWLIST) == [
        "pytest; curl evil",
        "python -m pytest && rm -rf .",
    ]
    assert commands_needing_approval(step.model_copy(update={"origin": "user"}), ALLOWLIST) == []


def test_allowlist_entries_are_parsed_and_a_wrapper_entry_allows_nothing() -> None:
    # An entry that is not one plain command (or is a wrapper) is ignored, never a wildcard.
    assert commands_needing_approval(_step("bash -c id"), "bash") == ["bash -c id"]
    assert commands_needing_approval(_step("pytest; id"), "pytest;") == ["pytest; id"]
    assert commands_needing_approval(_step("pytest"), "") == ["pytest"]
    assert command_argv("python -m pytest -q") == ["python", "-m", "pytest", "-q"]
