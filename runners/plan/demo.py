"""``veriloop plan demo``: a plan of tool-using steps finishes a small Python project, judged by its tests.

The bundled project (``runners/plan/demo_project/project``: a text buffer with insert, delete, undo and
redo, stubbed, with real pytest tests, one test file per implementation step named
``tests/test_{step_id}.py``) is copied to a temporary workspace, and ``runners/plan/demo_project/manifest.yaml``
runs on it: a python data step (checked by predicates) beside three implementation steps, all in
parallel on disjoint declared writes, a synthesis gate that replays the sample edits through the finished buffer, and a
human review that the demo approves automatically.

With ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` set, the configured model writes the code (its file
tools are confined to the temporary copy). With neither, :class:`PlanDemoPlaybook` plays it through
the loopback :class:`~veriloop.llm.scripted.ScriptedModelServer`, so the real client, executor,
checks and graph run: ``delete_text``'s first attempt has an off-by-one bug that its test run
catches and the corrective prompt (``Attempt: 2 of 3``) fixes; ``undo_history`` claims
``[SUCCESS]`` while its tests fail, twice, so it ends ``partial_pass`` and its ``on_failure:
replan`` replaces it with a step that gets it right.

The demo's exit status is the exit code of the project's whole test suite, run with pytest in the
workspace once the plan is done: never anything the agent said.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from veriloop.context import PlanContext
from veriloop.engines.plan.confinement.sandbox import Confinement
from veriloop.engines.plan.confinement.sandbox import launch as sandbox_launch
from veriloop.engines.plan.manifest import downstream_of, load_manifest
from veriloop.engines.plan.tools import load_tools
from veriloop.llm.endpoint import SCRIPTED_MODEL, describe_model, model_configured
from veriloop.llm.scripted import ANY_PURPOSE, ScriptedModelServer, ScriptedRequest, ToolCalls
from veriloop.plans import PlanRunner
from veriloop.runners.plan.report import write_plan_report
from veriloop.schemas.manifest import Manifest, ManifestStep
from veriloop.schemas.plan_outputs import CheckDraft, RepairDraft, StepDraft, StepReviewVerdict
from veriloop.schemas.plan_run import PendingReview, PlanRunReport

DEMO_DIR = Path(__file__).resolve().parent / "demo_project"
PROJECT_DIR = DEMO_DIR / "project"
MANIFEST_PATH = DEMO_DIR / "manifest.yaml"
SHELL_ALLOWLIST = "python3 -m textbuffer.replay,python -m textbuffer.replay,python3 -m pytest,python -m pytest,pytest"
"""Model-written commands (a replan's gate) that may run without a person's approval."""
REVIEW_COMMENT = "approved automatically by veriloop plan demo"

EventHandler = Callable[[dict[str, Any]], Any | Awaitable[Any]]
ReviewHandler = Callable[[PendingReview, bool, str], None]


@dataclass
class PlanDemoResult:
    """What the demo did and what the project's own test suite says about it."""

    report: PlanRunReport
    workspace: Path
    """The workspace copy (deleted after the run unless kept)."""
    kept: bool
    scripted: bool
    model: str
    suite_exit_code: int
    """pytest's exit code on the whole suite of the workspace copy."""
    suite_summary: str
    """pytest's last line (``21 passed in 0.40s``)."""
    suite_output: str
    html_report: Path | None = None

    @property
    def exit_code(self) -> int:
        """The demo's exit status: pytest's exit code, whatever the agent or the run said."""
        return self.suite_exit_code


# -- the data step -----------------------------------------------------------------------------


def make_demo_tools() -> dict[str, Callable[..., Any]]:
    """The callables the demo manifest's python steps use (``demo_project/steps.py``, loaded from
    its file: each step's child process imports it from there)."""
    return load_tools(f"{DEMO_DIR / 'steps.py'}:TOOLS")


# -- the scripted model --------------------------------------------------------------------------

_STEP_LINE = re.compile(r"^Step: (\S+)", re.MULTILINE)
_ATTEMPT_LINE = re.compile(r"^Attempt: (\d+) of (\d+)", re.MULTILINE)
REPLANNED_MARKER = "Replanned:"
"""Starts the input of the replacement undo_history step the scripted replanner writes."""

INSERT_CODE = '''"""Inserting text (written by the plan step insert_text)."""

from __future__ import annotations


def insert(text: str, pos: int, new: str) -> str:
    """``text`` with ``new`` inserted before index ``pos`` (0 <= pos <= len(text), else IndexError)."""
    if not 0 <= pos <= len(text):
        raise IndexError(f"insert position {pos} outside 0..{len(text)}")
    return text[:pos] + new + text[pos:]
'''

DELETE_CODE = '''"""Deleting text (written by the plan step delete_text)."""

from __future__ import annotations


def delete(text: str, start: int, end: int) -> str:
    """``text`` without ``text[start:end]`` (0 <= start <= end <= len(text), else IndexError)."""
    if not 0 <= start <= end <= len(text):
        raise IndexError(f"delete range {start}..{end} outside 0..{len(text)}")
    return text[:start] + text[end:]
'''

DELETE_CODE_OFF_BY_ONE = DELETE_CODE.replace("text[end:]", "text[end + 1 :]")
"""The first attempt's bug: the end index treated as inclusive."""

HISTORY_CODE = '''"""Undo and redo (written by the plan step undo_history)."""

from __future__ import annotations


class History:
    """States before each edit (the undo stack) and undone states (the redo stack)."""

    def __init__(self) -> None:
        self._undo: list[str] = []
        self._redo: list[str] = []

    def record(self, state: str) -> None:
        self._undo.append(state)
        self._redo.clear()

    def undo(self, current: str) -> str:
        if not self._undo:
            raise IndexError("nothing to undo")
        self._redo.append(current)
        return self._undo.pop()

    def redo(self, current: str) -> str:
        if not self._redo:
            raise IndexError("nothing to redo")
        self._undo.append(current)
        return self._redo.pop()

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    @property
    def can_redo(self) -> bool:
        return bool(self._redo)
'''

HISTORY_CODE_BROKEN = HISTORY_CODE.replace("        self._redo.clear()\n", "").replace(
    "return self._redo.pop()", "return self._redo.pop(0)"
)
"""What the original undo_history writes on both attempts: a new edit does not clear the redo
stack, and redo takes the oldest undone state instead of the newest."""

_FILES = {
    "insert_text": ("textbuffer/insert.py", "tests/test_insert_text.py"),
    "delete_text": ("textbuffer/delete.py", "tests/test_delete_text.py"),
    "undo_history": ("textbuffer/history.py", "tests/test_undo_history.py"),
}


class PlanDemoPlaybook:
    """Answers the demo's model calls from what each request shows (step id, attempt, turn).

    * ``execution`` (an ``llm`` step's tool turns): read the stub and its tests, write the module,
      then ``mark_step``. ``delete_text`` writes an off-by-one bug on attempt 1 and the fix on
      attempt 2; the original ``undo_history`` writes broken code on every attempt and claims
      ``[SUCCESS]`` anyway; its replacement (input starting ``Replanned:``) gets it right.
    * ``replanning``: one RepairDraft for the blocked step and everything downstream of it.
    * ``review`` (the critical gate): passes exactly when every automatic check of the attempt
      passed.
    """

    def __init__(self, manifest: Manifest | None = None) -> None:
        self.manifest = manifest or load_manifest(MANIFEST_PATH, origin="user")

    def install(self, server: ScriptedModelServer) -> ScriptedModelServer:
        server.on("execution", self.execution)
        server.on("replanning", self.replanning)
        server.on("review", self.review)
        server.on(ANY_PURPOSE, self.unexpected)
        return server

    # -- purposes ---------------------------------------------------------------------------

    def execution(self, request: ScriptedRequest) -> ToolCalls:
        task = _first_user_message(request)
        step = _STEP_LINE.search(task)
        step_id = step.group(1) if step else ""
        attempt_line = _ATTEMPT_LINE.search(task)
        attempt = int(attempt_line.group(1)) if attempt_line else 1
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        if step_id not in _FILES:
            return ToolCalls(
                [
                    (
                        "mark_step",
                        {
                            "notes": f"[FAIL]: the scripted playbook has no answer for step {step_id!r}"
                        },
                    )
                ]
            )
        module, tests = _FILES[step_id]
        if turn == 0:
            return ToolCalls([("read_file", {"path": module}), ("read_file", {"path": tests})])
        code, notes = self._code(step_id, attempt, replanned=REPLANNED_MARKER in task)
        if turn == 1:
            return ToolCalls([("write_file", {"path": module, "content": code})])
        return ToolCalls(
            [("mark_step", {"notes": notes, "output": {"module": module, "attempt": attempt}})]
        )

    def replanning(self, request: ScriptedRequest) -> RepairDraft:
        failed = [s.id for s in self.manifest.steps if f"- {s.id}:" in request.text]
        blocked = failed or ["undo_history"]
        redesign = set(blocked) | downstream_of(self.manifest, blocked)
        steps = [_draft(s) for s in self.manifest.steps if s.id in redesign]
        for draft in steps:
            if draft.id == "undo_history":
                draft.input = (
                    f"{REPLANNED_MARKER} the first History kept the redo stack after a new edit and "
                    "redid the oldest undone state. Rewrite textbuffer/history.py from its "
                    "docstring: record() clears the redo stack, and undo/redo are both LIFO "
                    "stacks. Run through tests/test_undo_history.py case by case before marking."
                )
                draft.on_failure = "halt_if_critical"
        return RepairDraft(
            summary=(
                "undo_history claimed success while 2 of its 4 tests failed on both attempts; "
                "replaced it with a step that states the two stack rules the tests check, and "
                "re-planned the gate and the review that depend on it unchanged."
            ),
            steps=steps,
        )

    def review(self, request: ScriptedRequest) -> StepReviewVerdict:
        failed = (
            "FAILED"
            in request.text.split("Automatic checks on this attempt:", 1)[-1].split(
                "The step's output and notes:", 1
            )[0]
        )
        if failed:
            return StepReviewVerdict(
                passed=False, diagnosis="an automatic check of this attempt failed", confidence=0.9
            )
        return StepReviewVerdict(
            passed=True,
            diagnosis="the replay exited 0 and ends on the reference text; every automatic check passed",
            confidence=0.9,
        )

    def unexpected(self, request: ScriptedRequest) -> Any:
        raise LookupError(f"the plan demo's playbook does not answer purpose {request.purpose!r}")

    # -- code ---------------------------------------------------------------------------------

    @staticmethod
    def _code(step_id: str, attempt: int, *, replanned: bool) -> tuple[str, str]:
        if step_id == "insert_text":
            return INSERT_CODE, "[SUCCESS]: insert() slices the text and checks the position"
        if step_id == "delete_text":
            if attempt == 1:
                return DELETE_CODE_OFF_BY_ONE, "[SUCCESS]: delete() removes text[start:end]"
            return DELETE_CODE, "[SUCCESS]: fixed the off-by-one: end is exclusive, as in a slice"
        if replanned:
            return (
                HISTORY_CODE,
                "[SUCCESS]: History with LIFO undo/redo stacks; record() clears redo",
            )
        if attempt == 1:
            return HISTORY_CODE_BROKEN, "[SUCCESS]: History implemented with undo and redo stacks"
        return HISTORY_CODE_BROKEN, "[SUCCESS]: checked again, all tests pass now"


def _first_user_message(request: ScriptedRequest) -> str:
    for message in request.messages:
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def _draft(step: ManifestStep) -> StepDraft:
    return StepDraft(
        id=step.id,
        type=step.type if step.type != "plan" else "task",
        agent=step.agent,
        input=step.input if isinstance(step.input, str) else json.dumps(step.input),
        command=step.command,
        depends_on=list(step.depends_on),
        on_failure=step.on_failure,
        max_retries=step.max_retries,
        critical=step.critical,
        requires_testing=step.requires_testing,
        test_command=step.test_command,
        checks=[CheckDraft(kind=c.kind, expr=c.expr, command=c.command) for c in step.checks],
    )


# -- running it ------------------------------------------------------------------------------------


@contextmanager
def _pytest_without_plugin_autoload() -> Iterator[None]:
    """The project's tests need no pytest plugins; a virtualenv full of them (hypothesis,
    schemathesis, langsmith...) would add ~4 s to every test run the checks make."""
    name = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
    before = os.environ.get(name)
    os.environ[name] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


@contextmanager
def _scripted_server(server: ScriptedModelServer | None) -> Iterator[ScriptedModelServer]:
    if server is not None:
        yield server
        return
    with PlanDemoPlaybook().install(ScriptedModelServer()) as started:
        yield started


@contextmanager
def _workspace(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep = Path(keep)
        if keep.exists() and any(keep.iterdir()):
            raise FileExistsError(f"{keep} exists and is not empty; --keep needs a new directory")
        shutil.copytree(PROJECT_DIR, keep, dirs_exist_ok=True, ignore=_IGNORED)
        yield keep.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="veriloop-plan-demo-") as tmp:
        workspace = Path(tmp) / "textbuffer"
        shutil.copytree(PROJECT_DIR, workspace, ignore=_IGNORED)
        yield workspace.resolve()


_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "edits.json")


def run_test_suite(workspace: Path, timeout_s: float = 300.0) -> tuple[int, str]:
    """pytest on the whole suite of ``workspace``: (exit code, output). The suite runs code the
    plan's steps wrote: like theirs, its process gets a scrubbed environment and bubblewrap where
    it works."""
    launch = sandbox_launch(
        workspace, Confinement(), extra_env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    )
    pytest = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"
    try:
        done = subprocess.run(
            [*launch.argv, "-c", pytest],
            cwd=workspace,
            env=launch.env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            pass_fds=launch.pass_fds,
        )
    except subprocess.TimeoutExpired as exc:
        return 1, f"the test suite timed out after {timeout_s:g}s\n{exc.stdout or ''}"
    finally:
        for fd in launch.pass_fds:
            os.close(fd)
    return done.returncode, (done.stdout or "") + (done.stderr or "")


async def arun_plan_demo(
    report_dir: str | Path | None = None,
    *,
    keep: str | Path | None = None,
    model: str | None = None,
    model_server: ScriptedModelServer | None = None,
    on_event: EventHandler | None = None,
    on_review: ReviewHandler | None = None,
    concurrency: int = 4,
) -> PlanDemoResult:
    """Run the demo; ``model_server`` (or, with no provider configured, the playbook) answers
    model calls. Human reviews are approved automatically; a model-written command that is not
    allowlisted is rejected (the demo never runs one unseen)."""
    scripted = model_server is not None or not model_configured()
    with (
        _scripted_server(model_server) if scripted else nullcontext() as server,
        _workspace(Path(keep) if keep else None) as workspace,
        _pytest_without_plugin_autoload(),
    ):
        settings: dict[str, Any] = {}
        if scripted:
            settings = {"model": SCRIPTED_MODEL, "base_url": server.base_url}
        elif model:
            settings = {"model": model}
        context = PlanContext(
            workspace=str(workspace),
            shell_allowlist=SHELL_ALLOWLIST,
            replan_cooldown_s=0.0,
            review_critical_steps=True,
            step_timeout_s=180.0,
            check_timeout_s=180.0,
            **settings,
        )
        runner = PlanRunner(checkpointer=InMemorySaver(), context=context, tools=make_demo_tools())
        report = await runner.arun(
            MANIFEST_PATH, run_id="plan-demo", concurrency=concurrency, on_event=on_event
        )
        while report.status == "awaiting_review" and report.pending_reviews:
            decisions = {}
            for review in report.pending_reviews:
                approved = review.context.get("kind", "human_review") == "human_review"
                comment = (
                    REVIEW_COMMENT
                    if approved
                    else (
                        "rejected by veriloop plan demo: it does not run model-written commands "
                        "outside its allowlist"
                    )
                )
                if on_review is not None:
                    on_review(review, approved, comment)
                decisions[review.step_id] = {"approved": approved, "comment": comment}
            report = await runner.aresume(
                "plan-demo", decisions, concurrency=concurrency, on_event=on_event
            )
        suite_exit_code, suite_output = run_test_suite(workspace)
        lines = [line for line in suite_output.strip().splitlines() if line.strip()]
        result = PlanDemoResult(
            report=report,
            workspace=workspace,
            kept=keep is not None,
            scripted=scripted,
            model=context.model,
            suite_exit_code=suite_exit_code,
            suite_summary=lines[-1] if lines else "(no output)",
            suite_output=suite_output,
        )
        if report_dir is not None:
            result.html_report = write_plan_report(
                report,
                report_dir,
                model=context.model,
                scripted=scripted,
                endpoint=None if scripted else describe_model(context).where,
                title="veriloop plan demo: finish the textbuffer package",
                final_check=f"the project's whole test suite (pytest, exit code {suite_exit_code}): "
                f"{result.suite_summary}",
                final_check_passed=suite_exit_code == 0,
            )
    return result


def run_plan_demo(report_dir: str | Path | None = None, **kwargs: Any) -> PlanDemoResult:
    """Sync :func:`arun_plan_demo`."""
    import asyncio

    return asyncio.run(arun_plan_demo(report_dir, **kwargs))
