"""``veriloop plan``: run plans of tool-using steps, resume them, rewrite their reports, the demo.

veriloop plan run examples/hello_shell.yaml --report out/
veriloop plan run examples/python_steps.yaml --tools examples/tools.py:TOOLS
veriloop plan run --goal "Summarise the README in three bullet points"     # the meta-planner writes the plan
veriloop plan resume RUN_ID --approve-all
veriloop plan cancel RUN_ID                          # or --server URL for a service's run
veriloop plan report RUN_ID --out out/
veriloop plan demo

Runs are threads of the plan graph in a SQLite checkpointer (``--db``, default
``.veriloop/plans.sqlite``): a killed run continues with ``veriloop plan resume RUN_ID``
without re-running finished steps. The settings a run was started with (workspace, tools,
model, report directory) are kept in the same file, so ``resume`` needs only the run id.

Exit status: 0 only when the run completed (every step's checks passed); 1 when it failed or
the critic rejected the plan; 2 for a usage error (missing file, invalid manifest, bad
``--tools``, no model for a plan that needs one); 3 when the run waits for a human review that
nobody answered (no TTY and no ``--approve-all``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from veriloop.llm.endpoint import describe_model, model_configured
from veriloop.schemas.manifest import SandboxMode
from veriloop.schemas.usage import total_usage

plan_app = typer.Typer(
    help="Plans of tool-using steps: run a manifest, resume a run, rewrite its report, the demo.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console(highlight=False)

DEFAULT_DB = Path(".veriloop") / "plans.sqlite"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_AWAITING_REVIEW = 0, 1, 2, 3
_RUNS_TABLE = "veriloop_plan_cli_runs"
_PIPED_MAX_WIDTH = 400
"""Piped tables grow to their natural width up to this many columns."""

Db = Annotated[
    Path,
    typer.Option("--db", help="SQLite file of plan runs (created as needed).", dir_okay=False),
]
ApproveAll = Annotated[
    bool, typer.Option("--approve-all", help="Approve every human review without asking.")
]
ReportDir = Annotated[
    Path | None,
    typer.Option(
        "--report", help="Write report.html and report.json into this directory.", file_okay=False
    ),
]


class UsageError(Exception):
    """A problem with what the user asked for: printed as one line, exit status 2."""


# -- settings kept with a run -------------------------------------------------------------------


@dataclass
class RunSettings:
    """What ``plan run`` was started with, kept beside the checkpoints so ``resume`` can continue."""

    workspace: str
    tools: str | None = None
    model: str | None = None
    reasoning_effort: str | None = None
    purposes: dict[str, dict] = field(default_factory=dict)
    """Per-purpose settings from ``--model PURPOSE=NAME`` and ``--reasoning-effort PURPOSE=LEVEL``."""
    review: bool = True
    concurrency: int = 4
    report: str | None = None
    endpoint: str | None = None
    scripted: bool = False
    sandbox: SandboxMode = "auto"
    pass_env: list[str] = field(default_factory=list)
    """Names only: the values are read from the environment of whichever process runs the steps."""
    started: float = field(default_factory=time.time)

    def context(self):
        from veriloop.context import PlanContext

        extra = {
            name: value
            for name, value in (
                ("model", self.model),
                ("reasoning_effort", self.reasoning_effort),
                ("purposes", self.purposes),
            )
            if value
        }
        return PlanContext(
            workspace=self.workspace,
            review_critical_steps=self.review,
            sandbox=self.sandbox,
            pass_env=",".join(self.pass_env),
            **extra,
        )


def _check_db_place(db: Path, workspace: Path) -> None:
    """The run's database outside the workspace, or in its ``.veriloop`` folder: anywhere else a
    step's write scope would count the runner's own writes as the step's change."""
    db, workspace = db.resolve(), workspace.resolve()
    if workspace in db.parents and ".veriloop" not in db.relative_to(workspace).parts:
        raise UsageError(
            f"--db {db}: inside the workspace, where each step's write scope would count the "
            f"run's own database as a change of the step's; keep it in {workspace / '.veriloop'} "
            "(the default) or outside the workspace"
        )


def save_settings(db: Path, run_id: str, settings: RunSettings) -> None:
    with _connect(db) as conn:
        conn.execute(
            f"INSERT OR REPLACE INTO {_RUNS_TABLE} (run_id, settings) VALUES (?, ?)",
            (run_id, json.dumps(settings.__dict__)),
        )


def load_settings(db: Path, run_id: str) -> RunSettings | None:
    with _connect(db) as conn:
        row = conn.execute(
            f"SELECT settings FROM {_RUNS_TABLE} WHERE run_id = ?", (run_id,)
        ).fetchone()
    if row is None:
        return None
    data = json.loads(row[0])
    known = RunSettings.__dataclass_fields__
    return RunSettings(**{k: v for k, v in data.items() if k in known})


def _connect(db: Path) -> sqlite3.Connection:
    db.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db, timeout=30)
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {_RUNS_TABLE} (run_id TEXT PRIMARY KEY, settings TEXT)"
    )
    return conn


# -- tools, model ---------------------------------------------------------------------------------


def load_tools_spec(spec: str | None) -> Any:
    """The tools ``--tools`` names (``module:attr`` or ``path/to/file.py:attr``); UsageError when
    they cannot be loaded."""
    if not spec:
        return None
    from veriloop.engines.plan.tools import load_tools

    try:
        return load_tools(spec)
    except ValueError as exc:
        raise UsageError(f"--tools {spec!r}: {exc}") from None


def why_model_needed(manifest, *, review: bool) -> str | None:
    """Why running ``manifest`` needs a model (the first reason found), or None."""
    from veriloop.engines.plan.requirements import why_model_needed as step_needs

    for step in _all_steps(manifest):
        if (why := step_needs(step, review=review)) is not None:
            return f"step {step.id!r} {why}"
    return None


def _all_steps(manifest) -> Iterator[Any]:
    for step in manifest.steps:
        yield step
        if step.plan is not None:
            yield from _all_steps(step.plan)


def _endpoint() -> str:
    return describe_model().where


# -- live progress ----------------------------------------------------------------------------------


def describe_event(event: dict[str, Any]) -> str | None:
    """One rich-markup line for a progress event (None for events not worth a line)."""
    kind = event.get("event")
    step = escape(str(event.get("step_id", "")))
    n = event.get("run_number")
    if kind == "attempt_started":
        if n == 1:
            return f"[bold]>  {step}[/] started"
        return f"[bold]>  {step}[/] [yellow]attempt {n}[/] (corrective)"
    if kind == "step_testing":
        return f"[dim]   {step} attempt {n}: checking[/]"
    if kind == "check_result":
        mark = "[green]pass[/]" if event.get("passed") else "[red]FAIL[/]"
        why = event.get("diagnosis") or ""
        detail = f" [dim]{escape(_one_line(why))}[/]" if why else ""
        return f"   {step} attempt {n}: {mark} {escape(str(event.get('name', '')))}{detail}"
    if kind == "attempt_finished":
        ok = "[green]passed[/]" if event.get("passed") else "[red]failed[/]"
        move = event.get("move")
        after = f" -> {escape(str(move))}" if move and move != "verified" else ""
        return f"   {step} attempt {n} {ok}{after}"
    if kind == "step_finished":
        status = str(event.get("status", ""))
        colour = _STATUS_COLOUR.get(status, "red")
        parts = [f"[{colour}]{escape(status)}[/]"]
        if event.get("verification_status"):
            parts.append(escape(str(event["verification_status"])))
        if event.get("attempts"):
            parts.append(f"{event['attempts']} attempt(s)")
        line = f"[bold]=  {step}[/] " + ", ".join(parts)
        if status != "completed" and event.get("diagnosis"):
            line += f" [dim]{escape(_one_line(str(event['diagnosis'])))}[/]"
        return line
    if kind == "step_disposition":
        what = _DISPOSITION_WORDS.get(
            str(event.get("disposition")), escape(str(event.get("disposition")))
        )
        return f"[dim]   {step}: {what}[/]"
    if kind == "replan":
        line = (
            f"[magenta]~  replan {event.get('round')}[/]: blocked {_ids(event.get('blocked'))}; "
            f"replaced {_ids(event.get('replaced'))}"
        )
        if event.get("added"):
            line += f"; added {_ids(event.get('added'))}"
        if event.get("error"):
            line += f" [red]unusable: {escape(_one_line(str(event['error'])))}[/]"
        return line
    return None


_DISPOSITION_WORDS = {
    "skip": "the run goes on without it",
    "block": "the steps after it are blocked",
    "halt": "the run halts",
    "replan": "a replan will redesign it",
}
_STATUS_COLOUR = {
    "completed": "green",
    "pending": "dim",
    "blocked": "yellow",
    "awaiting_review": "cyan",
    "cancelled": "yellow",
}


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _seconds(duration_s: float | None) -> str:
    return "-" if duration_s is None else f"{duration_s:.1f} s"


def _ids(ids: Any) -> str:
    return escape(", ".join(ids or []) or "none")


def print_event(event: dict[str, Any]) -> None:
    line = describe_event(event)
    if line is not None:
        console.print(line)
        with contextlib.suppress(AttributeError, OSError, ValueError):
            console.file.flush()  # live also when piped (CI logs, `| tee`)


def print_wide(renderable: Any) -> None:
    """Print a table; piped, at its natural width (rich would fold its cells at 80 columns)."""
    if console.is_terminal:
        console.print(renderable)
        return
    natural = Measurement.get(console, console.options.update_width(_PIPED_MAX_WIDTH), renderable)
    Console(file=console.file, width=max(console.width, natural.maximum), highlight=False).print(
        renderable
    )


def print_summary(report, *, scripted: bool = False) -> None:
    """The table of steps (not yet run and replaced ones included) and the run's outcome."""
    from veriloop.schemas.plan_run import StepResult

    table = Table(title=f"plan run {report.run_id}", title_justify="left")
    numeric = ("attempts", "checks", "time", "tokens", "cost")
    for name in ("step", "status", "verification", *numeric):
        table.add_column(
            name,
            justify="right" if name in numeric else "left",
            overflow="fold",
            min_width=len(name),
        )
    unscheduled = [
        StepResult(step_id=step.id, status="pending")
        for step in (report.manifest.steps if report.manifest else [])
        if step.id not in report.steps
    ]
    rows = [(r, False) for r in [*report.steps.values(), *unscheduled]]
    rows += [(r, True) for r in report.superseded]
    for result, superseded in rows:
        usage = total_usage(result.usage)
        checks = result.attempts[-1].checks if result.attempts else []
        colour = _STATUS_COLOUR.get(result.status, "red")
        cost = 0.0 if scripted else usage.cost_usd
        table.add_row(
            escape(result.step_id) + (" [dim](replaced)[/]" if superseded else ""),
            f"[{colour}]{escape(result.status)}[/]",
            escape(result.verification_status or "-"),
            str(len(result.attempts)),
            f"{sum(c.passed for c in checks)}/{len(checks)}",
            _seconds(result.duration_s),
            str(usage.input_tokens + usage.output_tokens),
            f"${cost:.4f}",
        )
    print_wide(table)
    total = total_usage(report.usage)
    cost = 0.0 if scripted else total.cost_usd
    colour = "green" if report.status == "completed" else "red"
    console.print(
        f"[{colour}]{escape(report.status)}[/]: {len(report.steps) + len(unscheduled)} steps, "
        f"{len(report.replan_history)} replan(s), {total.input_tokens + total.output_tokens} tokens "
        f"in {total.calls} model calls, ${cost:.4f}"
        + (f", {_seconds(report.duration_s)}" if report.duration_s is not None else "")
        + (" (scripted model)" if scripted else "")
    )
    if report.status == "rejected" and report.critique is not None:
        console.print(
            f"[red]the critic rejected the plan[/] (score {report.critique.score}/10): {escape(report.critique.summary)}"
        )
        for finding in report.critique.findings:
            console.print(
                f"  [{'red' if finding.severity == 'critical' else 'yellow'}]{escape(finding.severity)}[/] {escape(finding.rule)}: {escape(finding.message)}"
            )
        for rec in report.critique.recommendations:
            console.print(f"  [dim]recommendation: {escape(rec)}[/]")
    elif report.status == "rejected" and report.halt_reason:
        console.print(f"[red]{escape(report.halt_reason)}[/]")
    elif report.status == "failed":
        if report.halt_reason:
            console.print(f"[red]halted:[/] {escape(report.halt_reason)}")
        for result in report.steps.values():
            if result.status != "completed" and result.diagnosis:
                console.print(
                    f"  {escape(result.step_id)}: {escape(_one_line(result.diagnosis, 300))}"
                )


def exit_code_of(report) -> int:
    if report.status == "completed":
        return EXIT_OK
    if report.status == "awaiting_review":
        return EXIT_AWAITING_REVIEW
    return EXIT_FAILED


# -- human reviews ----------------------------------------------------------------------------------


def ask_reviews(pending, *, approve_all: bool) -> dict[str, dict[str, Any]] | None:
    """Decisions for pending reviews: all approved with ``--approve-all``, asked on a TTY, else None."""
    if approve_all:
        decisions = {}
        for review in pending:
            console.print(f"[cyan]review[/] {escape(review.step_id)}: approved (--approve-all)")
            decisions[review.step_id] = {"approved": True, "comment": "approved with --approve-all"}
        return decisions
    if not _interactive():
        return None
    decisions = {}
    for review in pending:
        console.print(f"\n[bold cyan]Review {escape(review.step_id)}[/]")
        console.print(escape(review.question))
        commands = review.context.get("commands")
        if commands:
            for command in commands:
                console.print(f"  [yellow]$ {escape(str(command))}[/]")
        approved = typer.confirm("Approve?", default=False)
        comment = typer.prompt("Comment (optional)", default="", show_default=False)
        decisions[review.step_id] = {"approved": approved, "comment": comment}
    return decisions


def _interactive() -> bool:
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def print_pending(report, db: Path) -> None:
    from veriloop.engines.plan.planning import DEPENDENCY_RESULTS

    console.print(f"\n[cyan]The run waits for {len(report.pending_reviews)} human review(s):[/]")
    for review in report.pending_reviews:
        question = review.question.split(f"\n\n{DEPENDENCY_RESULTS}", 1)[0]
        console.print(f"  {escape(review.step_id)}: {escape(_one_line(question, 300))}")
        for command in review.context.get("commands") or []:
            console.print(f"    [yellow]$ {escape(str(command))}[/]")
    console.print("Answer them on a terminal, or approve them all with:")
    console.print(
        f"  veriloop plan resume {escape(report.run_id)} --db {escape(str(db))} --approve-all",
        soft_wrap=True,
    )


# -- running ----------------------------------------------------------------------------------------


@asynccontextmanager
async def _runner(db: Path, settings: RunSettings, tools: Any):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from veriloop.plans import PlanRunner

    db.parent.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
        yield PlanRunner(checkpointer=saver, context=settings.context(), tools=tools)


async def _drive(runner, report, *, db: Path, settings: RunSettings, approve_all: bool):
    """Answer reviews until the run is no longer waiting (or nobody can answer)."""
    while report.status == "awaiting_review" and report.pending_reviews:
        decisions = ask_reviews(report.pending_reviews, approve_all=approve_all)
        if decisions is None:
            return report
        report = await runner.aresume(
            report.run_id, decisions, concurrency=settings.concurrency, on_event=print_event
        )
    return report


def _finish(report, *, db: Path, settings: RunSettings, report_dir: Path | None) -> int:
    print_summary(report, scripted=settings.scripted)
    if report_dir is not None:
        from veriloop.runners.plan.report import write_plan_report

        path = write_plan_report(
            report,
            report_dir,
            model=settings.model or _default_model(),
            endpoint=settings.endpoint,
            scripted=settings.scripted,
        )
        console.print(f"report: {escape(str(path))}")
    if report.status == "awaiting_review":
        print_pending(report, db)
    return exit_code_of(report)


def _default_model() -> str:
    from veriloop.context import PlanContext

    return PlanContext().model


def _fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    console.print(f"[red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code)


_DISPOSITION_HELP = {"halt": "halt the run", "skip": "go on without it", "replan": "replan"}


def _policy_help() -> str:
    """The on_failure x critical matrix for ``plan run --help``, read off the policy engine."""
    from veriloop.engines.plan.policy import policy_matrix
    from veriloop.schemas.manifest import DEPRECATED_ON_FAILURE

    lines = [
        "What the run does when a step fails (on_failure x critical); the step's status still "
        "says it failed, and its disposition says what the run did:"
    ]
    for policy, critical, other, critical_spent, other_spent in policy_matrix():

        def cell(now: str, spent: str) -> str:
            words = _DISPOSITION_HELP[now]
            return words if now == spent else f"{words}, then {_DISPOSITION_HELP[spent]}"

        name = f"{policy} (default)" if policy == "halt_if_critical" else policy
        lines.append(
            f"  {name}: critical: {cell(critical, critical_spent)}; "
            f"not critical: {cell(other, other_spent)}"
        )
    lines.append("  retry also retries after the step reports a blocker ([FAIL]: notes).")
    old = ", ".join(f"{was} = {now}" for was, now in DEPRECATED_ON_FAILURE.items())
    lines.append(f"Deprecated spellings: {old}.")
    return "\n\n".join(lines)


@plan_app.command("run", epilog=_policy_help())
def run_command(
    file: Annotated[
        Path | None,
        typer.Argument(help="The manifest (YAML or JSON). Omit it to plan from --goal."),
    ] = None,
    goal: Annotated[
        str | None,
        typer.Option(
            "--goal", help="What the plan is for; alone, the meta-planner writes the plan."
        ),
    ] = None,
    tools: Annotated[
        str | None,
        typer.Option(
            "--tools",
            help="Tools and python-step callables: module:attr or path/to/file.py:attr (a list or dict).",
        ),
    ] = None,
    workspace: Annotated[
        Path,
        typer.Option(
            "--workspace",
            help="Directory steps work in (file tools cannot leave it).",
            file_okay=False,
        ),
    ] = Path("."),
    report: ReportDir = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Steps of one level run at once, at most.")
    ] = 4,
    max_steps: Annotated[
        int | None,
        typer.Option(
            "--max-steps",
            min=1,
            help="Refuse a manifest with more steps, nested plans' included (default: no limit).",
        ),
    ] = None,
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            help="Model for every purpose (NAME) or one (PURPOSE=NAME, e.g. critic=o4-mini); "
            "repeatable (default: VERILOOP_MODEL or gpt-4.1-mini).",
        ),
    ] = None,
    reasoning_effort: Annotated[
        list[str] | None,
        typer.Option(
            "--reasoning-effort",
            help="LEVEL or PURPOSE=LEVEL; repeatable. Sent only to models that accept it.",
        ),
    ] = None,
    db: Db = DEFAULT_DB,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Id of the run (default: a new one).")
    ] = None,
    approve_all: ApproveAll = False,
    review: Annotated[
        bool,
        typer.Option(
            "--review/--no-review", help="Model review of critical steps' output (needs a model)."
        ),
    ] = True,
    sandbox: Annotated[
        SandboxMode,
        typer.Option(
            "--sandbox",
            help="auto: run shell steps, command checks and tests in bubblewrap when it works here; "
            "required: in bubblewrap or not at all; off: never (a manifest can only make it stricter).",
        ),
    ] = "auto",
    pass_env: Annotated[
        list[str] | None,
        typer.Option(
            "--pass-env",
            metavar="NAME",
            help="Pass this environment variable to steps' processes (repeatable); they get only "
            "PATH, LANG, LC_*, TZ, TERM, HOME=workspace and TMPDIR otherwise.",
        ),
    ] = None,
) -> None:
    """Run a manifest (or a plan written from --goal); exit 0 only when every step's checks passed."""
    from veriloop.context import cli_settings
    from veriloop.engines.plan.confinement.sandbox import Confinement, bwrap_problem, missing_layers
    from veriloop.engines.plan.manifest import ManifestError, ManifestLimits, load_manifest
    from veriloop.llm import LLMUnavailable
    from veriloop.nodes.plan.support import tool_registry

    try:
        if file is None and not goal:
            raise UsageError("give a manifest FILE, or --goal to let the planner write one")
        if not workspace.is_dir():
            raise UsageError(f"--workspace {workspace}: no such directory")
        _check_db_place(db, workspace)
        tool_objects = load_tools_spec(tools)
        models = cli_settings(model or (), reasoning_effort or ())
        settings = RunSettings(
            workspace=str(workspace.resolve()),
            tools=_absolute_tools_spec(tools),
            **models,
            review=review,
            concurrency=concurrency,
            report=str(report.resolve()) if report else None,
            endpoint=_endpoint() if model_configured() else None,
            sandbox=sandbox,
            pass_env=list(pass_env or ()),
        )
        try:
            context = settings.context()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        names = sorted(tool_registry(_with_tools(context, tool_objects)))
        if file is not None:
            if not file.is_file():
                raise UsageError(f"no such manifest file: {file}")
            try:
                manifest = load_manifest(
                    file,
                    origin="user",
                    tools=names,
                    max_depth=context.max_depth,
                    limits=ManifestLimits(max_steps=max_steps),
                )
            except ManifestError as exc:
                hint = ""
                if any(p.rule == "unknown_tool" for p in exc.problems) and not tools:
                    hint = (
                        "\nhint: python steps' functions and agents' tools come from "
                        "--tools module:attr or --tools path/to/file.py:attr"
                    )
                raise UsageError(f"{file}: {exc}{hint}") from None
            reason = why_model_needed(manifest, review=review)
        else:
            reason = "the planner writes the plan from --goal"
        if reason and not model_configured():
            raise UsageError(
                f"no model configured, and this plan needs one: {reason}. Set OPENAI_API_KEY "
                "(OpenAI) or OPENAI_BASE_URL (an OpenAI-compatible server)."
            )
    except UsageError as exc:
        raise _fail(str(exc)) from None

    run_id = run_id or f"plan-{uuid.uuid4().hex[:10]}"
    if reason:
        console.print(f"model: {escape(context.model)} via {escape(_endpoint())}")
    console.print(
        f"run [bold]{escape(run_id)}[/] in {escape(settings.workspace)} (db {escape(str(db))})"
    )
    if sandbox != "off" and (why := bwrap_problem()):
        consequence = (
            "steps that start processes fail" if sandbox == "required" else "they run unsandboxed"
        )
        console.print(f"[yellow]sandbox {sandbox}: {escape(why)}; {consequence}[/]")
    elif sandbox != "off":
        for layer, why in missing_layers(Confinement(sandbox=sandbox)).items():
            consequence = (
                "steps that start processes fail"
                if sandbox == "required"
                else "they run without it"
            )
            console.print(
                f"[yellow]sandbox {sandbox}: {escape(why)} (no {layer} layer); {consequence}[/]"
            )

    async def go() -> int:
        async with _runner(db, settings, tool_objects) as runner:
            try:
                await runner.areport(run_id)
            except LookupError:
                pass
            else:
                raise UsageError(
                    f"plan run {run_id!r} exists already in {db}: use `veriloop plan resume {run_id}`"
                )
            save_settings(db, run_id, settings)
            source: Any = file if file is not None else goal
            result = await runner.arun(
                source,
                goal=goal if file is not None else None,
                run_id=run_id,
                concurrency=concurrency,
                on_event=print_event,
            )
            result = await _drive(runner, result, db=db, settings=settings, approve_all=approve_all)
        return _finish(result, db=db, settings=settings, report_dir=report)

    try:
        code = asyncio.run(go())
    except UsageError as exc:
        raise _fail(str(exc)) from None
    except LLMUnavailable as exc:
        raise _fail(
            f"the model provider is unavailable: {exc}. The run is saved; continue it with "
            f"`veriloop plan resume {run_id} --db {db}`",
            EXIT_FAILED,
        ) from None
    raise typer.Exit(code)


def _with_tools(context, tools: Any):
    import dataclasses

    return dataclasses.replace(context, tools=tools) if tools is not None else context


def _absolute_tools_spec(spec: str | None) -> str | None:
    """A file path in ``--tools`` made absolute, so ``resume`` finds it from anywhere."""
    if not spec:
        return None
    target, _, attr = spec.rpartition(":")
    if target.endswith(".py") or "/" in target or os.sep in target:
        return f"{Path(target).resolve()}:{attr}"
    return spec


@plan_app.command("resume")
def resume_command(
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    db: Db = DEFAULT_DB,
    approve_all: ApproveAll = False,
    report: ReportDir = None,
) -> None:
    """Continue a run: answer its pending human reviews, or pick it up after a crash."""
    from veriloop.llm import LLMUnavailable
    from veriloop.plans import NoPendingReviewError, UnknownRunError

    try:
        if not db.is_file():
            raise UsageError(f"no plan database at {db}")
        settings = load_settings(db, run_id) or RunSettings(workspace=str(Path.cwd()))
        tool_objects = load_tools_spec(settings.tools)
    except UsageError as exc:
        raise _fail(str(exc)) from None
    report_dir = report or (Path(settings.report) if settings.report else None)

    async def go() -> int:
        async with _runner(db, settings, tool_objects) as runner:
            try:
                current = await runner.areport(run_id)
            except UnknownRunError:
                raise UsageError(f"no plan run {run_id!r} in {db}") from None
            console.print(f"run [bold]{escape(run_id)}[/]: {escape(current.status)}")
            if current.status == "awaiting_review" and current.pending_reviews:
                current = await _drive(
                    runner, current, db=db, settings=settings, approve_all=approve_all
                )
            elif current.status in ("running", "awaiting_review"):
                console.print("continuing where it stopped")
                current = await runner.aresume(
                    run_id, concurrency=settings.concurrency, on_event=print_event
                )
                current = await _drive(
                    runner, current, db=db, settings=settings, approve_all=approve_all
                )
        return _finish(current, db=db, settings=settings, report_dir=report_dir)

    try:
        code = asyncio.run(go())
    except (UsageError, NoPendingReviewError) as exc:
        raise _fail(str(exc)) from None
    except LLMUnavailable as exc:
        raise _fail(
            f"the model provider is unavailable: {exc}; resume again later", EXIT_FAILED
        ) from None
    raise typer.Exit(code)


@plan_app.command("cancel")
def cancel_command(
    run_id: Annotated[str, typer.Argument(help="The run to cancel.")],
    db: Db = DEFAULT_DB,
    server: Annotated[
        str | None,
        typer.Option("--server", help="Cancel a run of this veriloop service (base URL)."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", envvar="VERILOOP_API_KEY", help="API key for --server."),
    ] = None,
) -> None:
    """Cancel a run: it and its unfinished steps end `cancelled` and it cannot be resumed. With
    --server the service stops the run wherever it executes; a local run is recorded cancelled
    in --db (stop a `plan run` still executing it with Ctrl+C first). Exit 0 when cancelled, 1
    when the run had already ended, 2 for an unknown run."""
    if server:
        status, message = _cancel_on_server(server, api_key, run_id)
    else:
        status, message = _cancel_local(db, run_id)
    if status != "cancelled":
        raise _fail(message, EXIT_FAILED if status else EXIT_USAGE)
    console.print(f"run [bold]{escape(run_id)}[/]: [yellow]cancelled[/]")


def _cancel_on_server(server: str, api_key: str | None, run_id: str) -> tuple[str | None, str]:
    """POST /api/plans/{runId}/cancel: the run's status afterwards (None: no such run) and why."""
    import httpx

    headers = {"X-API-Key": api_key} if api_key else {}
    url = f"{server.rstrip('/')}/api/plans/{quote(run_id, safe='')}/cancel"
    try:
        response = httpx.post(url, headers=headers, timeout=60)
    except httpx.HTTPError as exc:
        raise _fail(f"could not reach {server}: {exc}") from None
    body = response.json() if "json" in response.headers.get("content-type", "") else {}
    detail = str(body.get("detail") or body.get("message") or response.text[:300])
    if response.status_code == 200:
        return "cancelled", ""
    return (body.get("status") if response.status_code == 409 else None), detail


def _cancel_local(db: Path, run_id: str) -> tuple[str | None, str]:
    """Record a run of the local plan database cancelled: its status afterwards and why."""
    from veriloop.plans import UnknownRunError
    from veriloop.schemas.plan_run import ENDED_STATUSES

    if not db.is_file():
        return None, f"no plan database at {db}"
    settings = load_settings(db, run_id) or RunSettings(workspace=str(Path.cwd()))

    async def go() -> tuple[str | None, str]:
        async with _runner(db, settings, None) as runner:
            try:
                report = await runner.areport(run_id)
            except UnknownRunError:
                return None, f"no plan run {run_id!r} in {db}"
            if report.status in ENDED_STATUSES and report.status != "cancelled":
                return report.status, f"plan run {run_id} is already {report.status}"
            if report.status != "cancelled":
                await runner.acancel(run_id, "cancelled (veriloop plan cancel)")
            return "cancelled", ""

    return asyncio.run(go())


@plan_app.command("report")
def report_command(
    run_id: Annotated[str, typer.Argument(help="The stored run.")],
    db: Db = DEFAULT_DB,
    out: Annotated[
        Path,
        typer.Option("--out", help="Directory for report.html and report.json.", file_okay=False),
    ] = Path("."),
) -> None:
    """Write the report of a stored run (any status) again."""
    from veriloop.plans import UnknownRunError
    from veriloop.runners.plan.report import write_plan_report

    if not db.is_file():
        raise _fail(f"no plan database at {db}")
    settings = load_settings(db, run_id) or RunSettings(workspace=str(Path.cwd()))

    async def go():
        async with _runner(db, settings, None) as runner:
            return await runner.areport(run_id)

    try:
        stored = asyncio.run(go())
    except UnknownRunError:
        raise _fail(f"no plan run {run_id!r} in {db}") from None
    path = write_plan_report(
        stored,
        out,
        model=settings.model or _default_model(),
        endpoint=settings.endpoint,
        scripted=settings.scripted,
    )
    console.print(f"{escape(stored.status)}: report {escape(str(path))}")


@plan_app.command("show")
def show_command(
    run_id: Annotated[str, typer.Argument(help="The stored run (live or finished).")],
    db: Db = DEFAULT_DB,
    depth: Annotated[
        int | None,
        typer.Option("--depth", min=1, help="Nesting levels shown (1: the run's own steps)."),
    ] = None,
    flat: Annotated[
        bool, typer.Option("--flat", help="One flat list, nested steps named parent/child.")
    ] = False,
) -> None:
    """The run's steps from its checkpoint, nested plans indented under their step with each
    parent's aggregate (done/total, failed, cost); works while the run is live or after."""
    from veriloop.engines.plan.hierarchy import aggregate, plan_tree
    from veriloop.plans import UnknownRunError

    if depth is not None and flat:
        raise _fail("--depth and --flat do not go together: --flat lists every level")
    if not db.is_file():
        raise _fail(f"no plan database at {db}")
    settings = load_settings(db, run_id) or RunSettings(workspace=str(Path.cwd()))

    async def go():
        async with _runner(db, settings, None) as runner:
            report = await runner.areport(run_id)
            return report, await live_child_reports(runner, run_id)

    try:
        report, live = asyncio.run(go())
    except UnknownRunError:
        raise _fail(f"no plan run {run_id!r} in {db}") from None
    rows = plan_tree(report, live=live, max_depth=depth)
    whole = aggregate(report)
    table = Table(title=f"plan run {report.run_id}", title_justify="left")
    for name in ("step", "status", "done", "failed", "attempts", "cost", "time"):
        table.add_column(name, justify="left" if name in ("step", "status") else "right")
    for row in rows:
        result, children = row.result, row.children
        colour = _STATUS_COLOUR.get(result.status, "red")
        name = row.path if flat else "  " * row.depth + result.step_id
        cost = children.cost_usd if children else total_usage(result.usage).cost_usd
        table.add_row(
            escape(name),
            f"[{colour}]{escape(result.status)}[/]",
            f"{children.done}/{children.total}" if children else "",
            str(children.failed) if children else "",
            str(len(result.attempts)) if result.attempts else "",
            _money(0.0 if settings.scripted else cost),
            _seconds(result.duration_s),
        )
    print_wide(table)
    colour = "green" if report.status == "completed" else "red"
    console.print(
        f"[{colour}]{escape(report.status)}[/]: {whole.done}/{whole.total} steps done, "
        f"{whole.failed} failed, {_money(0.0 if settings.scripted else whole.cost_usd)}"
        + (f", {_seconds(report.duration_s)}" if report.duration_s is not None else "")
    )


async def live_child_reports(runner, run_id: str) -> dict[str, Any]:
    """Reports of the nested plans still running (or paused) in a run, by child run id.

    A plan step runs its child plan inside its ``subplan`` node, so the child's state lives under
    that node's checkpoint namespace, not in the parent's snapshot."""
    from veriloop.graph.plan_io import state_to_report
    from veriloop.plans import pending_reviews, steps_in_flight

    found: dict[str, Any] = {}

    async def visit(snapshot) -> None:
        for task in snapshot.tasks:
            step = task.state
            if task.name != "run_step" or step is None or isinstance(step, dict):
                continue
            for inner in step.tasks:
                if inner.name != "subplan":
                    continue
                namespace = f"{step.config['configurable']['checkpoint_ns']}|subplan:{inner.id}"
                config = {"configurable": {"thread_id": run_id, "checkpoint_ns": namespace}}
                child = await runner.graph.aget_state(config, subgraphs=True)
                if child.values.get("run_id"):
                    found[child.values["run_id"]] = state_to_report(
                        child.values,
                        pending_reviews=pending_reviews(child),
                        in_flight=steps_in_flight(child),
                    )
                    await visit(child)

    config = {"configurable": {"thread_id": run_id}}
    await visit(await runner.graph.aget_state(config, subgraphs=True))
    return found


def _money(cost_usd: float) -> str:
    return f"${cost_usd:.4f}"


@plan_app.command("demo")
def demo_command(
    report: Annotated[
        Path, typer.Option("--report", help="Directory for the report.", file_okay=False)
    ] = Path(".veriloop") / "plan-demo-report",
    keep: Annotated[
        Path | None,
        typer.Option(
            "--keep", help="Copy the project here (a new directory) and keep it.", file_okay=False
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Model name when a provider is configured.")
    ] = None,
) -> None:
    """Finish the bundled textbuffer project with a plan; the exit status is its test suite's."""
    from veriloop.runners.plan.demo import MANIFEST_PATH, arun_plan_demo

    if keep is not None and keep.exists() and any(keep.iterdir()):
        raise _fail(f"--keep {keep}: the directory exists and is not empty")
    if model_configured():
        console.print(f"Using the configured model provider ({escape(_endpoint())}).")
    else:
        console.print(
            "[yellow]No OPENAI_API_KEY or OPENAI_BASE_URL set: running the scripted playbook (a local "
            "OpenAI-compatible server with canned answers), not a real model.[/]"
        )
    console.print(f"plan: {escape(str(MANIFEST_PATH))}")

    def on_review(review, approved: bool, comment: str) -> None:
        verdict = "[green]approved[/]" if approved else "[red]rejected[/]"
        console.print(f"[cyan]review[/] {escape(review.step_id)}: {verdict} ({escape(comment)})")

    result = asyncio.run(
        arun_plan_demo(report, keep=keep, model=model, on_event=print_event, on_review=on_review)
    )
    console.print()
    print_summary(result.report, scripted=result.scripted)
    fixed = [
        r.step_id
        for r in result.report.steps.values()
        if r.status == "completed" and len(r.attempts) > 1
    ]
    for step_id in fixed:
        console.print(
            f"fixed by a corrective attempt: {escape(step_id)} ({len(result.report.steps[step_id].attempts)} attempts)"
        )
    for old in result.report.superseded:
        console.print(
            f"not allowed to complete: {escape(old.step_id)} ({escape(old.verification_status or old.status)}, "
            f"{escape(_one_line(old.diagnosis))}), replaced by a replan"
        )
    colour = "green" if result.suite_exit_code == 0 else "red"
    console.print(
        f"the project's own test suite (pytest in the workspace copy): [{colour}]{escape(result.suite_summary)}[/] "
        f"-> exit {result.suite_exit_code}"
    )
    if result.kept:
        console.print(f"workspace kept: {escape(str(result.workspace))}")
    if result.html_report is not None:
        console.print(f"report: {escape(str(result.html_report.resolve()))}")
    raise typer.Exit(result.exit_code)
