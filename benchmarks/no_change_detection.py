"""Model-free benchmark: does the engine tell an effective action from a no-op on real MiniWoB++ pages?

Per episode (real task page, headless Chromium, snapshots by the page-contract
script ``snapshot.js``), three transitions, each snapshot -> action -> snapshot:

1. ``static_click``: a click on the instruction text (static text; the page
   only tags the clicked element ``data-tampered``): a no-op;
2. ``timer_wait``: a 1.2 s wait while the episode timer ticks: a no-op;
3. ``effective``: a click or typing on the element the utterance names
   (``runners.miniwob.targets``, the first step of the task), executed as the
   agent's own action (``click(N)`` / ``setValue(N, "...")``).

The truth is decided by the action, never by what the engine saw. Scored on
the same transitions: the engine's decision (``build_observation_list(...)
.meaningful_content_change``) and the hash-only rule (DOM hash differs). The
client witness (``didDomMutate`` / ``didNetworkOccur``) is printed as well,
since verification also proceeds to the model when the client saw something.

    python -m benchmarks.no_change_detection                       # all default tasks
    python -m benchmarks.no_change_detection --tasks click-button,enter-text --episodes 1

Last line: ``RESULT engine_precision=... engine_recall=... hash_precision=... hash_recall=... transitions=...``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field

from veriloop.engines.observation import (
    build_observation_list,
    capture_page_state,
    compute_dom_hash,
)
from veriloop.runners.browser.client import ChromiumBrowser, PageSession, Snapshot
from veriloop.runners.miniwob.environment import (
    MiniWobServer,
    episode_seed,
    resolve_tasks,
    start_episode,
    wait_for_task,
)
from veriloop.runners.miniwob.targets import parse_page, solve
from veriloop.schemas.actions import Action

DEFAULT_TASKS = (
    "click-button", "click-button-sequence", "click-checkboxes", "click-checkboxes-large", "click-collapsible",
    "click-dialog", "click-dialog-2", "click-link", "click-option", "click-tab", "click-test",
    "click-test-2", "click-widget", "enter-date", "enter-password", "enter-text", "enter-text-2",
    "enter-text-dynamic", "enter-time", "find-word", "form-sequence-2", "guess-number", "login-user",
    "multi-layouts", "multi-orderings", "read-table", "search-engine", "simple-arithmetic", "use-autocomplete",
)  # fmt: skip
WAIT_S = 1.2
"""Longer than the episode timer's 1 s tick, so the wait always spans a tick."""


@dataclass
class Transition:
    """One snapshot -> action -> snapshot, its truth and each rule's decision."""

    task: str
    seed: str
    kind: str
    action: str
    effective: bool
    engine: bool
    hash_changed: bool
    witness: bool
    observations: list[str] = field(default_factory=list)


def _transition(
    task: str, seed: str, kind: str, action: str, effective: bool, before: Snapshot, after: Snapshot
) -> Transition:
    before_state = capture_page_state(before.url, before.dom, before.active_element)
    result = build_observation_list(
        before_state,
        after.dom,
        after.url,
        after.client_observations,
        after.active_element,
        action=action,
    )
    return Transition(
        task=task,
        seed=seed,
        kind=kind,
        action=action,
        effective=effective,
        engine=result.meaningful_content_change,
        hash_changed=compute_dom_hash(before.dom) != compute_dom_hash(after.dom),
        witness=result.client_saw_something,
        observations=result.observations,
    )


def run_episode(
    session: PageSession, server: MiniWobServer, task: str, seed: str
) -> list[Transition]:
    """The three transitions of one episode; no transition when the utterance names nothing we can act on."""
    session.goto(server.task_url(task))
    wait_for_task(session.page)
    utterance = start_episode(session.page, seed)
    start = session.snapshot()

    session.mark_action()
    session.page.click("#query")
    clicked = session.snapshot()

    session.mark_action()
    time.sleep(WAIT_S)
    waited = session.snapshot()

    steps = solve(utterance, parse_page(waited.dom))
    if not steps or steps[0].element_id is None:
        print(f"  skip {task} seed {seed}: no numbered target for {utterance!r}", file=sys.stderr)
        return []
    step = steps[0]
    kind = "click" if step.value is None else "set_value"
    action = Action(kind=kind, element_id=step.element_id, text=step.value)
    session.mark_action()
    execution = session.execute(action)
    if not execution.ok:
        print(f"  skip {task} seed {seed}: {action} failed: {execution.error}", file=sys.stderr)
        return []
    acted = session.snapshot()
    return [
        _transition(
            task, seed, "static_click", "click on the instruction text", False, start, clicked
        ),
        _transition(task, seed, "timer_wait", f"wait {WAIT_S}s", False, clicked, waited),
        _transition(task, seed, "effective", str(action), True, waited, acted),
    ]


@dataclass
class Score:
    precision: float
    recall: float
    tp: int
    fp: int
    fn: int


def score(transitions: list[Transition], decision: str) -> Score:
    """Precision and recall of ``decision`` (a Transition flag) against ``effective``."""
    tp = sum(1 for t in transitions if t.effective and getattr(t, decision))
    fp = sum(1 for t in transitions if not t.effective and getattr(t, decision))
    fn = sum(1 for t in transitions if t.effective and not getattr(t, decision))
    return Score(
        precision=tp / (tp + fp) if tp + fp else 0.0,
        recall=tp / (tp + fn) if tp + fn else 0.0,
        tp=tp,
        fp=fp,
        fn=fn,
    )


def run(
    tasks: list[str], episodes: int, seed: int, *, chromium: str | None = None
) -> list[Transition]:
    transitions: list[Transition] = []
    with MiniWobServer() as server, ChromiumBrowser(executable_path=chromium) as browser:
        session = browser.new_session()
        try:
            for task in tasks:
                for episode in range(episodes):
                    transitions += run_episode(
                        session, server, task, episode_seed(seed, task, episode)
                    )
        finally:
            session.close()
    return transitions


def report(transitions: list[Transition], examples: int = 12) -> str:
    """Per-task errors, the engine's misses with their observations, and the RESULT line (last)."""
    lines = [f"{'task':28} {'n':>3} {'eng FP':>6} {'eng FN':>6} {'hash FP':>7} {'hash FN':>7}"]
    for task in dict.fromkeys(t.task for t in transitions):
        ts = [t for t in transitions if t.task == task]
        e, h = score(ts, "engine"), score(ts, "hash_changed")
        lines.append(f"{task:28} {len(ts):>3} {e.fp:>6} {e.fn:>6} {h.fp:>7} {h.fn:>7}")
    wrong = [t for t in transitions if t.engine != t.effective]
    if wrong:
        lines.append(f"\nengine errors ({len(wrong)}; up to {examples} shown):")
        for t in wrong[:examples]:
            label = "missed effective" if t.effective else "flagged no-op"
            lines.append(
                f"  {label}: {t.task} [{t.kind}] {t.action} -> {' | '.join(t.observations)[:240]}"
            )
    engine, hashed, witness = (
        score(transitions, "engine"),
        score(transitions, "hash_changed"),
        score(transitions, "witness"),
    )
    by_kind = {
        k: sum(1 for t in transitions if t.kind == k)
        for k in ("static_click", "timer_wait", "effective")
    }
    lines += [
        "",
        f"transitions by kind: {by_kind}",
        f"engine   tp={engine.tp} fp={engine.fp} fn={engine.fn}",
        f"hash     tp={hashed.tp} fp={hashed.fp} fn={hashed.fn}",
        f"witness  (client didDomMutate/didNetworkOccur, informational) precision={witness.precision:.3f} "
        f"recall={witness.recall:.3f}",
        f"RESULT engine_precision={engine.precision:.3f} engine_recall={engine.recall:.3f} "
        f"hash_precision={hashed.precision:.3f} hash_recall={hashed.recall:.3f} transitions={len(transitions)}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.no_change_detection", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--tasks", help="comma-separated MiniWoB task names (default: the 30 built-in tasks)"
    )
    parser.add_argument(
        "--episodes", type=int, default=2, help="episodes (seeds) per task (default 2)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--chromium", help="Chromium executable (default: $VERILOOP_CHROMIUM or /usr/bin/chromium)"
    )
    parser.add_argument("--json", help="also write every transition to this JSON file")
    args = parser.parse_args(argv)
    try:
        tasks = resolve_tasks(args.tasks.split(",") if args.tasks else list(DEFAULT_TASKS))
    except ValueError as exc:
        parser.error(str(exc))
    if args.episodes < 1:
        parser.error("--episodes must be at least 1")
    started = time.perf_counter()
    transitions = run(tasks, args.episodes, args.seed, chromium=args.chromium)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump([asdict(t) for t in transitions], fh, indent=1)
    print(f"{len(tasks)} tasks x {args.episodes} episodes in {time.perf_counter() - started:.0f}s")
    print(report(transitions))
    return 0 if transitions else 1


if __name__ == "__main__":
    sys.exit(main())
