"""The checks of one attempt of a plan step (DESIGN, "Verification, in order of cost", item 4).

:func:`run_checks` runs every applicable check, cheapest first, with no fail-fast (a later check
still runs after an earlier one failed, so the corrective prompt can list both what failed and what
must keep passing):

==================== ==================================================================== ===========
name                 passes when                                                          applies
==================== ==================================================================== ===========
schema               the output validates against ``step.output_schema`` (a JSON text      schema set
                     output is parsed first)
predicate[i]         the i-th predicate check returns true (a string is its diagnosis)    each one
notes                the notes do not start with ``[FAIL]`` (any letter case, after        llm steps,
                     whitespace); empty notes and ``[SUCCESS]:`` pass (backward            and others
                     compatibility)                                                       with notes
pending_tool_calls   no tool call is still pending                                        llm steps
command[i]           the i-th command check exits 0 within its timeout                    each one
tests                the test command (``step.test_command``, else the one found by        see below
                     convention before the step ran) exits 0, ran at least one test, none
                     failed, errored or was skipped, it did not collect fewer
                     tests than the previous attempt, and its per-test reports agree with
                     its JUnit XML; tests the step wrote judge only under ``writes_tests``
                     and only when one fails on the pre-step code (FAIL_TO_PASS), and the
                     operator's tests (the pre-step copies of test files) still pass on
                     its code without any test file it wrote
integrity            no test file (``tests/**``, ``test_*.py``, ``*_test.py``, ``conftest.py``, tests, test
                     ``pytest.ini``) or pytest section of pyproject.toml / setup.cfg /    config,
                     tox.ini changed, was deleted or added (``writes_tests`` allows it);  command
                     no file a command check executes changed or was written by the step; checks or
                     the test report was not tampered with; no tamper-scan finding in the changed
                     step's diff (critical steps; others list them for the review)        .py files
review               an LLM review of the output passes with confidence >= 0.70            review=True
==================== ==================================================================== ===========

Before all of them, the write scope (:mod:`~veriloop.engines.plan.judge.scope`): a step that
changed a file outside it gets one failed check, ``scope`` (``wrote_outside_scope``), and nothing
else is judged. Command checks and test runs run in the judge's tree
(:mod:`~veriloop.engines.plan.judge.tree`): the pre-step snapshot plus the in-scope changes, never
the live workspace. The operator's named tests (``fail_to_pass``, ``pass_to_pass``, and the tests
the command collects on the pre-step snapshot) must each be collected and pass
(:mod:`~veriloop.engines.plan.judge.named`). When the step wrote test files, a second run judges
the operator's tests without them: the tree holds the step's other changes and every test file as
it was before the step (added ones absent), so no test module, conftest or plugin of the step can
make an operator's test pass; the first run, with the step's tests, must pass too.

``predicate[i]`` and ``command[i]`` count checks of that kind in ``step.checks`` order
(``details["check_index"]`` is the position in ``step.checks``). Tests apply by
``requires_testing``: False never; True always (no test command found fails "no tests found");
None only when a test command is declared or found.

The pre-step state is :func:`take_baseline`'s: the workspace's tree, whose pre-step copies sit in
the snapshot store (:mod:`~veriloop.engines.plan.judge.snapshot`) out of the step's reach, and the
fingerprints of test files and of what each command check executes
(:mod:`~veriloop.engines.plan.judge.executed`). The step's check definitions are graph state the step
cannot reach, so nothing fingerprints them.

A check that cannot run (a predicate error, an invalid schema, a command that cannot start, an
unusable review answer) is a failed result with ``errored=True``: an error never passes a step,
and it never escapes :func:`run_checks`, except :class:`~veriloop.llm.base.LLMUnavailable`
(a provider outage is not a verdict: it propagates so the run can resume later).

:func:`run_checks` is only called for an execution that worked. When the executor itself failed
(``execution.ok`` False) the loop records ``execution_failed`` without checking anything and
without spending the verification budget; calling run_checks with such an execution is a
programming error (ValueError).
"""

from __future__ import annotations

import asyncio
import configparser
import hashlib
import json
import re
import shlex
import tomllib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema

from veriloop.engines.plan.confinement.process import run_command
from veriloop.engines.plan.confinement.sandbox import (
    DEFAULT_CONFINEMENT,
    Confinement,
    layers_for,
)
from veriloop.engines.plan.judge.executed import executed_files
from veriloop.engines.plan.judge.named import (
    in_files,
    lost_tests,
    named_problems,
    named_tests,
    named_tests_command,
    pre_step_command,
)
from veriloop.engines.plan.judge.scope import (
    in_scope_changes,
    is_test_path,
    outside_scope,
    unsnapshotted,
    unsnapshotted_changes,
)
from veriloop.engines.plan.judge.snapshot import (
    SnapshotMissing,
    changed_files,
    current_tree,
    read_blob,
    sha256_file,
    take_snapshot,
)
from veriloop.engines.plan.judge.tamper import TamperFinding, describe, scan_changes
from veriloop.engines.plan.judge.testrun import (
    TestRun,
    discover_test_command,
    format_failures,
    is_pytest_command,
    run_tests,
    workspace_files,
)
from veriloop.engines.plan.judge.tree import JudgeTree, build_tree, executable_files, judge_files
from veriloop.engines.plan.predicates import compile_predicate
from veriloop.llm.base import AsyncStructuredLLM, LLMOutputError, LLMUnavailable
from veriloop.prompts.plan_checks import review_messages
from veriloop.schemas.manifest import ManifestStep
from veriloop.schemas.plan_outputs import StepReviewVerdict
from veriloop.schemas.plan_run import CheckResult, CheckType, ExecutionResult

REVIEW_THRESHOLD = 0.70
"""A review passes when the verdict passes with at least this confidence."""
CHECK_OUTPUT_CHARS = 4000
"""A CheckResult's ``output`` is truncated to this (head and tail)."""
REVIEW_OUTPUT_CHARS = 8000
"""How much of the step's output the reviewer sees (head and tail)."""
MAX_FINGERPRINTS = 5000
"""Most files a baseline fingerprints."""
MAX_SCANNED = 500
"""Most changed Python files the tamper scan reads."""
MAX_LISTED_FINDINGS = 10
"""Tamper findings spelled out in a diagnosis (details list them all)."""
MAX_LISTED_PATHS = 20
"""Paths outside the step's scope spelled out in a diagnosis (details list them all)."""
WROTE_OUTSIDE_SCOPE = "wrote_outside_scope"
"""The reason of a step that changed a file outside its write scope."""
OPERATOR_RUN = "the operator's tests, run without the step's test files"
"""How a problem of the run that judges the operator's tests apart from the step's is named."""
MAX_COLLECTIONS = 256
"""Pre-step collections remembered (a retry judges against the same snapshot)."""
BASELINE_VERSION = 2
"""The format of :func:`take_baseline`'s dict (a baseline without one predates the snapshot)."""
FAIL_MARKER = "[FAIL]"
"""Notes that start with it, in any letter case and after whitespace, report a failure."""
GUARD_FILES = frozenset({"conftest.py", "pytest.ini", ".pytest.ini"})
"""Test configuration that may not even be added by a step that does not write tests."""
PYTEST_CONFIG_SECTIONS = {
    "pyproject.toml": "[tool.pytest]",
    "setup.cfg": "[tool:pytest]",
    "tox.ini": "[pytest]",
}
"""Files whose pytest section (only that section) is fingerprinted: addopts can deselect tests."""

NO_TESTS_FOUND = (
    "no tests found: requires_testing is set, but the step has no test_command and none of "
    "tests/test_{id}.py, a Makefile target test-{id}, test_{id}.py or {id}_test.py exists"
)


def take_baseline(
    step: ManifestStep, workspace: Path, *, discovered_command: str | None
) -> dict[str, Any]:
    """The pre-step state the checks judge against, taken before the step's first attempt;
    JSON-serialisable (it lives in graph state): the workspace's tree (its files' pre-step copies
    are in the snapshot store, out of the step's reach), the fingerprints of the test files and of
    what the command checks execute, and the test command found then (a later attempt cannot dodge
    its tests by deleting them, nor bring its own by writing them)."""
    workspace = Path(workspace)
    command = step.test_command or discovered_command
    tree, tree_truncated = take_snapshot(workspace)
    files, truncated = _fingerprint_files(step, workspace, command)
    return {
        "unsnapshotted": unsnapshotted(workspace),
        "executable": executable_files(workspace, tree),
        "version": BASELINE_VERSION,
        "files": files,
        "check_files": _check_files(step, workspace, command),
        "truncated": truncated,
        "pytest_config": _pytest_config(workspace),
        "test_command": command,
        "tree": tree,
        "tree_truncated": tree_truncated,
    }


async def run_checks(
    step: ManifestStep,
    execution: ExecutionResult,
    *,
    depends: Mapping[str, Any],
    workspace: Path,
    baseline: Mapping[str, Any],
    previous_collected: int | None,
    llm: AsyncStructuredLLM | None,
    review: bool,
    check_timeout_s: float,
    review_threshold: float = REVIEW_THRESHOLD,
    confinement: Confinement = DEFAULT_CONFINEMENT,
    claimed: Sequence[str] = (),
    hidden: Mapping[str, str] | None = None,
) -> list[CheckResult]:
    """Every applicable check of one attempt, cheapest first, no fail-fast (see the module doc).
    ``claimed``: the ``writes:`` globs of the plan's other steps (their files, not this step's);
    ``hidden``: the run's hidden files ``{path: sha256}``, which only the judge's tree has."""
    if not execution.ok:
        raise ValueError(
            "run_checks needs an execution that worked; an executor failure is execution_failed"
        )
    workspace = Path(workspace)
    # The step's diff, hashed once: the scope, the judge's tree and the tamper scan share it.
    tree: dict[str, str] = dict(baseline.get("tree") or {})
    diff = (
        changed_files(tree, await asyncio.to_thread(current_tree, workspace))
        if baseline.get("version")
        else {}
    )
    if baseline.get("version"):
        outside = await asyncio.to_thread(_outside_scope, step, workspace, baseline, diff, claimed)
        if outside:
            return [_scope_failure(outside)]
    # The judge knows only the changes the step was allowed to make (others' claimed files and
    # caches are not among them).
    diff = in_scope_changes(diff, step.writes, writes_tests=step.writes_tests)
    if hidden:  # the operator's hidden files win over anything at their paths
        baseline = {**baseline, "tree": {**tree, **hidden}}
    try:
        judge = (
            await asyncio.to_thread(
                _tree_for,
                {**judge_files(tree, workspace, diff), **(hidden or {})},
                workspace,
                baseline,
                confinement,
                hidden or {},
            )
            if baseline.get("version")
            else None
        )
    except SnapshotMissing as exc:  # judged without a hidden file, the step could pass unearned
        return [_errored("tests", "tests", f"the hidden files cannot be judged: {exc}")]
    try:
        return await _judge(
            step,
            execution,
            depends=depends,
            workspace=workspace,
            judge=judge,
            baseline=baseline,
            diff=diff,
            previous_collected=previous_collected,
            llm=llm,
            review=review,
            check_timeout_s=check_timeout_s,
            review_threshold=review_threshold,
            confinement=confinement,
        )
    finally:
        if judge is not None:
            judge.retire()


async def _judge(
    step: ManifestStep,
    execution: ExecutionResult,
    *,
    depends: Mapping[str, Any],
    workspace: Path,
    judge: JudgeTree | None,
    baseline: Mapping[str, Any],
    diff: Mapping[str, str],
    previous_collected: int | None,
    llm: AsyncStructuredLLM | None,
    review: bool,
    check_timeout_s: float,
    review_threshold: float,
    confinement: Confinement,
) -> list[CheckResult]:
    """The checks of :func:`run_checks`, in the judge's tree when there is one (a baseline
    without a snapshot, from an older run, judges the workspace)."""
    results: list[CheckResult] = []
    where = judge.root if judge is not None else workspace

    async def run(name: str, kind: CheckType, check: Callable[[], Awaitable[CheckResult]]) -> None:
        try:
            results.append(await check())
        except LLMUnavailable:
            raise
        except Exception as exc:
            results.append(_errored(name, kind, f"the check could not run: {_describe(exc)}"))

    if step.output_schema is not None:
        await run(
            "schema",
            "schema",
            lambda: _schema_check(step.output_schema, execution.output, check_timeout_s),
        )

    predicates = [(i, c) for i, c in enumerate(step.checks) if c.kind == "predicate"]
    for n, (index, spec) in enumerate(predicates):
        name = f"predicate[{n}]"
        await run(
            name,
            "predicate",
            lambda name=name, index=index, spec=spec: _predicate_check(
                name, index, spec.expr or "", step, execution.output, depends
            ),
        )

    if step.executor == "llm" or (execution.notes or "").strip():
        await run("notes", "notes", lambda: _notes_check(execution.notes))
    if step.executor == "llm" or execution.tool_calls:
        await run("pending_tool_calls", "pending_tool_calls", lambda: _pending_check(execution))

    commands = [(i, c) for i, c in enumerate(step.checks) if c.kind == "command"]
    for n, (index, spec) in enumerate(commands):
        name = f"command[{n}]"
        await run(
            name,
            "command",
            lambda name=name, index=index, spec=spec: _command_check(
                name,
                index,
                spec.command or "",
                where,
                spec.timeout_s or check_timeout_s,
                confinement=confinement,
                judge=judge,
            ),
        )

    tree: dict[str, str] = dict(baseline.get("tree") or {})
    tests_result: CheckResult | None = None
    if step.requires_testing is not False:
        # The command known before the step; one found only now runs tests the step wrote.
        command = await asyncio.to_thread(
            named_tests_command, step, step.test_command or baseline.get("test_command")
        )
        if command is None:
            command = await asyncio.to_thread(discover_test_command, step.id, where)
        if command is None and step.requires_testing:
            results.append(
                CheckResult(
                    name="tests",
                    type="tests",
                    passed=False,
                    diagnosis=NO_TESTS_FOUND.replace("{id}", step.id),
                )
            )
        elif command is not None:
            await run(
                "tests",
                "tests",
                lambda: _tests_check(
                    command,
                    where,
                    check_timeout_s,
                    previous_collected,
                    explicit=bool(step.test_command),
                    confinement=confinement,
                    step=step,
                    baseline=baseline,
                    diff=diff,
                    judge=judge,
                ),
            )
            tests_result = results[-1]

    findings: list[TamperFinding] = []
    if baseline.get("version") and _integrity_applies(step, baseline, diff, tests_result):
        findings = await asyncio.to_thread(_tamper_scan, where, tree, diff)
        # Hashing the tree is file work: off the event loop, like every other blocking call.
        await run(
            "integrity",
            "integrity",
            lambda: asyncio.to_thread(
                _integrity_check, step, where, baseline, tests_result, findings
            ),
        )

    if review:
        await run(
            "review",
            "review",
            lambda: _review_check(
                step, execution, llm, list(results), review_threshold, describe(findings)
            ),
        )
    return results


def _outside_scope(
    step: ManifestStep,
    workspace: Path,
    baseline: Mapping[str, Any],
    diff: Mapping[str, str],
    claimed: Sequence[str],
) -> list[str]:
    """What the step changed outside its scope: snapshot files, and folders or links the snapshot
    leaves out (named by the folder)."""
    outside = outside_scope(diff, step.writes, writes_tests=step.writes_tests, claimed=claimed)
    before = baseline.get("unsnapshotted")
    if before is not None:
        patterns = [*(step.writes or ()), *claimed]
        outside += [
            rel
            for rel in unsnapshotted_changes(before, unsnapshotted(workspace))
            if not any(pattern.startswith((rel, "**")) for pattern in patterns)
        ]
    return sorted(outside)


def _scope_failure(outside: list[str]) -> CheckResult:
    shown = ", ".join(outside[:MAX_LISTED_PATHS])
    more = len(outside) - MAX_LISTED_PATHS
    return CheckResult(
        name="scope",
        type="integrity",
        passed=False,
        diagnosis=f"{WROTE_OUTSIDE_SCOPE}: the step changed files outside its write scope: {shown}"
        + (f" and {more} more" if more > 0 else "")
        + " (a step may change the project's Python source and add new data or documents, not "
        "change tests, runner configuration, hidden or existing data files, unless its manifest "
        "entry says so with writes: or writes_tests)",
        details={"reason": WROTE_OUTSIDE_SCOPE, "paths": outside},
    )


_collections: dict[str, list[str]] = {}
"""Pre-step collections by snapshot and command."""


async def _missing_tests(
    run: TestRun,
    operator: TestRun | None,
    pre_command: str | None,
    step: ManifestStep,
    baseline: Mapping[str, Any],
    where: Path,
    timeout_s: float,
    confinement: Confinement,
) -> list[str]:
    """Named tests that were not collected or did not pass, and tests the judge's run lost of the
    ones the command collects on the pre-step code (``pre_command``, see
    :func:`~veriloop.engines.plan.judge.named.pre_step_command`). With an ``operator`` run (the step wrote test
    files), the named tests of pre-step files and the pre-step collection are judged there, each
    test kept; the main ``run`` judges the named tests the step added and keeps the count."""
    tree: dict[str, str] = dict(baseline.get("tree") or {})
    named = named_tests(step)
    theirs = [test for test in named if in_files(test, tree)] if operator is not None else []
    problems = named_problems(
        [test for test in named if test not in theirs], run.items or [], run.outcomes or {}
    )
    if operator is not None:
        problems += [
            f"{OPERATOR_RUN}: {problem}"
            for problem in named_problems(theirs, operator.items or [], operator.outcomes or {})
        ]
    before = await _pre_step_collection(pre_command, baseline, where, timeout_s, confinement)
    lost = lost_tests(before, run.items or [], writes_tests=step.writes_tests)
    if operator is not None and (
        lost_here := lost_tests(before, operator.items or [], writes_tests=False)
    ):
        problems.append(f"{OPERATOR_RUN}: {lost_here}")
    return [*problems, *([lost] if lost else [])]


async def _pre_step_collection(
    command: str | None,
    baseline: Mapping[str, Any],
    where: Path,
    timeout_s: float,
    confinement: Confinement,
) -> list[str]:
    """The tests ``command`` collects on the pre-step snapshot (remembered per snapshot)."""
    if command is None:
        return []
    tree: dict[str, str] = dict(baseline.get("tree") or {})
    key = hashlib.sha256(
        json.dumps([command, sorted(tree.items())], separators=(",", ":")).encode()
    ).hexdigest()
    before = _collections.get(key)
    if before is None:
        pre = await _run_in_tree(
            tree, command, where, baseline, timeout_s, confinement, collect_only=True
        )
        before = list(pre.items or [])
        if len(_collections) >= MAX_COLLECTIONS:
            _collections.pop(next(iter(_collections)))
        _collections[key] = before
    return before


async def _operator_run(
    command: str | None,
    baseline: Mapping[str, Any],
    diff: Mapping[str, str],
    workspace: Path,
    timeout_s: float,
    confinement: Confinement,
) -> TestRun | None:
    """The operator's tests run on the step's code without any test file the step wrote (added
    ones absent, changed or deleted ones at their pre-step version), so no test module, conftest
    or plugin of the step can make them pass. ``command``: the test command restricted to the
    pre-step tree (:func:`~veriloop.engines.plan.judge.named.pre_step_command`). None when the
    step wrote no test file, or there are no operator's tests to run: no such command, or one
    other than pytest (it runs once, as it stands)."""
    if not any(is_test_path(rel) for rel in diff):
        return None
    if command is None or not is_pytest_command(command):
        return None
    files = _pre_step_with(baseline, workspace, diff, tests=False)
    return await _run_in_tree(files, command, workspace, baseline, timeout_s, confinement)


def _pre_step_with(
    baseline: Mapping[str, Any], workspace: Path, diff: Mapping[str, str], *, tests: bool
) -> dict[str, str | Path]:
    """The pre-step tree with the step's changes to its test files (``tests``) or to everything
    else (not ``tests``) applied from ``workspace`` (the judge's tree): its tests on the code
    before it, or the tests before it on its code."""
    changes = {rel: state for rel, state in diff.items() if is_test_path(rel) == tests}
    return judge_files(baseline.get("tree") or {}, workspace, changes)


def checks_passed(results: list[CheckResult]) -> bool:
    """Every applicable check passed (an errored check never passes; no checks at all passes)."""
    return all(result.passed and not result.errored for result in results)


def truncate_middle(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and its tail."""
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit} characters omitted ...]\n"
    keep = max(limit - len(marker), 0)
    head = keep * 2 // 5
    return text[:head] + marker + text[len(text) - (keep - head) :]


def structured_output(value: Any) -> Any:
    """A step's output as data: a text that is a JSON object or array (code fences allowed) is parsed."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    fence = re.fullmatch(r"```[A-Za-z0-9_-]*\s*\n(.*?)\n?```", text, re.DOTALL)
    if fence:
        text = fence.group(1).strip()
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            pass
    return value


def output_text(value: Any) -> str:
    """A step's output as text (JSON for data)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=1, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


# --- the checks ---------------------------------------------------------------------------------


async def _schema_check(schema: dict[str, Any], output: Any, timeout_s: float) -> CheckResult:
    validator_cls = jsonschema.validators.validator_for(schema)
    try:
        validator_cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return _errored(
            "schema", "schema", f"output_schema is not a valid JSON schema: {exc.message}"
        )
    instance = output if schema.get("type") == "string" else structured_output(output)
    validator = validator_cls(schema)
    # In a thread with a deadline: a schema's regex patterns run against untrusted output.
    errors = await asyncio.wait_for(
        asyncio.to_thread(lambda: list(validator.iter_errors(instance))), timeout=timeout_s
    )
    if not errors:
        return CheckResult(name="schema", type="schema", passed=True)
    errors.sort(key=lambda e: [str(p) for p in e.absolute_path])
    lines = [f"at {e.json_path}: {truncate_middle(e.message, 200)}" for e in errors[:5]]
    if len(errors) > 5:
        lines.append(f"... and {len(errors) - 5} more")
    hint = ""
    if isinstance(instance, str) and schema.get("type") not in (None, "string"):
        hint = "the output is not JSON; "
    return CheckResult(
        name="schema",
        type="schema",
        passed=False,
        diagnosis=f"{hint}output does not match output_schema: " + "; ".join(lines),
        details={"errors": len(errors)},
    )


async def _predicate_check(
    name: str,
    index: int,
    expr: str,
    step: ManifestStep,
    output: Any,
    depends: Mapping[str, Any],
) -> CheckResult:
    details = {"check_index": index, "expr": expr}
    description = step.checks[index].description
    try:
        predicate = compile_predicate(expr)
        passed, diagnosis = predicate.evaluate(
            input=structured_output(step.input),
            result=structured_output(output),
            depends={dep: structured_output(value) for dep, value in depends.items()},
        )
    except ValueError as exc:  # PredicateError
        return _errored(name, "predicate", str(exc), details)
    if not passed and description:
        diagnosis = f"{description}: {diagnosis}"
    return CheckResult(
        name=name, type="predicate", passed=passed, diagnosis=diagnosis, details=details
    )


def reports_failure(notes: str) -> bool:
    """The executor's notes start with ``[FAIL]`` (any letter case, after whitespace)."""
    return (notes or "").strip()[: len(FAIL_MARKER)].upper() == FAIL_MARKER


async def _notes_check(notes: str) -> CheckResult:
    text = (notes or "").strip()
    if reports_failure(text):
        return CheckResult(
            name="notes",
            type="notes",
            passed=False,
            diagnosis=f"the executor reported a failure: {truncate_middle(text, 500)}",
        )
    return CheckResult(name="notes", type="notes", passed=True)


async def _pending_check(execution: ExecutionResult) -> CheckResult:
    pending = [call for call in execution.tool_calls if call.status == "pending"]
    if not pending:
        return CheckResult(name="pending_tool_calls", type="pending_tool_calls", passed=True)
    names = ", ".join(f"{call.name} ({call.id})" for call in pending)
    return CheckResult(
        name="pending_tool_calls",
        type="pending_tool_calls",
        passed=False,
        diagnosis=f"{len(pending)} tool call(s) never got a result: {names}",
        details={"pending": [call.id for call in pending]},
    )


async def _command_check(
    name: str,
    index: int,
    command: str,
    workspace: Path,
    timeout_s: float,
    *,
    confinement: Confinement,
    judge: JudgeTree | None,
) -> CheckResult:
    run = await run_command(
        command,
        workspace,
        timeout_s=timeout_s,
        confinement=confinement,
        env=judge.env() if judge else None,
        writable=(judge.scratch,) if judge else (),
        readonly=(judge.root,) if judge else (),
    )
    details = {
        "check_index": index,
        "command": command,
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
    }
    output = truncate_middle(run.output, CHECK_OUTPUT_CHARS)
    if run.timed_out:
        diagnosis = f"`{command}` did not finish within {timeout_s:g} s"
    elif run.stopped:
        diagnosis = f"`{command}` was stopped: {run.stopped}"
    elif run.exit_code != 0:
        diagnosis = f"`{command}` exited with status {run.exit_code}"
    else:
        return CheckResult(name=name, type="command", passed=True, output=output, details=details)
    return CheckResult(
        name=name, type="command", passed=False, diagnosis=diagnosis, output=output, details=details
    )


async def _tests_check(
    command: str,
    workspace: Path,
    timeout_s: float,
    previous_collected: int | None,
    *,
    explicit: bool,
    confinement: Confinement,
    step: ManifestStep,
    baseline: Mapping[str, Any],
    diff: Mapping[str, str],
    judge: JudgeTree | None,
) -> CheckResult:
    run = await run_tests(
        command, workspace, timeout_s=timeout_s, confinement=confinement, judge=judge
    )
    details: dict[str, Any] = {
        "command": command,
        "discovered": not explicit,
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
        "structured": run.structured,
        "report_channel": run.outcomes is not None,
    }
    details.update(_counts(run))
    if run.tampered:
        details["tampered"] = run.tampered
    problems = _run_problems(run, command, timeout_s, previous_collected)
    operator: TestRun | None = None
    pre_command: str | None = None
    if judge is not None:
        # Off the event loop: the first call builds pytest's argument parser.
        pre_command = await asyncio.to_thread(
            pre_step_command,
            step,
            step.test_command or baseline.get("test_command"),
            baseline.get("tree") or {},
        )
    if judge is not None and not problems:
        operator = await _operator_run(
            pre_command, baseline, diff, workspace, timeout_s, confinement
        )
    if operator is not None:
        details["operator_run"] = {"command": operator.command, **_counts(operator)}
        if operator.tampered:
            details["tampered"] = operator.tampered
        problems += [
            f"{OPERATOR_RUN}: {problem}"
            for problem in _run_problems(operator, operator.command, timeout_s, None)
        ]
    notes: list[str] = []
    if judge is not None and run.items is not None:
        problems.extend(
            await _missing_tests(
                run, operator, pre_command, step, baseline, workspace, timeout_s, confinement
            )
        )
    if baseline.get("version"):
        await _judge_own_tests(
            run,
            operator,
            command,
            step,
            workspace,
            baseline,
            diff,
            timeout_s,
            problems,
            notes,
            details,
            confinement=confinement,
        )
    shown = run if operator is None or operator.ok else operator  # the run that failed
    failures = format_failures(shown)
    if failures and shown.output:
        output = f"{failures}\n--- output (end) ---\n{shown.output}"
    else:
        output = failures or shown.output
    output = _truncate_keeping_head(output, CHECK_OUTPUT_CHARS, keep_head=len(failures))
    if shown.failures:
        details["failures"] = shown.failures[:20]
    if not problems:
        summary = (
            f"{run.passed} of {run.collected} tests passed"
            if run.structured
            else f"`{command}` exited 0"
        )
        return CheckResult(
            name="tests",
            type="tests",
            passed=True,
            diagnosis="; ".join([summary, *notes]),
            output=output,
            details=details,
        )
    return CheckResult(
        name="tests",
        type="tests",
        passed=False,
        diagnosis="; ".join(problems),
        output=output,
        details=details,
    )


def _run_problems(
    run: TestRun, command: str, timeout_s: float, previous_collected: int | None
) -> list[str]:
    """Why a test run did not pass: it timed out, its report was tampered with, tests failed,
    errored or were skipped, it collected none (or fewer than ``previous_collected``), pytest
    wrote no report, or the command exited non-zero."""
    problems = []
    if run.timed_out:
        problems.append(f"`{command}` did not finish within {timeout_s:g} s")
    if run.tampered:
        problems.append("the test report was tampered with (see the integrity check)")
    if run.structured:
        if run.failed or run.errors:
            problems.append(
                f"{run.failed} of {run.collected} tests failed, {run.errors} errored"
                if run.errors
                else f"{run.failed} of {run.collected} tests failed"
            )
        if not run.collected and not run.timed_out:
            problems.append("the test run collected no tests")
        elif run.skipped and not run.passed and not (run.failed or run.errors):
            problems.append(f"all {run.collected} collected tests were skipped: none passed")
        elif run.skipped:
            problems.append(
                f"{run.skipped} of {run.collected} tests were skipped or xfailed: "
                "a test that did not run did not pass"
            )
        if run.collected and previous_collected is not None and run.collected < previous_collected:
            problems.append(
                f"collected {run.collected} tests, the previous attempt collected {previous_collected}"
            )
    elif is_pytest_command(command) and not run.timed_out:
        # pytest always writes its report; none means the run died first (code under test that
        # calls os._exit(0) during collection), whatever the exit status says.
        problems.append(f"`{command}` wrote no test report: pytest did not finish")
    if not problems and run.exit_code != 0:
        problems.append(f"`{command}` exited with status {run.exit_code}")
    return problems


def _counts(run: TestRun) -> dict[str, Any]:
    """A run's counts for a check's details (none when they did not come from a report)."""
    if not run.structured:
        return {}
    return {
        "collected": run.collected,
        "passed": run.passed,
        "failed": run.failed,
        "errors": run.errors,
        "skipped": run.skipped,
    }


async def _judge_own_tests(
    run: TestRun,
    operator: TestRun | None,
    command: str,
    step: ManifestStep,
    workspace: Path,
    baseline: Mapping[str, Any],
    diff: Mapping[str, str],
    timeout_s: float,
    problems: list[str],
    notes: list[str],
    details: dict[str, Any],
    *,
    confinement: Confinement,
) -> None:
    """Tests are a judge only when they could have failed (SWE-bench's FAIL_TO_PASS): tests the
    step wrote need ``writes_tests``, and then at least one must fail on the pre-step code (run
    from the snapshot) and pass now, unless the step changed nothing but tests. ``operator``: the
    run of the operator's tests without the step's test files (see :func:`_operator_run`)."""
    written = sorted(
        rel for rel, state in diff.items() if state != "deleted" and _is_test_file(rel)
    )
    judged = _judged_files(run, command, workspace)
    own = [rel for rel in judged if rel in written]
    independent = [rel for rel in judged if rel not in written]
    found_now = not (step.test_command or baseline.get("test_command") or named_tests(step))
    details["own_tests"] = own
    if not own and not found_now:
        return
    if not step.writes_tests:
        # Tests it changed are the integrity check's finding; tests it added must not be alone.
        added = [rel for rel in own if diff.get(rel) == "added"]
        if found_now or (added and len(added) == len(judged)):
            problems.append(
                "no independent tests: the only tests are ones the step wrote ("
                + (", ".join(added) or f"`{command}` was found only after the step")
                + "); only a step that declares writes_tests may bring its own tests"
            )
        return
    if problems or not own:
        return  # a failing run needs no proof that it could fail
    # Tests that existed before the step still hold in their pre-step form: a test writer may
    # add assertions, not weaken the ones that judged the code before it. Those the operator's
    # run already ran in their pre-step form need no second run.
    ran = {nodeid.split("::", 1)[0] for nodeid in (operator.outcomes or {})} if operator else set()
    edited = [
        rel
        for rel, state in diff.items()
        if state != "added" and _is_test_file(rel) and rel not in ran
    ]
    broken = await _run_pre_step_tests(edited, workspace, baseline, diff, timeout_s, confinement)
    details["pre_step_tests_failing"] = broken
    if broken:
        problems.append(
            "the pre-step version of tests the step changed fails on its code: "
            + ", ".join(broken[:5])
        )
        return
    if not any(state != "deleted" and not _is_test_file(rel) for rel, state in diff.items()):
        details["fail_to_pass"] = "not applicable: the step changed only tests"
        return
    pre = await _run_on_pre_step_code(own, workspace, baseline, diff, timeout_s, confinement)
    fail_to_pass, prove_nothing = [], []
    for nodeid, outcome in sorted((run.outcomes or {}).items()):
        if outcome == "passed" and nodeid.split("::", 1)[0] in own:
            (prove_nothing if pre.get(nodeid) == "passed" else fail_to_pass).append(nodeid)
    details["fail_to_pass"], details["prove_nothing"] = fail_to_pass, prove_nothing
    if prove_nothing:
        message = (
            f"{len(prove_nothing)} of the step's own tests pass on the pre-step code too and "
            f"prove nothing ({', '.join(prove_nothing[:5])})"
        )
        (notes if fail_to_pass or independent else problems).append(message)
    elif not fail_to_pass and not independent:
        problems.append("none of the step's own tests could be matched to a run on the code")


async def _run_on_pre_step_code(
    own: list[str],
    workspace: Path,
    baseline: Mapping[str, Any],
    diff: Mapping[str, str],
    timeout_s: float,
    confinement: Confinement,
) -> dict[str, str]:
    """Outcomes of the step's own tests run against the pre-step code (a tree of the pre-step
    files with the step's test files from ``workspace``, the judge's tree, laid over it); a test
    file that does not even load counts as failing."""
    files = _pre_step_with(baseline, workspace, diff, tests=True)
    command = "pytest " + " ".join(shlex.quote(rel) for rel in own)
    run = await _run_in_tree(files, command, workspace, baseline, timeout_s, confinement)
    return dict(run.outcomes or {})


async def _run_pre_step_tests(
    edited: list[str],
    workspace: Path,
    baseline: Mapping[str, Any],
    diff: Mapping[str, str],
    timeout_s: float,
    confinement: Confinement,
) -> list[str]:
    """Tests (node ids) of the pre-step copies of the ``edited`` test files that do not pass on the
    post-step code (the judge's tree, ``workspace``, with every test file of the step put back as
    it was or left out)."""
    tree: dict[str, str] = dict(baseline.get("tree") or {})
    tests = [rel for rel in edited if rel in tree and rel.endswith(".py") and _is_test_module(rel)]
    if not tests:
        return []
    files = _pre_step_with(baseline, workspace, diff, tests=False)
    command = "pytest " + " ".join(shlex.quote(rel) for rel in tests)
    run = await _run_in_tree(files, command, workspace, baseline, timeout_s, confinement)
    broken = sorted(
        nodeid for nodeid, outcome in (run.outcomes or {}).items() if outcome != "passed"
    )
    if not broken and not run.ok:
        broken = [f"{', '.join(tests)} (the run failed, exit status {run.exit_code})"]
    return broken


def _tree_for(
    files: Mapping[str, str | Path],
    workspace: Path,
    baseline: Mapping[str, Any],
    confinement: Confinement,
    required: Iterable[str] = (),
) -> JudgeTree:
    """A judge's tree of ``files`` (holding each of ``required``); an idle one patched when only
    sandboxed processes (which see it read-only) will use it."""
    return build_tree(
        files,
        workspace=workspace,
        executable=baseline.get("executable") or (),
        reuse="namespaces" in layers_for(confinement),
        required=required,
    )


async def _run_in_tree(
    files: Mapping[str, str | Path],
    command: str,
    workspace: Path,
    baseline: Mapping[str, Any],
    timeout_s: float,
    confinement: Confinement,
    *,
    collect_only: bool = False,
) -> TestRun:
    """``command`` run in a judge's tree of ``files`` built for it (removed afterwards)."""
    judge = await asyncio.to_thread(_tree_for, files, workspace, baseline, confinement)
    try:
        return await run_tests(
            command,
            judge.root,
            timeout_s=timeout_s,
            confinement=confinement,
            judge=judge,
            collect_only=collect_only,
        )
    finally:
        judge.retire()


def _judged_files(run: TestRun, command: str, workspace: Path) -> list[str]:
    """The test files a run exercised: from the per-test reports when there are some, else the
    files the command names (every test file of the workspace for a bare ``pytest``)."""
    if run.outcomes:
        return sorted({nodeid.split("::", 1)[0] for nodeid in run.outcomes})
    named = [rel for rel in executed_files(command, workspace).files if _is_test_file(rel)]
    if named or not is_pytest_command(command):
        return named
    return sorted(
        rel
        for rel in (p.relative_to(workspace).as_posix() for p in workspace_files(workspace))
        if _is_test_file(rel) and rel.endswith(".py")
    )


def _integrity_applies(
    step: ManifestStep,
    baseline: Mapping[str, Any],
    diff: Mapping[str, str],
    tests_result: CheckResult | None,
) -> bool:
    """Integrity is a check only where something could be tampered with: tests or check scripts,
    test configuration, or Python code the step changed. A step with none of these has no
    integrity to lose (and the check would be a free pass in its score)."""
    return bool(
        baseline.get("files")
        or baseline.get("check_files")
        or baseline.get("pytest_config")
        or tests_result is not None
        or any(check.kind == "command" for check in step.checks)
        or any(rel.endswith(".py") or Path(rel).name in GUARD_FILES for rel in diff)
    )


def _tamper_scan(
    workspace: Path, tree: Mapping[str, str], diff: Mapping[str, str]
) -> list[TamperFinding]:
    """The tamper scan over the step's changed Python files, against their pre-step copies."""
    changes: dict[str, tuple[str | None, str]] = {}
    for rel, state in sorted(diff.items()):
        if state == "deleted" or not rel.endswith(".py") or len(changes) >= MAX_SCANNED:
            continue
        before = None
        if state == "changed":
            try:
                before = read_blob(tree[rel]).decode("utf-8", errors="replace")
            except SnapshotMissing:
                before = None  # no pre-step copy: everything in the file counts as the step's
        try:
            after = (workspace / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        changes[rel] = (before, after)
    return scan_changes(changes)


def _integrity_check(
    step: ManifestStep,
    workspace: Path,
    baseline: Mapping[str, Any],
    tests_result: CheckResult | None,
    findings: list[TamperFinding],
) -> CheckResult:
    before_files: dict[str, str] = dict(baseline.get("files") or {})
    deleted = [rel for rel in sorted(before_files) if not (workspace / rel).is_file()]
    changed = [rel for rel in _changed_files(workspace, before_files) if rel not in deleted]
    added_guards = sorted(
        path.relative_to(workspace).as_posix()
        for path in workspace_files(workspace)
        if path.name in GUARD_FILES and path.relative_to(workspace).as_posix() not in before_files
    )
    before_config: dict[str, str] = dict(baseline.get("pytest_config") or {})
    now_config = _pytest_config(workspace)
    config = sorted(
        f"{rel} {PYTEST_CONFIG_SECTIONS[Path(rel).name]}"
        for rel in before_config.keys() | now_config.keys()
        if before_config.get(rel) != now_config.get(rel)
    )
    before_checks: dict[str, str] = dict(baseline.get("check_files") or {})
    check_files = _changed_files(workspace, before_checks)
    # What the checks execute, resolved again now: a script that was not there before the step
    # (or was not part of a check then) is the step's own judge.
    tree: dict[str, str] = dict(baseline.get("tree") or {})
    now_checks = _check_files(step, workspace, baseline.get("test_command"))
    own_scripts = sorted(
        rel
        for rel, digest in now_checks.items()
        if rel not in before_checks and tree.get(rel) != digest
    )
    tampered = list((tests_result.details.get("tampered") or []) if tests_result else [])
    lines = describe(findings)
    details: dict[str, Any] = {
        "changed": changed,
        "deleted": deleted,
        "added": added_guards,
        "pytest_config": config,
        "check_files": check_files,
        "own_check_scripts": own_scripts,
        "tampered": tampered,
        "tamper_findings": lines,
        "writes_tests": step.writes_tests,
    }
    problems = []
    if not step.writes_tests:
        if changed:
            problems.append("test files changed: " + ", ".join(changed))
        if deleted:
            problems.append("test files deleted: " + ", ".join(deleted))
        if added_guards:
            problems.append("test configuration added: " + ", ".join(added_guards))
        if config:
            problems.append("pytest configuration changed: " + ", ".join(config))
    if check_files:
        problems.append("check script changed or deleted: " + ", ".join(check_files))
    if own_scripts:
        problems.append("check script written or changed by the step: " + ", ".join(own_scripts))
    if tampered:
        problems.append("test report tampered: " + "; ".join(tampered))
    if lines and step.critical:
        shown = lines[:MAX_LISTED_FINDINGS]
        more = len(lines) - len(shown)
        problems.append(
            "tamper scan: " + "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
        )
    if not problems:
        return CheckResult(name="integrity", type="integrity", passed=True, details=details)
    return CheckResult(
        name="integrity",
        type="integrity",
        passed=False,
        diagnosis="; ".join(problems)
        + (
            " (only a step that declares writes_tests may change tests)"
            if not step.writes_tests and (changed or deleted or added_guards or config)
            else ""
        ),
        details=details,
    )


async def _review_check(
    step: ManifestStep,
    execution: ExecutionResult,
    llm: AsyncStructuredLLM | None,
    earlier: list[CheckResult],
    threshold: float,
    findings: list[str],
) -> CheckResult:
    if llm is None:
        return _errored("review", "review", "no model is configured for the review")
    messages = review_messages(
        step_id=step.id,
        task=output_text(step.input),
        output=truncate_middle(output_text(execution.output), REVIEW_OUTPUT_CHARS),
        notes=truncate_middle(execution.notes or "", 2000),
        checks=[(result.name, result.passed) for result in earlier],
        findings=findings,
    )
    try:
        answer = await llm.astructured("review", messages, StepReviewVerdict)
    except LLMOutputError as exc:
        return _errored(
            "review",
            "review",
            f"the review answer was unusable: {exc}",
            {"usage": exc.usage_update("review")},  # the unusable call still counts
        )
    verdict = answer.value
    details = {
        "verdict_passed": verdict.passed,
        "confidence": verdict.confidence,
        "threshold": threshold,
        "usage": answer.usage_update("review"),
    }
    passed = verdict.passed and verdict.confidence >= threshold
    diagnosis = verdict.diagnosis
    if verdict.passed and not passed:
        diagnosis = (
            f"the reviewer's confidence {verdict.confidence:.2f} is below {threshold:.2f}: "
            f"{verdict.diagnosis}"
        )
    return CheckResult(
        name="review", type="review", passed=passed, diagnosis=diagnosis, details=details
    )


# --- fingerprints -------------------------------------------------------------------------------


def _fingerprint_files(
    step: ManifestStep, workspace: Path, command: str | None
) -> tuple[dict[str, str], bool]:
    if not workspace.is_dir():
        return {}, False
    wanted: set[Path] = set()
    truncated = False
    for path in workspace_files(workspace):
        if _is_test_file(path.relative_to(workspace).as_posix()) and path.suffix != ".pyc":
            if len(wanted) >= MAX_FINGERPRINTS:
                truncated = True
                break
            wanted.add(path)
    if command and is_pytest_command(command):
        wanted.update(workspace / rel for rel in executed_files(command, workspace).files)
    files = {p.relative_to(workspace).as_posix(): sha256_file(p) for p in sorted(wanted)}
    return files, truncated


def _check_files(step: ManifestStep, workspace: Path, command: str | None) -> dict[str, str]:
    """Files that define checks rather than tests: whatever the command checks execute (however
    spelled: see :mod:`~veriloop.engines.plan.judge.executed`), and what a test command other than
    pytest runs (a Makefile, its includes, the scripts of its recipes) apart from test files.
    Not even a ``writes_tests`` step may change them."""
    if not workspace.is_dir():
        return {}
    wanted: set[str] = set()
    if command and not is_pytest_command(command):
        wanted.update(
            rel for rel in executed_files(command, workspace).files if not _is_test_file(rel)
        )
    for check in step.checks:
        if check.kind == "command":
            wanted.update(executed_files(check.command or "", workspace).files)
    return {rel: sha256_file(workspace / rel) for rel in sorted(wanted)}


def _is_test_module(rel: str) -> bool:
    """A module pytest collects by default (``test_*.py``, ``*_test.py``)."""
    name = Path(rel).name
    return name.startswith("test_") or name.endswith("_test.py")


def _is_test_file(rel: str) -> bool:
    """Test files (the write scope's, :func:`~veriloop.engines.plan.judge.scope.is_test_path`)
    and pytest's own configuration files (``pytest.ini``)."""
    return is_test_path(rel) or Path(rel).name in GUARD_FILES


def _changed_files(workspace: Path, before: Mapping[str, str]) -> list[str]:
    """Fingerprinted files that are gone or whose content changed."""
    return [
        rel
        for rel, digest in sorted(before.items())
        if not (workspace / rel).is_file() or sha256_file(workspace / rel) != digest
    ]


def _pytest_config(workspace: Path) -> dict[str, str]:
    """sha256 of the pytest section of each pyproject.toml, setup.cfg and tox.ini that has one."""
    if not workspace.is_dir():
        return {}
    found = {}
    for path in workspace_files(workspace):
        if path.name in PYTEST_CONFIG_SECTIONS:
            section = _pytest_section(path)
            if section is not None:
                found[path.relative_to(workspace).as_posix()] = _sha256_json(section)
    return found


def _pytest_section(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.name == "pyproject.toml":
            return tomllib.loads(text).get("tool", {}).get("pytest")
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(text)
        name = "tool:pytest" if path.name == "setup.cfg" else "pytest"
        return dict(parser[name]) if parser.has_section(name) else None
    except (OSError, ValueError, configparser.Error):  # TOMLDecodeError is a ValueError
        return "unreadable"


def _sha256_json(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# --- helpers ------------------------------------------------------------------------------------


def _errored(
    name: str, kind: CheckType, diagnosis: str, details: dict[str, Any] | None = None
) -> CheckResult:
    return CheckResult(
        name=name,
        type=kind,
        passed=False,
        errored=True,
        diagnosis=diagnosis,
        details=details or {},
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "it timed out"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _truncate_keeping_head(text: str, limit: int, *, keep_head: int) -> str:
    """Truncate in the middle, but never inside the first ``keep_head`` characters when possible."""
    if len(text) <= limit:
        return text
    if keep_head and keep_head < limit // 2:
        head = text[:keep_head]
        return head + truncate_middle(text[keep_head:], limit - keep_head)
    return truncate_middle(text, limit)


__all__ = [
    "REVIEW_THRESHOLD",
    "checks_passed",
    "output_text",
    "run_checks",
    "structured_output",
    "take_baseline",
    "truncate_middle",
]
