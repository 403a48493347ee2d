"""Properties of the write scope and the judge's tree (hypothesis):

- for random project trees and random changes outside a step's scope (caches aside), the step is
  failed ``wrote_outside_scope``, naming exactly what it changed there;
- for random in-scope changes, the judge's verdict does not depend on anything else the step
  wrote (bytecode forged for the code under test, tool caches, the runner's folder).
"""

from __future__ import annotations

import asyncio
import py_compile
import shutil
import sys
import tempfile
from pathlib import Path, PurePosixPath

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plan_testkit import judge_attempt

from veriloop.engines.plan.judge.checks import take_baseline
from veriloop.engines.plan.judge.testrun import SKIP_DIRS
from veriloop.schemas.manifest import ManifestStep

NAME = st.sampled_from(["core", "util", "io", "calc", "model"])
SOURCE = st.builds(
    lambda folder, name: f"{folder}{name}.py", st.sampled_from(["", "pkg/", "pkg/sub/"]), NAME
)
OUT_OF_SCOPE = st.one_of(
    st.builds(lambda n: f"tests/test_{n}.py", NAME),
    st.builds(lambda n: f"pkg/{n}_test.py", NAME),
    st.sampled_from(
        [
            "conftest.py",
            "pkg/conftest.py",
            "setup.py",
            "setup.cfg",
            "pyproject.toml",
            "tox.ini",
            "pytest.ini",
            "custom.ini",
            "anything.toml",
            "sitecustomize.py",
            "pkg/usercustomize.py",
            "evil.pth",
            "data.json",
            "pkg/fixtures.csv",
            "Makefile",
            "pkg/.hidden.py",
            ".env",
            ".config/pytest.ini",
            ".venv/lib/site.py",
            "build/lib/core.py",
            "node_modules/x/index.js",
            "pkg/dist/core.py",
        ]
    ),
)
CACHES = st.sampled_from(
    [
        "__pycache__/core.cpython-311.pyc",
        "pkg/__pycache__/x.cpython-311.pyc",
        ".pytest_cache/v/cache/lastfailed",
        ".mypy_cache/3.11/x.json",
        ".cache/pip/http/x",
        ".veriloop/plans.sqlite",
        "pkg/stale.pyc",
    ]
)
QUICK = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def step(**fields) -> ManifestStep:
    return ManifestStep.model_validate({"id": "work", "executor": "python", **fields})


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def judge(the_step: ManifestStep, workspace: Path, baseline: dict) -> list:
    return list(asyncio.run(judge_attempt(the_step, workspace, baseline)).values())


def named(rel: str) -> str:
    """How a change is named: itself, or the folder the snapshot leaves out that holds it."""
    parts = PurePosixPath(rel).parts
    for index, part in enumerate(parts[:-1]):
        if part.startswith(".") or part in SKIP_DIRS:
            return "/".join(parts[: index + 1]) + "/"
    return rel


@QUICK
@given(
    project=st.dictionaries(st.one_of(SOURCE, OUT_OF_SCOPE), st.text(max_size=20), max_size=8),
    writes=st.dictionaries(OUT_OF_SCOPE, st.text(min_size=1, max_size=20), min_size=1, max_size=4),
    deletes=st.booleans(),
    caches=st.lists(CACHES, max_size=3),
)
def test_a_change_outside_the_scope_fails_the_step_naming_it(
    project: dict[str, str], writes: dict[str, str], deletes: bool, caches: list[str]
) -> None:
    workspace = Path(tempfile.mkdtemp(prefix="scope-property-"))
    try:
        for rel, text in project.items():
            write(workspace, rel, f"before: {text}")
        for rel in set(writes) & EXISTING_DATA:  # data is out of scope when checks could read it
            write(workspace, rel, "before")
        the_step = step()
        baseline = take_baseline(the_step, workspace, discovered_command=None)
        changed = set(writes)
        for rel, text in writes.items():
            write(workspace, rel, f"after: {text}")
        if deletes:  # deleting a file outside the scope is a change too
            gone = [rel for rel in project if rel not in writes and rel in OUT_OF_SCOPE_SAMPLE]
            for rel in gone:
                (workspace / rel).unlink()
            changed |= set(gone)
        for rel in caches:
            write(workspace, rel, "cached")
        results = judge(the_step, workspace, baseline)
        if not changed:
            assert all(r.name != "scope" for r in results)
            return
        [result] = results
        assert result.name == "scope" and not result.passed
        assert result.details["reason"] == "wrote_outside_scope"
        assert set(result.details["paths"]) == {named(rel) for rel in changed}
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


EXISTING_DATA = {"data.json", "pkg/fixtures.csv"}
"""Non-Python files out of scope once they exist (a new one of an inert kind is in scope)."""
OUT_OF_SCOPE_SAMPLE = {"conftest.py", "setup.cfg", "data.json", "Makefile", "tox.ini"}
"""Files a deleting example removes when the project has them (in the snapshot's reach)."""


CHECK = "python3 -c 'import sys, pkg.mod; sys.exit(0 if pkg.mod.VALUE == 7 else 1)'"
"""The verdict: the code under test says 7."""


def forge_bytecode(workspace: Path) -> None:
    """A ``.pyc`` for pkg/mod.py that says 7 whatever the source says (unchecked-hash bytecode
    is never compared with its source)."""
    source = workspace / "forged_source.py"
    source.write_text("VALUE = 7\n")
    target = workspace / "pkg" / "__pycache__" / f"mod.{sys.implementation.cache_tag}.pyc"
    target.parent.mkdir(parents=True, exist_ok=True)
    py_compile.compile(
        str(source),
        cfile=str(target),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    source.unlink()


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    value=st.sampled_from([None, 6, 7, 8]),
    extra=st.dictionaries(SOURCE, st.text(max_size=10).map(lambda t: f"X = {t!r}\n"), max_size=2),
    caches=st.lists(CACHES, max_size=3),
    forge=st.booleans(),
)
def test_the_verdict_depends_only_on_in_scope_changes(
    value: int | None, extra: dict[str, str], caches: list[str], forge: bool
) -> None:
    verdicts = []
    for noisy in (False, True):
        workspace = Path(tempfile.mkdtemp(prefix="scope-verdict-"))
        try:
            write(workspace, "pkg/__init__.py", "")
            write(workspace, "pkg/mod.py", "VALUE = 0\n")
            the_step = step(checks=[{"kind": "command", "command": CHECK}])
            baseline = take_baseline(the_step, workspace, discovered_command=None)
            if value is not None:
                write(workspace, "pkg/mod.py", f"VALUE = {value}\n")
            for rel, text in extra.items():
                if rel != "pkg/mod.py":
                    write(workspace, rel, text)
            if noisy:
                for rel in caches:
                    write(workspace, rel, "cached")
                if forge:
                    forge_bytecode(workspace)
            results = judge(the_step, workspace, baseline)
            verdicts.append({r.name: r.passed for r in results})
        finally:
            shutil.rmtree(workspace, ignore_errors=True)
    assert verdicts[0] == verdicts[1]
    assert verdicts[0]["command[0]"] is (value == 7)


@QUICK
@given(
    name=st.sampled_from(["FAQ.md", "docs/notes.txt", "out/result.json", "report.html"]),
    loadable=st.sampled_from(["core.cpython-311-x86_64-linux-gnu.so", "pkg/vendored.zip"]),
)
def test_a_new_inert_file_is_in_scope_and_new_loadable_code_is_not(
    name: str, loadable: str
) -> None:
    workspace = Path(tempfile.mkdtemp(prefix="scope-new-"))
    try:
        write(workspace, "core.py", "X = 1\n")
        the_step = step()
        baseline = take_baseline(the_step, workspace, discovered_command=None)
        write(workspace, name, "written by the step")
        assert all(r.name != "scope" for r in judge(the_step, workspace, baseline))
        write(workspace, loadable, "code an import could load")
        [result] = judge(the_step, workspace, baseline)
        assert result.name == "scope" and result.details["paths"] == [loadable]
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
