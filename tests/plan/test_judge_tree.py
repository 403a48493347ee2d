"""The judge's tree, named tests and hidden tests: checks run on the pre-step snapshot plus the
step's in-scope changes, never on the live workspace."""

from __future__ import annotations

import os
import stat
import textwrap
from pathlib import Path
from typing import Any

import pytest
import step_functions
from langgraph.checkpoint.memory import InMemorySaver
from plan_testkit import judge_attempt

from veriloop.context import PlanContext
from veriloop.engines.plan.judge import tree as tree_module
from veriloop.engines.plan.judge.checks import take_baseline
from veriloop.engines.plan.judge.hidden import hide, restore
from veriloop.engines.plan.judge.named import named_tests_command, pre_step_command
from veriloop.engines.plan.judge.snapshot import SnapshotMissing, active_store, take_snapshot
from veriloop.engines.plan.judge.tree import build_tree, judge_files
from veriloop.plans import PlanRunner
from veriloop.schemas.manifest import ManifestStep

GOOD = "def add(a, b):\n    return a + b\n"
BUGGY = "def add(a, b):\n    return a - b\n"
TESTS = """\
import pytest
from calc import add


def test_add():
    assert add(2, 3) == 5


@pytest.mark.parametrize("a", [1, 2])
def test_zero(a):
    assert add(a, 0) == a
"""


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def step(**fields: Any) -> ManifestStep:
    return ManifestStep.model_validate({"id": "calc", "executor": "python", **fields})


def project(root: Path, code: str = BUGGY) -> Path:
    write(root, "calc.py", code)
    write(root, "tests/test_calc.py", TESTS)
    write(root, "pytest.ini", "[pytest]\npythonpath = .\n")
    return root


def test_the_tree_is_read_only_links_to_the_snapshot_plus_copies(tmp_path: Path) -> None:
    project(tmp_path)
    tree, _ = take_snapshot(tmp_path)
    write(tmp_path, "calc.py", GOOD)
    judge_tree = build_tree(judge_files(tree, tmp_path, {"calc.py": "changed"}), workspace=tmp_path)
    try:
        root = judge_tree.root
        assert (root / "calc.py").read_text() == GOOD and (root / "tests/test_calc.py").exists()
        linked = (root / "tests/test_calc.py").stat()
        assert linked.st_nlink >= 2  # a hard link to the store's blob, not a copy
        for path in [root, root / "tests", root / "calc.py", root / "tests/test_calc.py"]:
            mode = stat.S_IMODE(path.stat().st_mode)
            assert mode & 0o222 == 0 and mode & 0o004  # read-only, readable by others
        assert not judge_tree.root.is_relative_to(tmp_path)
        assert judge_tree.scratch not in root.parents
    finally:
        judge_tree.close()
    assert not judge_tree.base.exists()


@pytest.mark.anyio
async def test_tests_run_in_the_tree_with_the_snapshot_config_and_no_step_caches(
    tmp_path: Path,
) -> None:
    project(tmp_path)
    the_step = step(test_command="pytest tests/test_calc.py", writes=["calc.py", "extra/**"])
    baseline = take_baseline(the_step, tmp_path, discovered_command=None)
    write(tmp_path, "calc.py", GOOD)
    # A config file of another name in a folder the scope allows is never read: the snapshot's
    # pytest.ini is passed with -c.
    write(tmp_path, "extra/tox.ini", "[pytest]\naddopts = -k nothing_matches\n")
    # Bytecode forged for the tests is a cache: not a change, and not in the judge's tree.
    write(tmp_path, "tests/__pycache__/test_calc.cpython-311-pytest-8.0.pyc", "garbage")
    results = await judge_attempt(the_step, tmp_path, baseline)
    assert results["tests"].passed, results["tests"].diagnosis
    assert results["tests"].details["collected"] == 3


@pytest.mark.anyio
async def test_a_test_that_writes_into_the_tree_cannot(tmp_path: Path) -> None:
    project(tmp_path, GOOD)
    write(
        tmp_path,
        "tests/test_state.py",
        "from pathlib import Path\n\n\ndef test_writes():\n    Path('state.txt').write_text('x')\n",
    )
    the_step = step(test_command="pytest tests/test_state.py")
    baseline = take_baseline(the_step, tmp_path, discovered_command=None)
    results = await judge_attempt(the_step, tmp_path, baseline)
    assert not results["tests"].passed
    assert not (tmp_path / "state.txt").exists()


@pytest.mark.anyio
async def test_skips_never_pass_a_run(tmp_path: Path) -> None:
    project(tmp_path, GOOD)
    write(
        tmp_path,
        "tests/test_calc.py",
        TESTS + "\n\n@pytest.mark.skip('later')\ndef test_later():\n    pass\n",
    )
    the_step = step(test_command="pytest tests/test_calc.py")
    baseline = take_baseline(the_step, tmp_path, discovered_command=None)
    tests = (await judge_attempt(the_step, tmp_path, baseline))["tests"]
    assert not tests.passed and "1 of 4 tests were skipped" in tests.diagnosis


@pytest.mark.anyio
async def test_named_tests_must_each_be_collected_and_pass(tmp_path: Path) -> None:
    project(tmp_path)
    write(
        tmp_path,
        "tests/test_more.py",
        "import pytest\n\n\n@pytest.mark.xfail\ndef test_x():\n    assert False\n",
    )
    the_step = step(
        test_command="pytest tests/test_calc.py",
        fail_to_pass=["tests/test_calc.py::test_add"],
        pass_to_pass=["tests/test_calc.py::test_zero", "tests/test_calc.py::test_gone"],
    )
    baseline = take_baseline(the_step, tmp_path, discovered_command=None)
    write(tmp_path, "calc.py", GOOD)
    tests = (await judge_attempt(the_step, tmp_path, baseline))["tests"]
    assert not tests.passed
    assert "tests/test_calc.py::test_gone was not collected" in tests.diagnosis
    assert "test_zero did not pass" not in tests.diagnosis
    # An xfailed named test did not pass.
    xfail = step(test_command="pytest tests/test_calc.py", pass_to_pass=["tests/test_more.py"])
    tests = (await judge_attempt(xfail, tmp_path, baseline))["tests"]
    assert not tests.passed and "tests/test_more.py did not pass" in tests.diagnosis


def test_named_tests_join_a_pytest_command() -> None:
    named = step(fail_to_pass=["tests/test_b.py::test_x"], pass_to_pass=["tests/test_a.py"])
    assert named_tests_command(named, "pytest tests/test_a.py -q") == (
        "pytest tests/test_a.py -q tests/test_b.py::test_x"
    )
    assert named_tests_command(named, None) == "pytest tests/test_b.py::test_x tests/test_a.py"
    assert named_tests_command(named, "pytest") == "pytest"  # the configuration's test paths
    assert named_tests_command(step(), "make test") == "make test"


@pytest.mark.parametrize(
    "command", ["pytest -k add", "pytest -m slow", "pytest -p no:randomly", "pytest --rootdir . -q"]
)
def test_an_options_value_is_not_a_path(command: str) -> None:
    """pytest's own parser reads the command: no paths here, so the configuration's test paths
    run and the named tests are not made the only ones."""
    named = step(fail_to_pass=["tests/test_b.py::test_x"])
    assert named_tests_command(named, command) == command
    assert named_tests_command(named, f"{command} tests/test_a.py") == (
        f"{command} tests/test_a.py tests/test_b.py::test_x"
    )


def test_the_operators_command_leaves_out_what_the_step_added() -> None:
    named = step(fail_to_pass=["tests/test_new.py::test_x"], pass_to_pass=["tests/test_a.py::t"])
    files = ["calc.py", "tests/test_a.py"]
    assert pre_step_command(named, "pytest tests/test_a.py tests/test_new.py -q", files) == (
        "pytest tests/test_a.py -q"
    )
    assert pre_step_command(named, "pytest tests/test_new.py", files) == "pytest tests/test_a.py::t"
    assert pre_step_command(step(), "pytest tests/test_new.py", files) is None
    assert pre_step_command(named, "pytest", files) == "pytest"
    assert pre_step_command(named, "make test", files) == "make test"


@pytest.mark.anyio
async def test_a_run_that_collects_fewer_of_the_snapshot_tests_has_not_passed(
    tmp_path: Path,
) -> None:
    project(tmp_path)
    write(tmp_path, "cases.py", "CASES = [1, 2]\n")
    write(
        tmp_path,
        "tests/test_calc.py",
        TESTS.replace("[1, 2]", "__import__('cases').CASES"),
    )
    the_step = step(test_command="pytest tests/test_calc.py")
    baseline = take_baseline(the_step, tmp_path, discovered_command=None)
    write(tmp_path, "calc.py", GOOD)
    write(tmp_path, "cases.py", "CASES = [1]\n")  # in scope: the code drives parametrisation
    tests = (await judge_attempt(the_step, tmp_path, baseline))["tests"]
    assert not tests.passed
    assert "1 of the 3 tests collected before the step were not collected" in tests.diagnosis


@pytest.mark.anyio
async def test_hidden_tests_are_only_in_the_judges_tree(tmp_path: Path) -> None:
    project(tmp_path)
    write(
        tmp_path,
        "tests/hidden/test_secret.py",
        "from calc import add\n\n\ndef test_secret():\n    assert add(40, 2) == 42\n",
    )
    hidden = hide(tmp_path, ["tests/hidden/**"])
    assert list(hidden) == ["tests/hidden/test_secret.py"]
    assert not (tmp_path / "tests/hidden/test_secret.py").exists()
    the_step = step(test_command="pytest tests/hidden/test_secret.py")
    baseline = take_baseline(the_step, tmp_path, discovered_command=None)
    results = await judge_attempt(the_step, tmp_path, baseline, hidden=hidden)
    assert not results["tests"].passed  # the buggy code fails the hidden test
    write(tmp_path, "calc.py", GOOD)
    # A step that writes its own version at the hidden path is outside its scope, and the
    # operator's file wins in the tree where a scope allows the write.
    write(tmp_path, "tests/hidden/test_secret.py", "def test_secret():\n    pass\n")
    results = await judge_attempt(the_step, tmp_path, baseline, hidden=hidden)
    assert results["scope"].details["paths"] == ["tests/hidden/test_secret.py"]
    os.unlink(tmp_path / "tests/hidden/test_secret.py")
    results = await judge_attempt(the_step, tmp_path, baseline, hidden=hidden)
    assert results["tests"].passed, results["tests"].diagnosis
    assert restore(tmp_path, hidden) == []
    assert "add(40, 2)" in (tmp_path / "tests/hidden/test_secret.py").read_text()


def test_a_hidden_file_stored_again_is_readable_in_a_new_tree(tmp_path: Path) -> None:
    """Regression: a hidden file whose content was stored before (an earlier run, another test)
    is stored again by hide() as a new 0600 copy; the judge's tree must still hold it readable by
    the unprivileged user the judge's pytest runs as (it once linked the 0600 copy: pytest exit 4)."""
    store = tmp_path / "store"
    trees = []
    for run in ("first", "second"):
        write(tmp_path, f"{run}/tests/hidden/test_secret.py", "def test_secret():\n    pass\n")
        hidden = hide(tmp_path / run, ["tests/hidden/**"], store)
        trees.append(build_tree(hidden, workspace=tmp_path / run, store=store))
    for judge in trees:
        placed = judge.root / "tests/hidden/test_secret.py"
        assert stat.S_IMODE(placed.stat().st_mode) == 0o444
        judge.close()


@pytest.mark.anyio
async def test_a_hidden_file_the_judge_cannot_place_fails_the_check(tmp_path: Path) -> None:
    """Never a smaller tree: a hidden file whose stored copy is gone errs the tests check."""
    project(tmp_path, GOOD)
    write(tmp_path, "tests/hidden/test_secret.py", f"def test_secret():\n    '{tmp_path}'\n")
    hidden = hide(tmp_path, ["tests/hidden/**"])
    the_step = step(test_command="pytest tests/test_calc.py")
    baseline = take_baseline(the_step, tmp_path, discovered_command=None)
    digest = hidden["tests/hidden/test_secret.py"]
    (active_store() / digest[:2] / digest).unlink()
    results = await judge_attempt(the_step, tmp_path, baseline, hidden=hidden)
    assert results["tests"].errored
    assert "tests/hidden/test_secret.py" in results["tests"].diagnosis
    with pytest.raises(SnapshotMissing, match="tests/hidden/test_secret.py"):
        build_tree(hidden, workspace=tmp_path, required=hidden)


def test_a_plan_hides_its_hidden_tests_from_every_step_and_restores_them(tmp_path: Path) -> None:
    project(tmp_path, GOOD)
    secret = "from calc import add\n\n\ndef test_secret():\n    assert add(40, 2) == 42\n"
    write(tmp_path, "tests/hidden/test_secret.py", secret)
    runner = PlanRunner(
        checkpointer=InMemorySaver(),
        context=PlanContext(workspace=str(tmp_path), review_critical_steps=False),
        tools={"peek": step_functions.exists},
    )
    report = runner.run(
        {
            "goal": "hidden tests",
            "hidden": ["tests/hidden/**"],
            "steps": [
                {
                    "id": "work",
                    "function": "peek",
                    "input": str(tmp_path / "tests/hidden/test_secret.py"),
                    "fail_to_pass": ["tests/hidden/test_secret.py::test_secret"],
                }
            ],
        }
    )
    assert report.status == "completed", report.steps["work"].diagnosis
    # the step never saw it; the judge ran it
    assert report.steps["work"].output == {"exists": False}
    tests = {c.name: c for c in report.steps["work"].attempts[-1].checks}["tests"]
    assert tests.details["collected"] == 1
    assert (tmp_path / "tests/hidden/test_secret.py").read_text() == secret


def test_a_reused_tree_holds_exactly_the_new_files(tmp_path: Path) -> None:
    project(tmp_path)
    write(tmp_path, "pkg/a.py", "A = 1\n")
    write(tmp_path, "run.sh", "exit 0\n").chmod(0o755)
    before, _ = take_snapshot(tmp_path)
    tree_module._remover.submit(lambda: None).result()
    while tree_module._pool:  # trees other tests parked: this one must be the one reused
        tree_module._pool.pop().close()
    first = build_tree(before, workspace=tmp_path, executable=["run.sh"], reuse=True)
    assert stat.S_IMODE((first.root / "run.sh").stat().st_mode) == 0o555
    first.retire()
    tree_module._remover.submit(lambda: None).result()  # parked
    write(tmp_path, "calc.py", GOOD)
    write(tmp_path, "pkg/b.py", "B = 2\n")
    (tmp_path / "pkg/a.py").unlink()
    changes = {"calc.py": "changed", "pkg/b.py": "added", "pkg/a.py": "deleted"}
    files = judge_files(before, tmp_path, changes)
    second = build_tree(files, workspace=tmp_path, executable=[], reuse=True)
    try:
        assert second.base == first.base  # patched, not built again
        held = {
            p.relative_to(second.root).as_posix(): p.read_text()
            for p in second.root.rglob("*")
            if p.is_file()
        }
        assert held == {rel: (tmp_path / rel).read_text() for rel in files}
        assert stat.S_IMODE((second.root / "run.sh").stat().st_mode) == 0o444
        assert list(second.scratch.rglob("*.pyc")) == []
    finally:
        second.close()
