"""``veriloop eval miniwob``: the MiniWoB++ evaluation from the command line (a typer sub-app).

Mounted by the main CLI with ``app.add_typer(eval_app, name="eval")``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

eval_app = typer.Typer(
    help="Measure veriloop on benchmarks whose pages decide success.", no_args_is_help=True
)
console = Console()


@eval_app.callback()
def _group() -> None:
    """Measure veriloop on benchmarks whose pages decide success."""


def _parse_claims(values: list[str]) -> list[tuple[str, int]]:
    claims = []
    for value in values:
        task, sep, episode = value.rpartition(":")
        if not sep or not task or not episode.isdigit():
            raise typer.BadParameter(
                f"{value!r}: expected TASK:EPISODE, e.g. click-link:1", param_hint="--false-claim"
            )
        claims.append((task, int(episode)))
    return claims


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def print_summary(summary) -> None:
    """The headline figures and the confusion matrix as rich tables."""
    from veriloop.runners.miniwob.results import calls_per_action_line

    table = Table(title="MiniWoB++ evaluation", show_header=False)
    c = summary.confusion
    rows = [
        ("episodes", str(summary.episodes)),
        ("success rate", _rate(summary.success_rate)),
        (
            "false completions",
            f"{summary.false_completions} ({_rate(summary.false_completion_rate)} of claims)",
        ),
        (
            "missed completions",
            f"{summary.missed_completions} ({_rate(summary.missed_completion_rate)} of successes)",
        ),
        ("loop rate", _rate(summary.loop_rate)),
        (
            "no-change fast fails",
            f"{summary.no_change_fast_fails} in {summary.episodes_with_fast_fail} episodes",
        ),
        (
            "model calls / tokens",
            f"{summary.model_calls} / {summary.input_tokens + summary.output_tokens}",
        ),
        ("model calls per action", calls_per_action_line(summary)),
        ("cost (USD)", f"{summary.cost_usd:.4f}"),
        ("harness errors", str(summary.errors)),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    matrix = Table(title="agent claim x environment")
    matrix.add_column("")
    matrix.add_column("env success")
    matrix.add_column("env failure")
    matrix.add_row("said done", str(c["done"]["success"]), str(c["done"]["failure"]))
    matrix.add_row("did not say done", str(c["not_done"]["success"]), str(c["not_done"]["failure"]))
    console.print(matrix)


@eval_app.command("miniwob")
def miniwob(
    tasks: Annotated[
        str | None,
        typer.Option("--tasks", help="Comma-separated task names, e.g. click-button,enter-text."),
    ] = None,
    all_tasks: Annotated[
        bool, typer.Option("--all", help="Every task the miniwob package ships (130).")
    ] = False,
    episodes: Annotated[int, typer.Option("--episodes", min=1, help="Episodes per task.")] = 1,
    seed: Annotated[
        int, typer.Option("--seed", help="Base seed; each episode's page seed derives from it.")
    ] = 0,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Model name (with OPENAI_API_KEY / OPENAI_BASE_URL)."),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Directory for episodes.jsonl and the report.")
    ] = Path("miniwob-eval"),
    parallel: Annotated[
        int, typer.Option("--parallel", min=1, help="Episodes run at once (one Chromium each).")
    ] = 1,
    resume: Annotated[
        bool, typer.Option("--resume", help="Keep episodes already finished in --out.")
    ] = False,
    max_steps: Annotated[
        int, typer.Option("--max-steps", min=1, help="Agent turns per episode.")
    ] = 12,
    scripted: Annotated[
        bool | None,
        typer.Option(
            "--scripted/--no-scripted",
            help="Force the offline scripted model on or off (default: on when no provider is set).",
        ),
    ] = None,
    false_claim: Annotated[
        list[str] | None,
        typer.Option(
            "--false-claim",
            help="TASK:EPISODE where the scripted model claims completion falsely (repeatable).",
        ),
    ] = None,
    list_tasks: Annotated[
        bool, typer.Option("--list", help="List the task names and exit.")
    ] = False,
    chromium: Annotated[
        str | None,
        typer.Option("--chromium", envvar="VERILOOP_CHROMIUM", help="Chromium executable."),
    ] = None,
) -> None:
    """Run the agent on MiniWoB++ task pages; the pages' own rewards decide success."""
    from veriloop.llm.endpoint import model_configured
    from veriloop.runners.browser.client import ChromiumNotFound
    from veriloop.runners.miniwob.environment import (
        MiniWobMissing,
        available_tasks,
        miniwob_html_dir,
        resolve_tasks,
    )
    from veriloop.runners.miniwob.harness import EvalConfig, run_miniwob

    try:
        miniwob_html_dir()
    except MiniWobMissing as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2) from exc
    if list_tasks:
        console.print("\n".join(available_tasks()))
        raise typer.Exit(0)
    if bool(tasks) == all_tasks:
        raise typer.BadParameter("give either --tasks a,b,c or --all", param_hint="--tasks")
    try:
        names = resolve_tasks(
            None if all_tasks else [t.strip() for t in tasks.split(",") if t.strip()]
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--tasks") from exc
    claims = _parse_claims(false_claim or [])
    use_script = not model_configured() if scripted is None else scripted
    if use_script:
        console.print(
            "[yellow]No model provider in use: the scripted MiniWoB playbook answers (a loopback "
            "OpenAI-compatible server; it solves only simple click and typing tasks).[/]"
        )
    elif claims:
        raise typer.BadParameter(
            "--false-claim needs the scripted model", param_hint="--false-claim"
        )
    elif not model_configured():
        console.print(
            "[red]--no-scripted needs a model provider: set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL "
            "(an OpenAI-compatible server).[/]"
        )
        raise typer.Exit(2)
    config = EvalConfig(
        tasks=names,
        episodes=episodes,
        seed=seed,
        out_dir=out,
        parallel=parallel,
        resume=resume,
        max_steps=max_steps,
        chromium=chromium,
    )

    def on_record(record) -> None:
        verdict = "[green]success[/]" if record.success else "[red]failure[/]"
        claim = "said done" if record.claimed_done else f"agent {record.agent_status}"
        error = f" [red]{escape(record.error)}[/]" if record.error else ""
        console.print(
            f"{escape(record.task)} #{record.episode}: {verdict} (reward {record.raw_reward:+.2f}), "
            f"{claim}, {record.steps} actions, {record.model_calls} calls, {record.wall_time_s:.1f}s{error}"
        )

    try:
        result = run_miniwob(
            config, model=model, scripted=use_script, false_claims=claims, on_record=on_record
        )
    except ChromiumNotFound as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2) from exc
    if result.skipped:
        console.print(f"resumed: {result.skipped} finished episodes kept from {escape(str(out))}")
    print_summary(result.summary)
    console.print(
        f"report: {result.paths['html'].resolve()} (markdown: {result.paths['markdown'].name})"
    )
    raise typer.Exit(
        1 if result.summary.episodes and result.summary.errors == result.summary.episodes else 0
    )
