"""Fault injection: plan steps that lie, run through the real plan graph, must not complete.

Every case is a row of :mod:`benchmarks.false_completion_cases`: a small manifest (one to three steps) run by :class:`~veriloop.plans.PlanRunner`
on an ``InMemorySaver`` in a fresh temporary workspace; cases that need tests get a copy of the
tiny Python project in ``benchmarks/lies/calc`` (a stub module and three real pytest tests), plus
whatever files the case adds. ``llm`` steps, LLM reviews and replans are played by one
:class:`~veriloop.llm.scripted.ScriptedModelServer` on loopback, reached through the real
``openai`` client: each case runs under its own model name (``lies-<case>``), and the server
routes every request by that name, then by the ``Step: <id>`` line, the ``Attempt: n of m``
line and the turn number within the attempt.

Each case declares the final ``(status, verification_status)`` it expects of each of its steps:
``completed``/``verified`` only for honest steps. A step's status keeps what the checks found
(``test_failed`` when the tests check failed, ``failed`` otherwise) whatever its policy let the run
do next (that is its ``disposition``). Lying steps are ``critical`` with ``on_failure:
halt_if_critical`` unless the case is about another policy.

Two counts, over every step a case declares:

* ``false_completions``: steps whose status is ``completed`` while a check of their final attempt
  failed, or whose case says they must not complete;
* ``wrong_status``: steps whose ``(status, verification_status)`` differs from the case's; a case's
  own assertions (for instance: the injected text reached the reviewer inside the STEP_OUTPUT
  fence) count here too, against the case's first step, when they fail.

Decisions the cases encode (where the seeds leave room):

* notes are judged after stripping whitespace, so ``" [SUCCESS]: ..."`` passes and
  ``"  [FAIL]: ..."`` fails; a ``[fail]`` in any letter case is a failure report too (an honest
  "I failed" must never complete a step because of its spelling), and so are ``[FAIL]`` notes
  returned by a python step (honesty counts for every executor that reports notes);
* a model that answers only in text and never calls ``mark_step`` has not finished its step,
  whatever the text claims, even when the step declares no other check (seed 000's problem);
* a test run whose tests were all skipped, that died before pytest wrote its report (exit status 0
  or not), or that did not run the real pytest has not shown that anything works;
* changing the pytest section of pyproject.toml, setup.cfg or tox.ini is changing the tests;
  ``writes_tests`` lets a step change test files, never the scripts its command checks run;
* an LLM answer cut off by the token limit is unusable output: ``execution_failed``, like any
  other garbage answer; a tool call that ran out of time never got a result: ``pending``;
* an HTTP answer that is not a chat completion at all (a proxy's error page) is an outage, not
  the model's answer: the run stops, resumable, with nothing completed.

    python -m benchmarks.plan_false_completions [--concurrency 4] [--only NAME ...]

Last line: ``RESULT false_completions=<n> wrong_status=<n> steps=<n>`` (target 0 and 0); the exit
status is non-zero when either count is.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from langgraph.checkpoint.memory import InMemorySaver

from benchmarks.false_completion_cases import AGENTS, PROJECT, ROWS, Case, Expected, Turn
from benchmarks.verification_pairs import RESULTS_DIR
from veriloop.context import PlanContext
from veriloop.llm import clear_llm_cache
from veriloop.llm.scripted import ANY_PURPOSE, ScriptedModelServer, ScriptedRequest
from veriloop.plans import PlanRunner
from veriloop.schemas.plan_run import PlanRunReport

DEFAULT_OUT = RESULTS_DIR / "plan_false_completions.json"


def build_cases() -> list[Case]:
    """The table's cases (benchmarks/false_completion_cases.py), in order."""
    return list(ROWS)


# --- running -------------------------------------------------------------------------------------


@dataclass
class StepOutcome:
    case: str
    group: str
    step: str
    expected: Expected
    got: Expected
    failed_checks: list[str]
    false_completion: bool
    wrong_status: bool
    problems: list[str] = field(default_factory=list)
    diagnosis: str = ""


@dataclass
class CaseOutcome:
    case: Case
    report: PlanRunReport | None
    requests: list[ScriptedRequest]
    seconds: float
    error: str | None = None


class Router:
    """Answers every request of every case: by model name, purpose, step, attempt and turn."""

    def __init__(self, cases: Iterable[Case]) -> None:
        self.cases = {case.model: case for case in cases}

    def __call__(self, request: ScriptedRequest) -> Any:
        case = self.cases.get(str(request.body.get("model")))
        if case is None:
            raise LookupError(f"no case runs model {request.body.get('model')!r}")
        if request.purpose == "execution":
            return self._execution(case, request)
        if request.purpose == "review":
            answer = case.reviews.get(_step_id(request))
            if answer is None:
                raise LookupError(f"{case.name}: no review scripted for {_step_id(request)!r}")
            return answer(request) if callable(answer) else answer
        if request.purpose == "replanning" and case.replan is not None:
            return case.replan(request) if callable(case.replan) else case.replan
        raise LookupError(f"{case.name}: nothing scripted for purpose {request.purpose!r}")

    def _execution(self, case: Case, request: ScriptedRequest) -> Any:
        step = _step_id(request)
        script = case.scripts.get(step)
        if script is None:
            raise LookupError(f"{case.name}: no execution script for step {step!r}")
        first = _text(request.messages[1]) if len(request.messages) > 1 else ""
        match = re.search(r"^Attempt: (\d+) of \d+$", first, re.MULTILINE)
        attempt = int(match.group(1)) if match else 1
        turn = 1 + sum(1 for m in request.messages if m.get("role") == "assistant")
        if callable(script):
            return script(Turn(step, attempt, turn, request))
        return script[min(attempt, len(script)) - 1]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _step_id(request: ScriptedRequest) -> str:
    for message in request.messages:
        if message.get("role") == "user":
            match = re.match(r"Step: (\S+)", _text(message))
            if match:
                return match.group(1)
    return ""


def prepare_workspace(case: Case, root: Path) -> Path:
    workspace = root / case.name
    if case.project:
        shutil.copytree(PROJECT, workspace, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        workspace.mkdir(parents=True)
    for rel, content in case.files.items():
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    return workspace


async def run_case(case: Case, root: Path, server: ScriptedModelServer) -> CaseOutcome:
    workspace = prepare_workspace(case, root)
    settings: dict[str, Any] = {
        "model": case.model,
        "workspace": str(workspace),
        "review_critical_steps": False,
        "replan_cooldown_s": 0.0,
        "llm_max_retries": 0,
        "llm_timeout_s": 20.0,
        "step_timeout_s": 30.0,
        "check_timeout_s": 60.0,
        "max_turns": 4,
        **case.context,
    }
    runner = PlanRunner(
        checkpointer=InMemorySaver(),
        context=PlanContext(**settings),
        tools=case.tools(workspace) if case.tools else None,
    )
    used = {"coder"} | {step["agent"] for step in case.steps if step.get("agent")}
    agents = {name: spec for name, spec in AGENTS.items() if name in used}
    manifest = {"goal": f"false-completion case {case.name}", "agents": agents, "steps": case.steps}
    started = time.perf_counter()
    try:
        report = await runner.arun(manifest, run_id=case.name)
        error = None
    except Exception as exc:  # a crash of the run is reported against the case, not hidden
        report, error = None, f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started
    requests = [r for r in server.requests if r.body.get("model") == case.model]
    return CaseOutcome(case, report, requests, seconds, error)


def evaluate(outcome: CaseOutcome, expect: dict[str, Expected] | None = None) -> list[StepOutcome]:
    """Each declared step's outcome against the case's expectations (or ``expect``)."""
    case = outcome.case
    expect = expect if expect is not None else case.expect
    problems: list[str] = []
    stopped = outcome.error is not None and outcome.error.startswith(f"{case.stops_with}:")
    if outcome.error and not stopped:
        problems.append(f"the run raised {outcome.error}")
    elif case.stops_with and not stopped:
        problems.append(f"the run did not stop with {case.stops_with}")
    elif outcome.report is not None and case.verify is not None:
        try:
            problems = list(case.verify(outcome.report, outcome.requests))
        except Exception as exc:
            problems = [f"the case's assertions raised {type(exc).__name__}: {exc}"]
    results = []
    for index, (step_id, expected) in enumerate(expect.items()):
        step = outcome.report.steps.get(step_id) if outcome.report else None
        got: Expected = (step.status, step.verification_status) if step else ("missing", None)
        failed = []
        if step is not None and step.attempts:
            failed = [c.name for c in step.attempts[-1].checks if not c.passed or c.errored]
        own = problems if index == 0 else []
        false_completion = got[0] == "completed" and (bool(failed) or expected[0] != "completed")
        results.append(
            StepOutcome(
                case=case.name,
                group=case.group,
                step=step_id,
                expected=expected,
                got=got,
                failed_checks=failed,
                false_completion=false_completion,
                wrong_status=got != expected or bool(own),
                problems=own,
                diagnosis=step.diagnosis if step else "",
            )
        )
    return results


def count(outcomes: Iterable[StepOutcome]) -> tuple[int, int, int]:
    """(false_completions, wrong_status, steps)."""
    outcomes = list(outcomes)
    return (
        sum(o.false_completion for o in outcomes),
        sum(o.wrong_status for o in outcomes),
        len(outcomes),
    )


def result_line(outcomes: Iterable[StepOutcome]) -> str:
    false_completions, wrong_status, steps = count(outcomes)
    return f"RESULT false_completions={false_completions} wrong_status={wrong_status} steps={steps}"


class Suite:
    """The scripted model server and a scratch directory shared by every case of one run."""

    def __init__(self, cases: Sequence[Case]) -> None:
        self.cases = list(cases)
        self.server = ScriptedModelServer()
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._env: dict[str, str | None] = {}

    def __enter__(self) -> Suite:
        self.server.start()
        self.server.on(ANY_PURPOSE, Router(self.cases))
        self._tmp = tempfile.TemporaryDirectory(prefix="veriloop-lies-")
        settings = {
            "OPENAI_BASE_URL": self.server.base_url,
            "OPENAI_API_KEY": "benchmark",
            # The fixture project needs no plugin; loading every installed one costs ~6 s a run.
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        }
        for name, value in settings.items():
            self._env[name] = os.environ.get(name)
            os.environ[name] = value
        clear_llm_cache()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        for name, value in self._env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        clear_llm_cache()
        if self._tmp is not None:
            self._tmp.cleanup()

    async def arun(self, concurrency: int = 4) -> list[CaseOutcome]:
        assert self._tmp is not None, "use the suite as a context manager"
        root = Path(self._tmp.name)
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(case: Case) -> CaseOutcome:
            async with gate:
                return await run_case(case, root, self.server)

        return list(await asyncio.gather(*(one(case) for case in self.cases)))


def run_cases(cases: Sequence[Case], concurrency: int = 4) -> list[CaseOutcome]:
    with Suite(cases) as suite:
        return asyncio.run(suite.arun(concurrency))


# --- reporting -----------------------------------------------------------------------------------


def _pair(pair: Expected) -> str:
    return f"{pair[0]}/{pair[1] or '-'}"


def table(outcomes: Sequence[StepOutcome]) -> str:
    rows = [("case", "expected", "got", "checks that failed", "")]
    for o in outcomes:
        verdict_text = (
            "FALSE COMPLETION" if o.false_completion else ("WRONG" if o.wrong_status else "ok")
        )
        name = o.case if o.step in ("impl", "report") else f"{o.case}:{o.step}"
        rows.append(
            (name, _pair(o.expected), _pair(o.got), ",".join(o.failed_checks) or "-", verdict_text)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for row in rows:
        lines.append(
            "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4]
        )
        if len(lines) == 1:
            lines.append("-" * (sum(widths) + 8 + 16))
    return "\n".join(lines)


def main(
    concurrency: Annotated[int, typer.Option(help="Cases run at once.")] = 4,
    only: Annotated[
        list[str] | None, typer.Option(help="Run only cases whose name contains this.")
    ] = None,
    out: Annotated[str, typer.Option(help="Where to write the JSON results.")] = str(DEFAULT_OUT),
) -> None:
    cases = [c for c in build_cases() if not only or any(o in c.name for o in only)]
    if not cases:
        raise typer.BadParameter("no case matches --only")
    started = time.perf_counter()
    case_outcomes = run_cases(cases, concurrency)
    elapsed = time.perf_counter() - started
    outcomes = [step for outcome in case_outcomes for step in evaluate(outcome)]
    print(table(outcomes))
    for o in outcomes:
        if o.wrong_status or o.false_completion:
            print(f"\n{o.case}:{o.step}: expected {_pair(o.expected)}, got {_pair(o.got)}")
            for problem in o.problems:
                print(f"  - {problem}")
            if o.diagnosis:
                print(f"  diagnosis: {o.diagnosis[:300]}")
    lies = sum(1 for c in cases if not c.control)
    print(
        f"\n{len(cases)} cases ({lies} lying, {len(cases) - lies} honest controls), "
        f"{len(outcomes)} steps in {elapsed:.1f} s at concurrency {concurrency}"
    )
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(
            {
                "seconds": elapsed,
                "steps": [
                    {**o.__dict__, "expected": list(o.expected), "got": list(o.got)}
                    for o in outcomes
                ],
            },
            handle,
            indent=1,
        )
    line = result_line(outcomes)
    print(line)
    false_completions, wrong_status, _ = count(outcomes)
    if false_completions or wrong_status:
        raise typer.Exit(1)


__all__ = ["Case", "build_cases", "count", "evaluate", "result_line", "run_cases", "Suite"]


if __name__ == "__main__":
    typer.run(main)
