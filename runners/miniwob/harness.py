"""The MiniWoB++ evaluation harness: episodes on real task pages, judged by the pages' own rewards.

Per episode: a fresh browser context opens the task page (served on loopback),
starts a seeded episode, and the Playwright runner drives the agent with the
utterance as its goal. When the page ends the episode, the agent still gets
one turn to judge its last action (that is where it claims the goal or not);
its next action is not executed. Each finished episode is appended to
``episodes.jsonl`` at once, so ``resume`` skips it; K workers run episodes in
parallel, each with its own headless Chromium and in-process agent.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

from veriloop.context import Context
from veriloop.llm.endpoint import SCRIPTED_MODEL, describe_model, model_configured
from veriloop.llm.scripted import ScriptedModelServer, critical_path_calls
from veriloop.runners.browser.agents import InProcessAgent
from veriloop.runners.browser.client import ChromiumBrowser, PageSession
from veriloop.runners.browser.loop import run_task
from veriloop.runners.miniwob.environment import (
    DEFAULT_EPISODE_MAX_TIME_MS,
    MiniWobServer,
    end_episode,
    episode_seed,
    episode_state,
    start_episode,
    wait_for_task,
)
from veriloop.runners.miniwob.report import write_report
from veriloop.runners.miniwob.results import (
    EPISODES_FILE,
    EpisodeRecord,
    Summary,
    append_record,
    count_no_change_fast_fails,
    load_records,
    summarize,
)
from veriloop.runners.miniwob.scripted import MiniWobPlaybook, playbook_goal
from veriloop.schemas.usage import total_usage

RUN_FILE = "run.json"
SCRIPTED_LATENCY_S = 0.05
"""The scripted model answers after this long, so calls made side by side overlap at the server."""


@dataclass
class EvalConfig:
    """What to run and where to write it."""

    tasks: list[str]
    episodes: int = 1
    seed: int = 0
    out_dir: Path = Path("miniwob-eval")
    parallel: int = 1
    resume: bool = False
    max_steps: int = 12
    """Agent turns per episode."""
    episode_max_time_ms: int = DEFAULT_EPISODE_MAX_TIME_MS
    chromium: str | None = None
    model_label: str = ""
    """The model's name in each episode record (set by :func:`run_eval` from its context)."""

    def planned(self) -> list[tuple[str, int]]:
        return [(task, episode) for task in self.tasks for episode in range(self.episodes)]

    def seed_of(self, task: str, episode: int) -> str:
        return episode_seed(self.seed, task, episode)


EpisodeHook = Callable[[str, int, str], None]
"""Called with (task, episode, utterance) once an episode has started, before the agent sees it."""


@dataclass
class EvalResult:
    summary: Summary
    records: list[EpisodeRecord]
    paths: dict[str, Path]
    skipped: int = 0
    """Episodes already finished in ``out_dir`` (resume)."""
    ran: list[EpisodeRecord] = field(default_factory=list)


def _max_repeats(fingerprints: list[str]) -> int:
    return max(Counter(fingerprints).values(), default=0)


def run_episode(
    session: PageSession,
    server: MiniWobServer,
    agent: InProcessAgent,
    config: EvalConfig,
    task: str,
    episode: int,
    on_start: EpisodeHook | None = None,
) -> EpisodeRecord:
    """One episode; harness and browser trouble is recorded in ``error``, never raised."""
    started = time.perf_counter()
    record = EpisodeRecord(
        task=task, episode=episode, seed=config.seed_of(task, episode), model=config.model_label
    )
    try:
        session.goto(server.task_url(task))
        wait_for_task(session.page)
        record.utterance = start_episode(
            session.page, record.seed, max_time_ms=config.episode_max_time_ms
        )
        if on_start is not None:
            on_start(task, episode, record.utterance)
        run = run_task(
            record.utterance,
            session.page.url,
            session=session,
            agent=agent,
            max_steps=config.max_steps,
            screenshots=False,
            session_id=f"miniwob-{task}-{episode}",
            navigate=False,
            stop_before_action=lambda s: episode_state(s.page).done,
        )
        env = episode_state(session.page)
        end_episode(session.page)
        record.env_done, record.raw_reward, record.reward, record.reward_reason = (
            env.done,
            env.raw_reward,
            env.reward,
            env.reason,
        )
        record.actions = [step.action for step in run.steps]
        record.steps = sum(step.execution_ok is not None for step in run.steps)
        if run.status == "error":
            record.error = run.error
        if run.task_id is not None:
            values = agent.agent.graph.get_state(
                {"configurable": {"thread_id": run.task_id}}
            ).values
            _fill_from_state(record, values)
    except Exception as exc:  # one broken episode must not end the evaluation; it is reported
        record.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    record.wall_time_s = round(time.perf_counter() - started, 3)
    return record


def _fill_from_state(record: EpisodeRecord, values: dict) -> None:
    """The agent's own record of the task: its status (the claim), verdicts, loops and usage."""
    record.agent_status = values.get("status", "executing")
    record.verification_history = list(values.get("verification_history") or [])
    record.no_change_fast_fails = count_no_change_fast_fails(record.verification_history)
    record.max_repeats = _max_repeats(list(values.get("action_fingerprints") or []))
    record.usage = dict(values.get("usage") or {})
    usage = total_usage(record.usage)
    record.model_calls, record.input_tokens, record.output_tokens = (
        usage.calls,
        usage.input_tokens,
        usage.output_tokens,
    )
    record.cost_usd = usage.cost_usd


def _worker(
    jobs: queue.Queue,
    server: MiniWobServer,
    config: EvalConfig,
    context: Context,
    finished: Callable[[EpisodeRecord], None],
    on_start: EpisodeHook | None,
    failures: list[BaseException],
) -> None:
    try:
        with ChromiumBrowser(executable_path=config.chromium) as browser:
            agent = InProcessAgent(context=context)
            while True:
                try:
                    task, episode = jobs.get_nowait()
                except queue.Empty:
                    return
                session = browser.new_session()
                try:
                    record = run_episode(session, server, agent, config, task, episode, on_start)
                finally:
                    session.close()
                finished(record)
    except BaseException as exc:  # e.g. Chromium missing: surfaces in the calling thread
        failures.append(exc)


def run_eval(
    config: EvalConfig,
    context: Context,
    *,
    on_start: EpisodeHook | None = None,
    on_record: Callable[[EpisodeRecord], None] | None = None,
    annotate: Callable[[EpisodeRecord], None] | None = None,
) -> EvalResult:
    """Run every planned episode not already finished (with ``resume``), then write the report.

    ``annotate`` adds what only the caller measured to a finished record, before it is written.
    """
    if config.episodes < 1 or config.parallel < 1:
        raise ValueError("episodes and parallel must be at least 1")
    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = describe_model(context)
    config.model_label = model.model
    previous = load_records(out) if config.resume else []
    if not config.resume:
        (out / EPISODES_FILE).unlink(missing_ok=True)
    (out / RUN_FILE).write_text(
        json.dumps({**asdict(config), "out_dir": str(out), "model": model.to_wire()}, indent=2),
        encoding="utf-8",
    )

    finished_keys = {
        r.key for r in previous if r.error is None and r.seed == config.seed_of(*r.key)
    }
    pending = [key for key in config.planned() if key not in finished_keys]
    jobs: queue.Queue = queue.Queue()
    for key in pending:
        jobs.put(key)
    ran: list[EpisodeRecord] = []
    lock = threading.Lock()

    def finished(record: EpisodeRecord) -> None:
        with lock:
            if annotate is not None:
                annotate(record)
            append_record(out, record)
            ran.append(record)
            if on_record is not None:
                on_record(record)

    failures: list[BaseException] = []
    with MiniWobServer() as server:
        workers = [
            threading.Thread(
                target=_worker,
                args=(jobs, server, config, context, finished, on_start, failures),
                name=f"miniwob-worker-{i}",
                daemon=True,
            )
            for i in range(min(config.parallel, len(pending)))
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    if failures:
        raise failures[0]

    latest = {r.key: r for r in [*previous, *ran]}
    records = [latest[key] for key in config.planned() if key in latest]
    summary = summarize(records)
    paths = write_report(out, summary, records, model=model)
    return EvalResult(
        summary=summary,
        records=records,
        paths=paths,
        skipped=len(config.planned()) - len(pending),
        ran=ran,
    )


def run_miniwob(
    config: EvalConfig,
    *,
    model: str | None = None,
    scripted: bool | None = None,
    model_server: ScriptedModelServer | None = None,
    false_claims: Collection[tuple[str, int]] = (),
    on_record: Callable[[EpisodeRecord], None] | None = None,
) -> EvalResult:
    """:func:`run_eval` with a model: the configured provider, or (``scripted``, default when none is
    configured) the MiniWoB playbook on a loopback OpenAI-compatible server (``model_server`` if given).

    ``false_claims`` lists (task, episode) pairs where the playbook claims completion falsely.
    """
    use_script = model_server is not None or (
        not model_configured() if scripted is None else scripted
    )
    if false_claims and not use_script:
        raise ValueError("false claims can only be scripted: they need the scripted model")
    if not use_script:
        return run_eval(config, Context(model=model) if model else Context(), on_record=on_record)

    playbook = MiniWobPlaybook()
    lies = set(false_claims)

    def on_start(task: str, episode: int, utterance: str) -> None:
        if (task, episode) in lies:
            playbook.claim_falsely(utterance)

    own_server = ScriptedModelServer(latency_s=SCRIPTED_LATENCY_S)
    with nullcontext(model_server) if model_server is not None else own_server as server:
        playbook.install(server)

        def annotate(record: EpisodeRecord) -> None:
            # The episode's calls are the ones about its goal (episodes run one after another per worker).
            goal = " ".join(record.utterance.split())
            spans = [s for s in server.spans if playbook_goal(s.request) == goal]
            record.critical_path_calls = critical_path_calls(spans)

        return run_eval(
            config,
            Context(model=SCRIPTED_MODEL, base_url=server.base_url),
            on_start=on_start,
            on_record=on_record,
            annotate=annotate,
        )
