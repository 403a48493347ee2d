"""Test discovery by convention and real test runs (real pytest through the venv, real make)."""

from __future__ import annotations

import shutil
import sys
import textwrap
import time
from pathlib import Path

import pytest

from veriloop.engines.plan.confinement.process import OUTPUT_TAIL_CHARS, run_command
from veriloop.engines.plan.judge.testrun import (
    discover_test_command,
    format_failures,
    is_pytest_command,
    run_tests,
    uses_make,
)

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

PASSING = """
def test_one():
    assert 1 + 1 == 2

def test_two():
    assert "a".upper() == "A"
"""
FAILING = """
import pytest

def test_good():
    assert True

def test_bad():
    assert 2 + 2 == 5, "arithmetic is off"

@pytest.mark.skip(reason="later")
def test_later():
    pass
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _fast_child_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child pytest runs need none of this venv's plugins (loading them takes seconds)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# --- discovery ------------------------------------------------------------------------------------


def test_discovers_tests_folder_first(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_parser.py", PASSING)
    write(tmp_path, "Makefile", "test-parser:\n\ttrue\n")
    write(tmp_path, "src/test_parser.py", PASSING)
    assert discover_test_command("parser", tmp_path) == "pytest tests/test_parser.py"


def test_discovers_a_make_target_next(tmp_path: Path) -> None:
    write(tmp_path, "Makefile", "all:\n\ttrue\n\ntest-parser: all\n\ttrue\n")
    write(tmp_path, "src/test_parser.py", PASSING)
    assert discover_test_command("parser", tmp_path) == "make test-parser"


def test_a_similar_make_target_does_not_count(tmp_path: Path) -> None:
    write(tmp_path, "Makefile", "test-parser2:\n\ttrue\nX := test-parser\n")
    assert discover_test_command("parser", tmp_path) is None


@pytest.mark.parametrize("name", ["test_parser.py", "parser_test.py"])
def test_discovers_a_test_file_anywhere(tmp_path: Path, name: str) -> None:
    write(tmp_path, f"pkg/deep/{name}", PASSING)
    assert discover_test_command("parser", tmp_path) == f"pytest pkg/deep/{name}"


def test_prefers_the_shallowest_test_file(tmp_path: Path) -> None:
    write(tmp_path, "a/b/test_parser.py", PASSING)
    write(tmp_path, "z/parser_test.py", PASSING)
    assert discover_test_command("parser", tmp_path) == "pytest z/parser_test.py"


@pytest.mark.parametrize(
    "folder", [".venv/lib", ".hidden", "node_modules/x", "__pycache__", "venv/lib"]
)
def test_ignores_virtualenvs_and_hidden_folders(tmp_path: Path, folder: str) -> None:
    write(tmp_path, f"{folder}/test_parser.py", PASSING)
    assert discover_test_command("parser", tmp_path) is None


def test_ignores_a_virtualenv_by_its_marker(tmp_path: Path) -> None:
    write(tmp_path, "myenv/pyvenv.cfg", "home = /usr\n")
    write(tmp_path, "myenv/lib/test_parser.py", PASSING)
    assert discover_test_command("parser", tmp_path) is None


def test_nothing_found(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_other.py", PASSING)
    assert discover_test_command("parser", tmp_path) is None
    assert discover_test_command("../etc", tmp_path) is None


def test_paths_with_shell_characters_are_quoted(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_a;b.py", PASSING)
    assert discover_test_command("a;b", tmp_path) == "pytest 'tests/test_a;b.py'"


# --- recognising pytest ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "pytest",
        "pytest tests/test_x.py -q",
        "python -m pytest tests",
        "python3 -m pytest -x",
        "python3.11 -m  pytest",
        ".venv/bin/pytest tests",
        "/usr/bin/python3 -m pytest",
        "PYTHONPATH=src pytest tests",
        "py.test",
    ],
)
def test_pytest_commands(command: str) -> None:
    assert is_pytest_command(command)


@pytest.mark.parametrize(
    "command",
    [
        "make test-x",
        "pytest tests && echo ok",
        "pytest | tee log",
        "pytest; rm -rf x",
        "pytest > out.txt",
        "pytest # comment",
        "python -c 'import pytest'",
        "pytester",
        "npm test",
    ],
)
def test_not_single_pytest_commands(command: str) -> None:
    assert not is_pytest_command(command)


def test_uses_make() -> None:
    assert uses_make("make test-x") and uses_make("/usr/bin/make -C sub test")
    assert not uses_make("pytest") and not uses_make(None) and not uses_make("'unbalanced")


# --- running ----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_passing_pytest_run_reads_junit(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_calc.py", PASSING)
    run = await run_tests("pytest tests/test_calc.py", tmp_path, timeout_s=60)
    assert run.structured and run.ok
    assert (run.exit_code, run.collected, run.passed, run.failed, run.errors) == (0, 2, 2, 0, 0)
    assert not (tmp_path / ".pytest_cache").exists()


@pytest.mark.anyio
async def test_failing_pytest_run_lists_failures_from_junit(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_calc.py", FAILING)
    run = await run_tests("python -m pytest tests/test_calc.py", tmp_path, timeout_s=60)
    assert run.structured and not run.ok and run.exit_code == 1
    assert (run.collected, run.passed, run.failed, run.skipped) == (3, 1, 1, 1)
    [failure] = run.failures
    assert failure["test"] == "tests.test_calc::test_bad"
    assert "arithmetic is off" in failure["message"]
    assert "FAILED tests.test_calc::test_bad: AssertionError: arithmetic is off" in format_failures(
        run
    )


@pytest.mark.anyio
async def test_an_error_in_a_fixture_counts_as_an_error(tmp_path: Path) -> None:
    write(
        tmp_path,
        "tests/test_fx.py",
        """
        import pytest

        @pytest.fixture
        def broken():
            raise RuntimeError("fixture exploded")

        def test_uses_it(broken):
            pass
        """,
    )
    run = await run_tests("pytest tests/test_fx.py", tmp_path, timeout_s=60)
    assert (run.collected, run.errors, run.failed) == (1, 1, 0)
    assert "fixture exploded" in run.failures[0]["message"]


@pytest.mark.anyio
async def test_a_run_that_collects_nothing(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_empty.py", "x = 1\n")
    run = await run_tests("pytest tests/test_empty.py", tmp_path, timeout_s=60)
    assert run.structured and run.collected == 0 and run.exit_code == 5 and not run.ok


@pytest.mark.anyio
async def test_collection_errors_are_reported(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_broken.py", "import not_a_module_anywhere\n")
    run = await run_tests("pytest tests/test_broken.py", tmp_path, timeout_s=60)
    assert not run.ok and run.errors == 1
    assert "not_a_module_anywhere" in run.failures[0]["message"]


@needs_make
@pytest.mark.anyio
async def test_make_target_is_judged_by_exit_code(tmp_path: Path) -> None:
    write(tmp_path, "Makefile", "test-good:\n\t@echo fine\n\ntest-bad:\n\t@echo broken; exit 3\n")
    good = await run_tests("make test-good", tmp_path, timeout_s=60)
    assert good.ok and not good.structured and good.collected is None and "fine" in good.output
    bad = await run_tests("make test-bad", tmp_path, timeout_s=60)
    assert not bad.ok and bad.exit_code != 0 and "broken" in bad.output


@needs_make
@pytest.mark.anyio
async def test_pytest_under_make_is_still_read_from_junit(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_calc.py", FAILING)
    write(tmp_path, "Makefile", f"test-calc:\n\t{sys.executable} -m pytest tests/test_calc.py\n")
    run = await run_tests("make test-calc", tmp_path, timeout_s=60)
    assert run.structured and run.failed == 1 and not run.ok


@pytest.mark.anyio
async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    marker = tmp_path / "late.txt"
    started = time.monotonic()
    run = await run_command(f"(sleep 2; touch {marker}) & sleep 30", tmp_path, timeout_s=0.5)
    assert run.timed_out and run.exit_code is None
    assert time.monotonic() - started < 5
    time.sleep(2.5)
    assert not marker.exists()


@pytest.mark.anyio
async def test_stray_children_do_not_hold_the_run(tmp_path: Path) -> None:
    started = time.monotonic()
    run = await run_command("sleep 30 & echo started", tmp_path, timeout_s=20)
    assert run.exit_code == 0 and "started" in run.output
    assert time.monotonic() - started < 5


@pytest.mark.anyio
async def test_output_keeps_the_tail(tmp_path: Path) -> None:
    run = await run_command(
        f"{sys.executable} -c \"print('x' * 200000); print('THE END')\"", tmp_path, timeout_s=30
    )
    assert run.output.rstrip().endswith("THE END")
    assert "omitted" in run.output and len(run.output) < OUTPUT_TAIL_CHARS + 200


@pytest.mark.anyio
async def test_a_slow_pytest_run_times_out(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_slow.py", "import time\n\ndef test_slow():\n    time.sleep(30)\n")
    run = await run_tests("pytest tests/test_slow.py", tmp_path, timeout_s=3)
    assert run.timed_out and not run.ok
