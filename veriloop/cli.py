"""The ``veriloop`` command: run a goal in Chromium, serve the API, or run the demo.

veriloop run "Add a patient named Jas" --url http://127.0.0.1:8080/   # report in veriloop-runs/
veriloop serve --port 8000                                              # tasks in the data directory
veriloop demo
"""

from __future__ import annotations

import os
import re
import threading
import time
from contextlib import contextmanager
from functools import reduce
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from veriloop.engines.targets import shorten
from veriloop.plan_cli import plan_app
from veriloop.runners.miniwob.cli import eval_app
from veriloop.schemas.manifest import PlanShell

app = typer.Typer(
    help="veriloop: a browser agent that verifies every action against what actually happened.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(eval_app, name="eval")
app.add_typer(plan_app, name="plan")
extension_app = typer.Typer(
    help="The Chrome extension: the agent in your own browser, with a side panel.",
    no_args_is_help=True,
)
app.add_typer(extension_app, name="extension")
# soft_wrap: a long line stays one line when piped (rich would hard-wrap it at 80 columns).
console = Console(soft_wrap=True)
_ROUTINE_OBSERVATIONS = ("URL did not change", "The browser client reported no URL change")
_OBSERVATION_CHARS = 90
RUNS_DIR = Path("veriloop-runs")
"""Where ``veriloop run`` writes each run's report folder unless ``--report`` names one."""
DATA_DIR_ENV = "VERILOOP_DATA_DIR"

Chromium = Annotated[
    str | None,
    typer.Option(
        "--chromium",
        envvar="VERILOOP_CHROMIUM",
        help="Chromium executable (default /usr/bin/chromium).",
    ),
]
Headed = Annotated[bool, typer.Option("--headed", help="Show the browser window.")]
Models = Annotated[
    list[str] | None,
    typer.Option(
        "--model",
        help="Model for every purpose (NAME), or for one (PURPOSE=NAME, e.g. verification=o4-mini); "
        "repeatable. Default: Context / VERILOOP_MODEL.",
    ),
]
Efforts = Annotated[
    list[str] | None,
    typer.Option(
        "--reasoning-effort",
        help="Reasoning effort (LEVEL or PURPOSE=LEVEL: none, minimal, low, medium, high, xhigh, max); "
        "repeatable. Sent only to models that accept it.",
    ),
]
Groundings = Annotated[
    list[str] | None,
    typer.Option(
        "--grounding",
        help="Let verification look facts up: openai (the provider's web search) or tavily "
        "(TAVILY_API_KEY). Off by default.",
    ),
]
Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Model name for the OpenAI-compatible endpoint (default: Context / VERILOOP_MODEL).",
    ),
]


@app.callback()
def _options(
    structured_output: Annotated[
        str | None,
        typer.Option(
            "--structured-output",
            help="Structured-output dialect of the model server for every command: json_schema, "
            "json_object_schema, json_object, tool_call or auto (default: VERILOOP_STRUCTURED_OUTPUT, "
            "else detected).",
        ),
    ] = None,
) -> None:
    if structured_output is not None:
        from veriloop.llm.dialects import parse_dialect

        try:
            parse_dialect(structured_output)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--structured-output") from exc
        # Context reads VERILOOP_<FIELD>: every command's model calls (and any service it starts) see it.
        os.environ["VERILOOP_STRUCTURED_OUTPUT"] = structured_output


def describe_step(step) -> str:
    """One line per step: verdict on the previous action, what was seen, the action, tokens, times."""
    parts = [f"[bold]step {step.index + 1:>2}[/]"]
    verdict = step.verification
    if verdict is None:
        parts.append("[dim]first look[/]")
    else:
        mark = "[green]prev ok[/]" if verdict.get("success") else "[red]prev failed[/]"
        how = "" if "verification" in step.usage else " [yellow](no model call)[/]"
        parts.append(f"{mark} {verdict.get('confidence', 0):.2f}{how}")
        observations = verdict.get("observations") or []
        # The first line that says what changed ("URL did not change" leads almost every list).
        telling = [
            line for line in observations if not line.startswith(_ROUTINE_OBSERVATIONS)
        ] or observations
        if telling:
            more = f" (+{len(observations) - 1} more)" if len(observations) > 1 else ""
            parts.append(f"[dim]{escape(shorten(telling[0], _OBSERVATION_CHARS))}{more}[/]")
    parts.append(f"-> [cyan]{escape(step.described_action)}[/]")
    if step.execution_ok is False:
        parts.append(f"[red]not executed: {escape(step.execution_error or '')}[/]")
    model_calls = sum(u.get("calls", 0) for u in step.usage.values())
    parts.append(f"[magenta]{step.tokens} tok / {model_calls} calls[/]")
    timings = step.timings
    parts.append(
        f"[dim]snapshot {timings.snapshot_ms:.0f} ms (wait {timings.stability_wait_ms:.0f}), agent {timings.agent_ms:.0f} ms[/]"
    )
    return "  ".join(parts)


@contextmanager
def live_progress(total: int):
    """A live progress line; yields callbacks (on_step, on_phase, new_task)."""
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    current = {"task": None}

    def new_task(title: str) -> None:
        if current["task"] is not None:
            progress.remove_task(current["task"])
        progress.console.print(f"\n[bold]{escape(title)}[/]")
        current["task"] = progress.add_task("starting", total=total)

    def on_phase(text: str) -> None:
        progress.update(current["task"], description=escape(text))

    def on_step(step) -> None:
        progress.console.print(describe_step(step))
        progress.update(current["task"], completed=step.index + 1)

    with progress:
        yield on_step, on_phase, new_task


def usage_table(usage: dict[str, dict]) -> Table:
    """Calls, tokens and cost per purpose and model."""
    from veriloop.schemas.usage import usage_by_purpose_and_model

    table = Table("purpose", "model", "calls", "input tokens", "output tokens", "cost USD")
    for purpose, name, spent in usage_by_purpose_and_model(usage):
        table.add_row(
            purpose,
            escape(name),
            str(spent.calls),
            str(spent.input_tokens),
            str(spent.output_tokens),
            f"{spent.cost_usd:.6f}",
        )
    return table


def run_folder(goal: str, now: float | None = None) -> Path:
    """``veriloop-runs/<UTC time>-<goal slug>``: a new folder name per run."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    slug = re.sub(r"[^a-z0-9]+", "-", goal.lower()).strip("-")[:40].rstrip("-") or "run"
    return RUNS_DIR / f"{stamp}-{slug}"


def default_data_dir() -> Path:
    """``$VERILOOP_DATA_DIR``, else ``$XDG_DATA_HOME/veriloop`` (``~/.local/share/veriloop``)."""
    if os.environ.get(DATA_DIR_ENV):
        return Path(os.environ[DATA_DIR_ENV])
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "veriloop"


def _report_run(result, report_dir: Path, model) -> None:
    from veriloop.runners.browser.report import write_report
    from veriloop.schemas.usage import total_usage

    usage = total_usage(result.usage)
    colour = "green" if result.completed else "red"
    console.print(
        f"[{colour}]{result.status}[/] after {len(result.steps)} steps, "
        f"{usage.input_tokens + usage.output_tokens} tokens in {usage.calls} model calls"
    )
    if result.error:
        console.print(f"[red]{escape(result.error)}[/]")
    console.print(usage_table(result.usage))
    path = write_report([result], report_dir, model=model, title=f"veriloop run: {result.goal}")
    console.print(f"report: {path.resolve()}")


@app.command()
def run(
    goal: Annotated[str, typer.Argument(help="What to achieve, in your words.")],
    url: Annotated[str, typer.Option("--url", help="The page to start on.")],
    model: Models = None,
    reasoning_effort: Efforts = None,
    grounding: Groundings = None,
    headed: Headed = False,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Folder for report.json / report.html (default: a new folder under veriloop-runs/).",
        ),
    ] = None,
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            help="Use a running veriloop service (base URL) instead of the in-process agent.",
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", envvar="VERILOOP_API_KEY", help="API key for --server."),
    ] = None,
    max_steps: Annotated[
        int, typer.Option("--max-steps", min=1, help="Agent steps before giving up.")
    ] = 40,
    screenshots: Annotated[
        bool,
        typer.Option(
            "--screenshots/--no-screenshots", help="Screenshot every step for the report."
        ),
    ] = True,
    chromium: Chromium = None,
) -> None:
    """Run GOAL in Chromium starting at --url; exit 0 only if the task completed."""
    from veriloop.llm.endpoint import ModelEndpoint, describe_model, model_configured
    from veriloop.runners.browser.agents import HttpAgent, InProcessAgent
    from veriloop.runners.browser.client import ChromiumBrowser, ChromiumNotFound
    from veriloop.runners.browser.loop import run_task

    if server:
        if model or reasoning_effort or grounding:
            console.print(
                "[yellow]--model, --reasoning-effort and --grounding are ignored with --server: "
                "the service chooses its models[/]"
            )
        agent = HttpAgent(server, api_key=api_key)
        endpoint = ModelEndpoint(model="(the service's)", endpoint="service", base_url=server)
    else:
        if not model_configured():
            console.print(
                "[red]No model provider: set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL "
                "(an OpenAI-compatible server), or use --server.[/]"
            )
            raise typer.Exit(2)
        from veriloop.context import Context, cli_settings

        try:
            context = Context(**cli_settings(model or (), reasoning_effort or (), grounding or ()))
        except ValueError as exc:
            console.print(f"[red]{escape(str(exc))}[/]")
            raise typer.Exit(2) from exc
        agent = InProcessAgent(context=context)
        endpoint = describe_model(context)
    console.print(endpoint.label)
    try:
        with (
            ChromiumBrowser(executable_path=chromium, headless=not headed) as browser,
            live_progress(max_steps) as (
                on_step,
                on_phase,
                new_task,
            ),
        ):
            new_task(goal)
            session = browser.new_session()
            result = run_task(
                goal,
                url,
                session=session,
                agent=agent,
                max_steps=max_steps,
                screenshots=screenshots,
                on_step=on_step,
                on_phase=on_phase,
            )
            session.close()
    except ChromiumNotFound as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2) from exc
    _report_run(result, report or run_folder(goal), endpoint)
    raise typer.Exit(0 if result.completed else 1)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    workers: Annotated[
        int,
        typer.Option(
            min=1, help="Serving processes on one port (SQLite: on this host; see docs/service.md)."
        ),
    ] = 1,
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url",
            help="sqlite:///path or postgresql://... (default VERILOOP_DATABASE_URL, else "
            "veriloop.sqlite in the data directory).",
        ),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            envvar=DATA_DIR_ENV,
            help="The service's own folder, made 0700: the default SQLite database, plan runs' "
            "folders and snapshots (workspace/, unless VERILOOP_WORKSPACE is set) and temporary "
            "files (tmp/, TMPDIR). Default $XDG_DATA_HOME/veriloop, i.e. ~/.local/share/veriloop.",
        ),
    ] = None,
    plan_shell: Annotated[
        PlanShell | None,
        typer.Option(
            "--plan-shell",
            envvar="VERILOOP_PLAN_SHELL",
            help="Whether plans posted over HTTP may run shell steps, command checks and tests: "
            "off (default: such a manifest is a 422), sandboxed (every confinement layer: its own "
            "uid, no capabilities, seccomp, no network, only the system folders, the interpreter "
            "and its workspace in sight, limits; see docs/plans.md) or host: for a trusted single "
            "user only. host applies only the limits and a scrubbed environment and leaves open "
            "everything the service's user can do: read and write its files (the data directory, "
            "key files, other runs' folders), the network and local sockets (the database), its "
            "other processes, its privileges (root stays root: no step user, capabilities or "
            "seccomp filter) (docs/service.md, Security).",
        ),
    ] = None,
    sandbox_ro: Annotated[
        list[Path] | None,
        typer.Option(
            "--sandbox-ro",
            help="A path sandboxed steps may read besides the system folders, the interpreter "
            "and their workspace (repeatable; default VERILOOP_SANDBOX_RO, ':'-separated).",
        ),
    ] = None,
    step_uid: Annotated[
        int | None,
        typer.Option(min=1, help="The uid step processes run as when serving as root (61000)."),
    ] = None,
    step_gid: Annotated[
        int | None,
        typer.Option(min=1, help="The gid step processes run as when serving as root (61000)."),
    ] = None,
    limit_memory_mb: Annotated[
        int | None,
        typer.Option(min=1, help="Address space of each step process, MiB (1024)."),
    ] = None,
    limit_processes: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Processes of the step uid, counted host-wide: steps running at once share "
            "them (256).",
        ),
    ] = None,
    limit_cpu_s: Annotated[
        int | None, typer.Option(min=1, help="CPU seconds of each step process (600).")
    ] = None,
    limit_file_mb: Annotated[
        int | None, typer.Option(min=1, help="Largest file a step may write, MiB (1024).")
    ] = None,
    limit_open_files: Annotated[
        int | None, typer.Option(min=1, help="Open files of each step process (1024).")
    ] = None,
    limit_disk_mb: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="What a step's workspace may hold, MiB; past it the step is stopped (2048).",
        ),
    ] = None,
    max_timeout_s: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="The longest timeout_s a manifest may ask for a step; more is a 422 (3600; "
            "0: no maximum).",
        ),
    ] = None,
    keep_workspaces: Annotated[
        bool,
        typer.Option(
            "--keep-workspaces",
            envvar="VERILOOP_KEEP_WORKSPACES",
            help="Keep a finished plan run's folder and snapshots (default: removed when it "
            "finishes; a run waiting for a review keeps them).",
        ),
    ] = False,
    snapshot_run_bytes: Annotated[
        int | None,
        typer.Option(
            "--snapshot-run-bytes",
            min=1,
            help="Most bytes of pre-step copies one plan run may store (default "
            "VERILOOP_SNAPSHOT_RUN_BYTES, else 1 GiB); past it the step fails.",
        ),
    ] = None,
    snapshot_total_bytes: Annotated[
        int | None,
        typer.Option(
            "--snapshot-total-bytes",
            min=1,
            help="Most bytes of pre-step copies all plan runs together may store (default "
            "VERILOOP_SNAPSHOT_TOTAL_BYTES, else 8 GiB); past it the step fails.",
        ),
    ] = None,
    max_manifest_steps: Annotated[
        int | None,
        typer.Option(
            "--max-manifest-steps",
            min=1,
            help="Steps a plan manifest sent over HTTP may have, nested plans' included "
            "(default VERILOOP_MAX_MANIFEST_STEPS, else 500); more answers 413.",
        ),
    ] = None,
    scripted: Annotated[
        bool,
        typer.Option(
            "--scripted",
            help="Answer with the scripted demo model (canned answers from a local playbook for "
            "the demo app's tasks, not a real model; cost $0): a first run with no model key.",
        ),
    ] = False,
) -> None:
    """Serve the interact API (POST /api/agent/interact) and the task API."""
    from veriloop.server.data_dir import use_data_dir
    from veriloop.server.main import serve as serve_api

    if scripted:
        _serve_scripted_model()

    # Workers read their settings from the environment.
    options = {
        "VERILOOP_PLAN_SHELL": plan_shell,
        "VERILOOP_MAX_MANIFEST_STEPS": max_manifest_steps,
        "VERILOOP_SANDBOX_RO": ":".join(str(path.resolve()) for path in sandbox_ro or ()) or None,
        "VERILOOP_STEP_UID": step_uid,
        "VERILOOP_STEP_GID": step_gid,
        "VERILOOP_LIMIT_MEMORY_MB": limit_memory_mb,
        "VERILOOP_LIMIT_PROCESSES": limit_processes,
        "VERILOOP_LIMIT_CPU_S": limit_cpu_s,
        "VERILOOP_LIMIT_FILE_MB": limit_file_mb,
        "VERILOOP_LIMIT_OPEN_FILES": limit_open_files,
        "VERILOOP_LIMIT_DISK_MB": limit_disk_mb,
        "VERILOOP_MAX_TIMEOUT_S": None if max_timeout_s is None else f"{max_timeout_s:g}",
        "VERILOOP_KEEP_WORKSPACES": "1" if keep_workspaces else None,
        "VERILOOP_SNAPSHOT_RUN_BYTES": snapshot_run_bytes,
        "VERILOOP_SNAPSHOT_TOTAL_BYTES": snapshot_total_bytes,
    }
    os.environ.update({name: str(value) for name, value in options.items() if value is not None})

    folder = use_data_dir(data_dir or default_data_dir())
    if not database_url and not os.environ.get("VERILOOP_DATABASE_URL"):
        database_url = f"sqlite:///{folder / 'veriloop.sqlite'}"
        console.print(f"tasks are stored in {escape(database_url)}")
    try:
        serve_api(host=host, port=port, workers=workers, database_url=database_url)
    except ValueError as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2) from exc


def _serve_scripted_model() -> None:
    """Start the demo playbook's scripted model on loopback (a thread of this process, which the
    workers reach over HTTP) and point the service at it through the environment."""
    from veriloop.llm.endpoint import SCRIPTED_MODEL
    from veriloop.llm.scripted import ScriptedModelServer
    from veriloop.runners.demo.playbook import DemoPlaybook

    model = DemoPlaybook().install(ScriptedModelServer()).start()
    os.environ.update(
        OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="scripted", VERILOOP_MODEL=SCRIPTED_MODEL
    )
    console.print(
        f"[yellow]scripted model on {escape(model.base_url)}: canned answers for the demo app's "
        "tasks (veriloop demo-app), not a real model; cost $0. Other goals get no useful answer.[/]"
    )


@app.command("demo-app")
def demo_app(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = 8100,
) -> None:
    """Serve the demo patient-records app alone (for the extension), until Ctrl+C."""
    from veriloop.runners.demo.server import DemoAppServer

    try:
        app_server = DemoAppServer(host, port).start()
    except OSError as exc:
        console.print(f"[red]cannot listen on {escape(host)}:{port}: {escape(str(exc))}[/]")
        raise typer.Exit(2) from exc
    console.print(
        f"demo app on {app_server.url} (Ctrl+C stops it); its data: {app_server.url}api/state"
    )
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        app_server.stop()


@app.command()
def demo(
    report: Annotated[Path, typer.Option("--report", help="Directory for the report.")] = Path(
        "veriloop-demo-report"
    ),
    model: Model = None,
    headed: Headed = False,
    chromium: Chromium = None,
) -> None:
    """Run three goals on the bundled patient-records app; exit 0 only if the app confirms each one."""
    from veriloop.llm.endpoint import model_configured
    from veriloop.runners.browser.client import ChromiumNotFound
    from veriloop.runners.demo.playbook import SCRIPTED_NOTES
    from veriloop.runners.demo.run import run_demo
    from veriloop.schemas.usage import add_usage

    scripted = not model_configured()
    if scripted:
        console.print(
            "[yellow]No OPENAI_API_KEY or OPENAI_BASE_URL set: running the scripted playbook "
            "(a local OpenAI-compatible server with canned answers), not a real model; cost $0.[/]"
        )
        if model:
            console.print("[yellow]--model is ignored: the scripted playbook answers.[/]")
    else:
        from veriloop.context import Context
        from veriloop.llm.endpoint import describe_model

        console.print(
            f"Using {escape(describe_model(Context(model=model) if model else Context()).label)}."
        )
    try:
        with live_progress(40) as (on_step, on_phase, new_task):

            def on_run(goal: str) -> None:
                new_task(goal)
                if scripted and goal in SCRIPTED_NOTES:
                    console.print(f"[yellow]{escape(SCRIPTED_NOTES[goal])}[/]")

            result = run_demo(
                report,
                headed=headed,
                model=model,
                chromium=chromium,
                on_run=on_run,
                on_step=on_step,
                on_phase=on_phase,
            )
    except ChromiumNotFound as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2) from exc
    console.print()
    for run_result, check in zip(result.runs, result.checks, strict=True):
        agent_says = f"agent: {run_result.status}"
        verdict = (
            "[green]confirmed by the app[/]" if check.passed else "[red]NOT confirmed by the app[/]"
        )
        console.print(f"{escape(check.goal)}: {verdict} ({escape(check.detail)}; {agent_says})")
    console.print(usage_table(reduce(add_usage, (run.usage for run in result.runs), {})))
    console.print(f"report: {result.report.resolve()}")
    raise typer.Exit(result.exit_code)


@extension_app.command("path")
def extension_path(
    folder: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            help="Where to write the unpacked extension (default: extension/ in the data directory).",
        ),
    ] = None,
) -> None:
    """Write the unpacked extension and print its folder (chrome://extensions > Load unpacked)."""
    from veriloop.extension_bundle import write_extension

    target = write_extension((folder or default_data_dir() / "extension").resolve())
    print(target)


@extension_app.command("pack")
def extension_pack(
    archive: Annotated[Path, typer.Argument(help="The zip archive to write, e.g. veriloop.zip.")],
) -> None:
    """Write the extension as a zip archive (for the Web Store or an enterprise policy)."""
    from veriloop.extension_bundle import pack_extension

    print(pack_extension(archive.resolve()))


if __name__ == "__main__":
    app()
