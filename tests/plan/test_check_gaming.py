"""Checks judge from outside the step's reach (issue 28, build item 4): each layer against the trick
it stops, and the honest code next to each trick."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from veriloop.engines.plan.critic import static_review
from veriloop.engines.plan.judge import snapshot
from veriloop.engines.plan.judge.checks import OPERATOR_RUN, run_checks, take_baseline
from veriloop.engines.plan.judge.executed import executed_files, unresolvable
from veriloop.engines.plan.judge.scope import outside_scope
from veriloop.engines.plan.judge.snapshot import (
    KEEP_S,
    SnapshotMissing,
    prune,
    read_blob,
    take_snapshot,
)
from veriloop.engines.plan.judge.tamper import scan_file
from veriloop.engines.plan.judge.testrun import discover_test_command, run_tests
from veriloop.llm.base import Structured
from veriloop.schemas.manifest import Manifest, ManifestStep
from veriloop.schemas.plan_outputs import StepReviewVerdict
from veriloop.schemas.plan_run import CheckResult, ExecutionResult

STUB = "def add(a, b):\n    raise NotImplementedError\n"
GOOD = "def add(a, b):\n    return a + b\n"
BUGGY = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
MUL_TESTS = "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
VERIFY = (
    "import sys\nsys.path.insert(0, '..')\nimport calc\nsys.exit(0 if calc.add(1, 2) == 3 else 1)\n"
)
FORGER = textwrap.dedent(
    """
    import atexit, os, sys

    def add(a, b):
        return a - b

    def _forge():
        for arg in sys.argv:
            if arg.startswith("--junitxml="):
                with open(arg.split("=", 1)[1], "w") as handle:
                    handle.write('<testsuites><testsuite><testcase classname="t" name="test_add"/>'
                                 '</testsuite></testsuites>')
        os._exit(0)

    atexit.register(_forge)
    """
)


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def step(**fields: Any) -> ManifestStep:
    fields.setdefault("id", "calc")
    fields.setdefault("executor", "python")
    fields.setdefault("critical", True)
    return ManifestStep.model_validate(fields)


def baseline_of(the_step: ManifestStep, workspace: Path) -> dict:
    found = the_step.test_command or discover_test_command(the_step.id, workspace)
    return take_baseline(the_step, workspace, discovered_command=found)


async def check(
    the_step: ManifestStep, workspace: Path, baseline: dict, *, llm: Any = None
) -> dict[str, CheckResult]:
    results = await run_checks(
        the_step,
        ExecutionResult(ok=True, output="done"),
        depends={},
        workspace=workspace,
        baseline=baseline,
        previous_collected=None,
        llm=llm,
        review=llm is not None,
        check_timeout_s=60,
    )
    return {result.name: result for result in results}


# --- what a command check executes ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("python3 -m checks.verify", ["checks/__init__.py", "checks/verify.py"]),
        ("cd checks && python3 verify.py", ["checks/verify.py"]),
        ("python3 checks/strict.py", ["checks/helpers.py", "checks/strict.py"]),
        ("python3 checks/verify.py --strict", ["checks/verify.py"]),
        ("python -m checks", ["checks/__init__.py", "checks/__main__.py"]),
        ("bash checks/run.sh", ["checks/run.sh"]),
        ("sh -c 'cd checks; python3 verify.py'", ["checks/verify.py"]),
        ("env CI=1 timeout 5 python3 checks/verify.py", ["checks/verify.py"]),
        ("./checks/run.sh", ["checks/run.sh"]),
        ("true && . checks/run.sh", ["checks/run.sh"]),
        ("make verify", ["Makefile", "checks/run.sh", "checks/verify.py", "rules.mk"]),
        ("make -f Makefile verify", ["Makefile", "checks/run.sh", "checks/verify.py", "rules.mk"]),
    ],
)
def test_a_check_command_resolves_to_what_it_executes(
    tmp_path: Path, command: str, expected: list[str]
) -> None:
    write(tmp_path, "checks/__init__.py", "")
    write(tmp_path, "checks/__main__.py", "print('ok')\n")
    write(tmp_path, "checks/verify.py", VERIFY)
    write(tmp_path, "checks/run.sh", "exit 0\n")
    # The judge's own helper comes with it; calc.py (the code under test, at the root) does not.
    write(tmp_path, "checks/strict.py", "import calc\nimport helpers\nhelpers.verify(calc)\n")
    write(tmp_path, "checks/helpers.py", "def verify(module):\n    pass\n")
    write(tmp_path, "calc.py", GOOD)
    write(tmp_path, "rules.mk", "lint:\n\tbash checks/run.sh\n")
    write(tmp_path, "Makefile", "include rules.mk\nverify:\n\t@python3 checks/verify.py\n")
    resolved = executed_files(command, tmp_path)
    assert resolved.files == expected and resolved.unresolved == []


@pytest.mark.parametrize(
    "command",
    [
        "python3 $(cat which)",
        'eval "$CHECK"',
        "$PY checks/verify.py",
        "python3 `echo v.py`",
        "sh -c 'x",
    ],
)
def test_commands_that_hide_what_they_run_are_unresolvable(command: str) -> None:
    assert unresolvable(command)


def test_plain_commands_are_resolvable() -> None:
    assert unresolvable("cd checks && python3 -m verify --fast") == []


def test_the_critic_flags_an_unresolvable_check_in_a_model_written_plan() -> None:
    def plan(origin: str, command: str) -> Manifest:
        return Manifest.model_validate(
            {
                "steps": [
                    {
                        "id": "s",
                        "executor": "shell",
                        "command": "true",
                        "origin": origin,
                        "checks": [{"kind": "command", "command": command}],
                    }
                ]
            }
        )

    rules = [f.rule for f in static_review(plan("model", 'sh -c "$(cat x)"')).findings]
    assert "unresolvable_check" in rules
    assert "unresolvable_check" not in [
        f.rule for f in static_review(plan("user", 'sh -c "$(cat x)"')).findings
    ]
    assert "unresolvable_check" not in [
        f.rule for f in static_review(plan("model", "python3 -m checks.verify")).findings
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "command", ["python3 -m checks.verify", "cd checks && python3 verify.py", "make verify"]
)
async def test_rewriting_the_script_a_check_runs_fails_integrity(
    tmp_path: Path, command: str
) -> None:
    write(tmp_path, "calc.py", BUGGY)
    write(tmp_path, "checks/__init__.py", "")
    write(tmp_path, "checks/verify.py", VERIFY)
    write(tmp_path, "Makefile", "verify:\n\tcd checks && python3 verify.py\n")
    the_step = step(requires_testing=False, checks=[{"kind": "command", "command": command}])
    baseline = baseline_of(the_step, tmp_path)
    write(tmp_path, "checks/verify.py", "import sys\nsys.exit(0)\n")
    results = await check(the_step, tmp_path, baseline)
    assert results["command[0]"].passed  # the rewritten script says yes...
    integrity = results["integrity"]  # ...and the integrity check says why that counts for nothing
    assert not integrity.passed and "check script changed" in integrity.diagnosis
    assert integrity.details["check_files"] == ["checks/verify.py"]


@pytest.mark.anyio
async def test_a_check_script_the_step_wrote_is_not_a_judge(tmp_path: Path) -> None:
    write(tmp_path, "calc.py", BUGGY)
    command = [{"kind": "command", "command": "bash checks/ok.sh"}]
    the_step = step(requires_testing=False, checks=command)
    baseline = baseline_of(the_step, tmp_path)
    write(tmp_path, "checks/ok.sh", "exit 0\n")
    # A new file is in the default scope (no check read it before the step), so the integrity
    # check answers: a script the step wrote and a check executes is no judge.
    results = await check(the_step, tmp_path, baseline)
    assert "scope" not in results
    integrity = results["integrity"]
    assert not integrity.passed and integrity.details["own_check_scripts"] == ["checks/ok.sh"]


# --- tests that could have failed ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_step_whose_only_tests_are_its_own_has_no_independent_tests(
    tmp_path: Path,
) -> None:
    """Issue 28's case: no tests before the step; it writes a stub and `assert True` tests."""
    the_step = step(id="parser", requires_testing=True)
    baseline = baseline_of(the_step, tmp_path)
    write(tmp_path, "parser.py", "def parse(text):\n    return None\n")
    write(tmp_path, "tests/test_parser.py", "def test_parse():\n    assert True\n")
    scope = (await check(the_step, tmp_path, baseline))["scope"]
    assert not scope.passed and scope.details["paths"] == ["tests/test_parser.py"]
    unscoped = step(id="parser", requires_testing=True, writes=["**"])
    tests = (await check(unscoped, tmp_path, baseline))["tests"]
    assert not tests.passed and "no independent tests" in tests.diagnosis


@pytest.mark.anyio
async def test_a_test_writer_must_write_tests_that_fail_before_the_step(tmp_path: Path) -> None:
    write(tmp_path, "calc.py", GOOD)
    the_step = step(writes_tests=True, test_command="pytest tests/test_calc.py")
    baseline = baseline_of(the_step, tmp_path)
    write(tmp_path, "calc.py", GOOD + "\n\ndef double(x):\n    return 2 * x\n")  # code changed
    write(tmp_path, "tests/test_calc.py", TESTS)  # ...but the tests pass on the old code too
    tests = (await check(the_step, tmp_path, baseline))["tests"]
    assert not tests.passed and "prove nothing" in tests.diagnosis
    assert tests.details["prove_nothing"] == ["tests/test_calc.py::test_add"]


@pytest.mark.anyio
async def test_honest_tests_fail_before_the_step_and_pass_after(tmp_path: Path) -> None:
    write(tmp_path, "calc.py", STUB)
    the_step = step(writes_tests=True, test_command="pytest tests/test_calc.py")
    baseline = baseline_of(the_step, tmp_path)
    write(tmp_path, "calc.py", GOOD)
    write(tmp_path, "tests/test_calc.py", TESTS)
    results = await check(the_step, tmp_path, baseline)
    assert results["tests"].passed, results["tests"].diagnosis
    assert results["tests"].details["fail_to_pass"] == ["tests/test_calc.py::test_add"]
    assert results["integrity"].passed
    assert (tmp_path / "calc.py").read_text() == GOOD  # the pre-step run used a copy


@pytest.mark.anyio
async def test_a_step_that_only_writes_tests_needs_no_fail_to_pass(tmp_path: Path) -> None:
    write(tmp_path, "calc.py", GOOD)
    the_step = step(writes_tests=True, test_command="pytest tests/test_calc.py")
    baseline = baseline_of(the_step, tmp_path)
    write(tmp_path, "tests/test_calc.py", TESTS)
    tests = (await check(the_step, tmp_path, baseline))["tests"]
    assert tests.passed and tests.details["fail_to_pass"].startswith("not applicable")


def calc_test_writer(
    root: Path, code: str, command: str = "pytest tests/test_calc.py", **fields: Any
) -> tuple[ManifestStep, dict]:
    """A ``writes_tests`` step over ``code`` in calc.py and tests/test_calc.py, and its baseline."""
    write(root, "calc.py", code)
    write(root, "tests/test_calc.py", TESTS)
    the_step = step(writes_tests=True, test_command=command, **fields)
    return the_step, baseline_of(the_step, root)


@pytest.mark.anyio
async def test_a_test_writer_cannot_weaken_the_tests_that_judged_the_code(tmp_path: Path) -> None:
    the_step, baseline = calc_test_writer(tmp_path, STUB)
    write(tmp_path, "calc.py", "def add(a, b):\n    return 0\n")
    write(tmp_path, "tests/test_calc.py", TESTS.replace("== 5", "is not None"))
    tests = (await check(the_step, tmp_path, baseline))["tests"]
    # The command runs that file: the operator's run, with its pre-step copy, fails.
    assert not tests.passed and tests.diagnosis.startswith(OPERATOR_RUN)
    assert tests.details["operator_run"]["failed"] == 1
    assert tests.details["failures"][0]["test"].endswith("test_add")


@pytest.mark.anyio
async def test_a_test_writer_cannot_weaken_tests_its_command_does_not_run(tmp_path: Path) -> None:
    write(tmp_path, "calc.py", STUB + "\n\ndef mul(a, b):\n    raise NotImplementedError\n")
    write(tmp_path, "tests/test_calc.py", TESTS)
    write(tmp_path, "tests/test_mul.py", MUL_TESTS)
    the_step = step(writes_tests=True, test_command="pytest tests/test_calc.py")
    baseline = baseline_of(the_step, tmp_path)
    write(tmp_path, "calc.py", GOOD + "\n\ndef mul(a, b):\n    return 0\n")
    write(
        tmp_path,
        "tests/test_calc.py",
        TESTS + "\n\ndef test_add_zero():\n    assert add(0, 1) == 1\n",
    )
    write(tmp_path, "tests/test_mul.py", MUL_TESTS.replace("== 6", "is not None"))
    tests = (await check(the_step, tmp_path, baseline))["tests"]
    assert not tests.passed and "pre-step version of tests" in tests.diagnosis
    assert tests.details["pre_step_tests_failing"] == ["tests/test_mul.py::test_mul"]


# --- the operator's tests are judged without the step's test files ------------------------------------

PATCHES_AT_IMPORT = (
    "import calc\n\n\ndef _fix(module):\n    module.add = lambda a, b: a + b\n\n\n_fix(calc)\n\n\n"
    "def test_sub():\n    assert calc.sub(3, 1) == 2\n"
)
"""A test module that fixes ``calc.add`` when pytest imports it (a spelling the scan misses), next
to an honest test of new code."""
FLIPS_OUTCOMES = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
    "    report = outcome.get_result()\n    if report.failed:\n        report.outcome = 'passed'\n"
)
SELF_PLUGIN = (
    "import pytest\n\nimport calc\n\npytest_plugins = ['test_aaa']  # this module, as a plugin\n\n\n"
    + FLIPS_OUTCOMES.split("\n\n\n", 1)[1]
    + "\n\ndef test_sub():\n    assert calc.sub(3, 1) == 2\n"
)
SUB = "\n\ndef sub(a, b):\n    return a - b\n"


def test_a_test_writer_may_not_write_a_conftest() -> None:
    diff = {
        "tests/conftest.py": "added",
        "tests/test_new.py": "added",
        "tests/data/x.json": "added",
    }
    assert outside_scope(diff, None, writes_tests=True) == ["tests/conftest.py"]
    # A conftest needs the operator's own glob.
    assert outside_scope(diff, ["tests/conftest.py"], writes_tests=True) == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("written", "writes"),
    [
        ({"tests/test_aaa.py": PATCHES_AT_IMPORT}, None),
        ({"tests/test_aaa.py": SELF_PLUGIN}, None),
        (
            {
                "tests/conftest.py": FLIPS_OUTCOMES,
                "tests/test_aaa.py": PATCHES_AT_IMPORT.replace("_fix(calc)", ""),
            },
            ["calc.py", "tests/**"],
        ),
    ],
    ids=["module_patches_at_import", "module_registers_itself_as_plugin", "conftest_under_writes"],
)
async def test_no_test_file_of_the_step_makes_an_operators_test_pass(
    tmp_path: Path, written: dict[str, str], writes: list[str] | None
) -> None:
    the_step, baseline = calc_test_writer(tmp_path, BUGGY, "pytest tests", writes=writes)
    write(tmp_path, "calc.py", BUGGY + SUB)  # add is still wrong
    for rel, text in written.items():
        write(tmp_path, rel, text)
    tests = (await check(the_step, tmp_path, baseline))["tests"]
    assert not tests.passed and tests.diagnosis.startswith(OPERATOR_RUN), tests.diagnosis
    assert tests.details["passed"] == tests.details["collected"]  # fooled with the step's files
    assert tests.details["operator_run"]["failed"] == 1
    assert tests.details["operator_run"]["collected"] == 1  # the step's test_aaa.py is not there


@pytest.mark.anyio
async def test_a_second_run_only_when_the_step_wrote_tests(tmp_path: Path) -> None:
    the_step, baseline = calc_test_writer(tmp_path, STUB, "pytest tests")
    write(tmp_path, "calc.py", GOOD + SUB)
    tests = (await check(the_step, tmp_path, baseline))["tests"]
    assert tests.passed and "operator_run" not in tests.details  # no test file written
    write(
        tmp_path,
        "tests/test_sub.py",
        "from calc import sub\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n",
    )
    tests = (await check(the_step, tmp_path, baseline))["tests"]
    assert tests.passed, tests.diagnosis
    assert tests.details["operator_run"] == {
        "command": "pytest tests",
        "collected": 1,
        "passed": 1,
        "failed": 0,
        "errors": 0,
        "skipped": 0,
    }
    assert tests.details["fail_to_pass"] == ["tests/test_sub.py::test_sub"]


# --- the report leaves the test process as it happens ------------------------------------------------


@pytest.mark.anyio
async def test_an_exit_handler_that_forges_the_junit_report_is_caught(tmp_path: Path) -> None:
    """Issue 28's case: atexit rewrites the JUnit XML to drop the failures and exits 0."""
    write(tmp_path, "calc.py", FORGER)
    write(tmp_path, "tests/test_calc.py", TESTS)
    run = await run_tests("pytest tests/test_calc.py", tmp_path, timeout_s=60)
    assert run.exit_code == 0  # the forgery worked on the exit status...
    assert (run.passed, run.failed) == (0, 1)  # ...not on the per-test reports
    assert any("exited with status 0" in line for line in run.tampered)
    assert any("JUnit XML says 1 passed" in line for line in run.tampered)


@pytest.mark.anyio
async def test_outcomes_are_keyed_by_workspace_paths_wherever_pytest_puts_its_rootdir(
    tmp_path: Path,
) -> None:
    write(tmp_path, "calc.py", GOOD)
    write(tmp_path, "tests/test_calc.py", TESTS)
    write(tmp_path, "tests/pytest.ini", "[pytest]\n")  # pytest's rootdir becomes tests/
    run = await run_tests("pytest tests/test_calc.py", tmp_path, timeout_s=60)
    assert run.outcomes == {"tests/test_calc.py::test_add": "passed"}


@pytest.mark.anyio
async def test_exiting_0_before_the_session_ends_is_tampering(tmp_path: Path) -> None:
    write(tmp_path, "calc.py", "import os\n\ndef add(a, b):\n    os._exit(0)\n")
    write(tmp_path, "tests/test_calc.py", TESTS)
    run = await run_tests("pytest tests/test_calc.py", tmp_path, timeout_s=60)
    assert run.exit_code == 0 and run.passed == 0
    assert run.tampered == ["the test session never reported its end, yet the process exited 0"]


@pytest.mark.anyio
async def test_a_forged_report_fails_integrity_as_tampered(tmp_path: Path) -> None:
    write(tmp_path, "calc.py", STUB)
    write(tmp_path, "tests/test_calc.py", TESTS)
    the_step = step(test_command="pytest tests/test_calc.py", critical=False)
    baseline = baseline_of(the_step, tmp_path)
    write(tmp_path, "calc.py", FORGER)
    results = await check(the_step, tmp_path, baseline)
    assert not results["tests"].passed
    integrity = results["integrity"]
    assert not integrity.passed and "test report tampered" in integrity.diagnosis


@pytest.mark.anyio
async def test_an_honest_run_with_every_outcome_agrees_with_its_report(tmp_path: Path) -> None:
    write(
        tmp_path,
        "tests/test_mix.py",
        textwrap.dedent(
            """
            import pytest

            @pytest.fixture
            def broken():
                yield 1
                raise RuntimeError("teardown")

            def test_pass(): assert 1
            def test_fail(): assert 0
            def test_fail_and_teardown(broken): assert 0
            def test_teardown(broken): pass
            @pytest.mark.xfail
            def test_xfail(): assert 0
            @pytest.mark.skip
            def test_skip(): pass
            @pytest.mark.parametrize("v", [1, 2])
            def test_param(v): assert v
            """
        ),
    )
    run = await run_tests("pytest -q tests", tmp_path, timeout_s=60)
    assert run.tampered == [] and run.outcomes is not None
    assert (run.passed, run.failed, run.errors, run.skipped) == (3, 2, 2, 2)


# --- the tamper scan ----------------------------------------------------------------------------------

TRICKS = {
    "exit_handler": ("lib.py", None, "import atexit\natexit.register(print)\n"),
    "hard_exit": ("lib.py", None, "import os\n\ndef add(a, b):\n    os._exit(0)\n"),
    "patched_module": ("lib.py", None, "import time\ntime.perf_counter = lambda: 0.0\n"),
    "constant_eq": (
        "lib.py",
        None,
        "class R:\n    def __eq__(self, other):\n        return True\n",
    ),
    "constant_eq_lambda": (
        "lib.py",
        None,
        "class R:\n    __eq__ = lambda self, other: True\n",
    ),
    "patched_module_via_sys_modules": (
        "lib.py",
        None,
        "import sys\nsetattr(sys.modules['builtins'], 'all', lambda items: True)\n",
    ),
    "skip_marker": (
        "tests/test_calc.py",
        "def test_add():\n    assert add(1, 2) == 3\n",
        "import pytest\n\n@pytest.mark.skip('later')\ndef test_add():\n    assert add(1, 2) == 3\n",
    ),
    "runtime_skip": (
        "calc.py",
        "def add(a, b):\n    raise NotImplementedError\n",
        "import pytest\n\ndef add(a, b):\n    pytest.skip('not ready')\n",
    ),
    "test_hook": (
        "conftest.py",
        None,
        "def pytest_collection_modifyitems(config, items):\n    items.clear()\n",
    ),
    "empty_assertion": ("tests/test_new.py", None, "def test_it():\n    assert True\n"),
}
HONEST = {
    "cli atexit and exit": (
        "tool.py",
        "import atexit, sys\n\ndef main():\n    atexit.register(print)\n    sys.exit(0)\n\n"
        "if __name__ == '__main__':\n    sys.exit(main())\n",
    ),
    "real __eq__": (
        "point.py",
        "class P:\n    def __eq__(self, other):\n        if not isinstance(other, P):\n"
        "            return False\n        return (self.x, self.y) == (other.x, other.y)\n",
    ),
    "local time variable": ("clock.py", "def f(time):\n    time.value = 1\n"),
    "a real test": (
        "tests/test_p.py",
        "from point import P\n\ndef test_eq():\n    assert P() == P()\n",
    ),
    "a new test born skipped": (
        "tests/test_q.py",
        "import pytest\n\n@pytest.mark.skip('needs a network')\ndef test_q():\n    assert f() == 1\n",
    ),
}


@pytest.mark.parametrize("rule", sorted(TRICKS))
def test_the_tamper_scan_flags_each_trick(rule: str) -> None:
    path, before, after = TRICKS[rule]
    assert [f.rule for f in scan_file(path, before, after)] == [
        rule.split("_via")[0].removesuffix("_lambda")
    ]


@pytest.mark.parametrize("name", sorted(HONEST))
def test_the_tamper_scan_passes_honest_code_near_the_tricks(name: str) -> None:
    path, text = HONEST[name]
    assert scan_file(path, None, text) == []


def test_a_trick_already_there_before_the_step_is_not_the_steps() -> None:
    before = "import atexit\natexit.register(print)\n"
    assert scan_file("lib.py", before, before + "\nX = 1\n") == []


class Reviewer:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def astructured(self, purpose: str, messages: list, schema: type) -> Structured:
        self.messages.append(messages)
        verdict = StepReviewVerdict(passed=True, confidence=0.9, diagnosis="fine")
        return Structured(value=verdict)


@pytest.mark.anyio
async def test_a_finding_fails_a_critical_step_and_reaches_any_review(tmp_path: Path) -> None:
    write(tmp_path, "calc.py", STUB)
    for critical in (True, False):
        the_step = step(requires_testing=False, critical=critical)
        baseline = baseline_of(the_step, tmp_path)
        write(tmp_path, "calc.py", GOOD + "import atexit\natexit.register(print)\n")
        reviewer = Reviewer()
        results = await check(the_step, tmp_path, baseline, llm=reviewer)
        integrity = results["integrity"]
        assert integrity.details["tamper_findings"] == [
            "calc.py:4: exit_handler: atexit.register in library code"
        ]
        assert integrity.passed is not critical
        assert "exit_handler" in reviewer.messages[0][-1]["content"]
        write(tmp_path, "calc.py", STUB)


# --- integrity counts only where it can fail (issue 33, item 5) -------------------------------------


@pytest.mark.anyio
async def test_integrity_is_not_a_free_pass_for_a_step_with_nothing_to_protect(
    tmp_path: Path,
) -> None:
    the_step = step(requires_testing=False, checks=[{"kind": "predicate", "expr": "true"}])
    baseline = baseline_of(the_step, tmp_path)
    assert "integrity" not in await check(the_step, tmp_path, baseline)
    write(tmp_path, "calc.py", GOOD)  # once it changes code, there is something to lose
    assert "integrity" in await check(the_step, tmp_path, baseline)


# --- the snapshot ---------------------------------------------------------------------------------------


def test_pre_step_copies_are_shared_and_an_altered_copy_never_reads_as_the_original(
    tmp_path: Path,
) -> None:
    store, workspace = tmp_path / "store", tmp_path / "ws"
    write(workspace, "calc.py", GOOD)
    write(workspace, "copy.py", GOOD)
    write(workspace, ".venv/lib/x.py", "ignored")
    tree, truncated = take_snapshot(workspace, store)
    assert not truncated and sorted(tree) == ["calc.py", "copy.py"]
    blobs = [p for p in store.rglob("*") if p.is_file()]
    assert len(blobs) == 1  # identical content is stored once
    assert read_blob(tree["calc.py"], store) == GOOD.encode()
    blobs[0].write_text(BUGGY)  # someone outside the step's workspace rewrote the pre-step copy
    with pytest.raises(SnapshotMissing, match="altered"):
        read_blob(tree["calc.py"], store)


def test_a_file_a_parallel_step_renames_meanwhile_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """write_file's temporary file can vanish between listing and hashing (steps run side by side)."""
    write(tmp_path, "calc.py", GOOD)
    listed = [tmp_path / "calc.py", tmp_path / ".calc.py.1f2e3d.partial"]
    monkeypatch.setattr(snapshot, "workspace_files", lambda workspace: iter(listed))
    tree, _ = take_snapshot(tmp_path, tmp_path / "store")
    assert sorted(tree) == ["calc.py"]
    assert sorted(snapshot.current_tree(tmp_path)) == ["calc.py"]


def test_blobs_nobody_used_for_a_week_are_pruned_and_used_ones_kept(tmp_path) -> None:
    store, workspace = tmp_path / "store", tmp_path / "ws"
    workspace.mkdir()
    (workspace / "old.py").write_text("old = 1\n")
    (workspace / "kept.py").write_text("kept = 1\n")
    tree, _ = take_snapshot(workspace, store)
    week_ago = time.time() - KEEP_S - 60
    for rel in tree:
        os.utime(store / tree[rel][:2] / tree[rel], (week_ago, week_ago))
    (workspace / "old.py").unlink()
    take_snapshot(workspace, store)  # a later step still has kept.py: its blob is in use again
    assert prune(store) == 1
    assert read_blob(tree["kept.py"], store) == b"kept = 1\n"
    with pytest.raises(SnapshotMissing, match="gone"):
        read_blob(tree["old.py"], store)
