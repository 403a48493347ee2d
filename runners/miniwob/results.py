"""Per-episode records of a MiniWoB++ evaluation and the summary figures computed from them.

The environment decides success (raw reward > 0); the agent's claim is its
task status (``completed``). Crossing the two gives the verifier's confusion
matrix: a claim on a failed episode is a false completion, a successful
episode the agent did not claim is a missed completion.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

LOOP_REPEATS = 3
"""The same action on the same page fingerprint this many times in one episode counts as a loop."""


class EpisodeRecord(BaseModel):
    """One episode: the page's verdict, the agent's claim, and what it cost."""

    task: str
    episode: int
    seed: str
    utterance: str = ""
    model: str = ""
    env_done: bool = False
    raw_reward: float = 0.0
    reward: float = 0.0
    reward_reason: str | None = None
    agent_status: str = "executing"
    steps: int = 0
    model_calls: int = 0
    critical_path_calls: int | None = Field(
        default=None,
        description="Model calls the episode waited for one after another (side-by-side calls count "
        "once); measured at the scripted model server, None with a real provider.",
    )
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    usage: dict[str, dict[str, Any]] = Field(default_factory=dict)
    wall_time_s: float = 0.0
    actions: list[str] = Field(default_factory=list)
    verification_history: list[dict[str, Any]] = Field(default_factory=list)
    max_repeats: int = Field(
        default=0, description="Most times one (action, page fingerprint) pair occurred."
    )
    no_change_fast_fails: int = Field(
        default=0, description="Verifications failed as 'no change' without a model call."
    )
    error: str | None = Field(
        default=None, description="Why the harness could not finish the episode."
    )

    @property
    def key(self) -> tuple[str, int]:
        return (self.task, self.episode)

    @property
    def success(self) -> bool:
        """The environment's verdict: the episode ended with a positive raw reward."""
        return self.env_done and self.raw_reward > 0

    @property
    def claimed_done(self) -> bool:
        """The agent said the goal is achieved (its task status is completed)."""
        return self.agent_status == "completed"

    @property
    def false_completion(self) -> bool:
        return self.claimed_done and not self.success

    @property
    def missed_completion(self) -> bool:
        return self.success and not self.claimed_done

    @property
    def looped(self) -> bool:
        return self.max_repeats >= LOOP_REPEATS


def count_no_change_fast_fails(verification_history: Iterable[dict[str, Any]]) -> int:
    """Verifications that failed on 'nothing changed' before any model call."""
    return sum(
        1
        for v in verification_history
        if not v.get("success")
        and v.get("failure_category") == "no_effect"
        and not v.get("model_called")
    )


def _rate(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


class TaskSummary(BaseModel):
    task: str
    episodes: int
    successes: int
    claimed: int
    false_completions: int
    missed_completions: int
    loops: int

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    @property
    def false_completion_share(self) -> float:
        """False completions as a share of this task's episodes (what the plot shows)."""
        return self.false_completions / self.episodes if self.episodes else 0.0


class Summary(BaseModel):
    """The figures of one evaluation run."""

    episodes: int
    errors: int
    successes: int
    success_rate: float | None
    confusion: dict[str, dict[str, int]] = Field(
        description="confusion[agent claim][environment verdict]: claim in {done, not_done}, verdict in {success, failure}."
    )
    false_completions: int
    false_completion_rate: float | None = Field(
        description="False completions / episodes the agent claimed done."
    )
    missed_completions: int
    missed_completion_rate: float | None = Field(
        description="Missed completions / successful episodes."
    )
    loops: int
    loop_rate: float | None
    no_change_fast_fails: int
    episodes_with_fast_fail: int
    mean_steps: float | None
    model_calls: int
    agent_actions: int = Field(
        description="Actions the agent answered with, finish() and fail() included."
    )
    calls_per_action: float | None
    critical_calls_per_action: float | None = Field(
        description="Critical-path model calls per agent action (scripted runs only)."
    )
    input_tokens: int
    output_tokens: int
    cost_usd: float
    mean_wall_time_s: float | None
    per_task: list[TaskSummary]


def calls_per_action_line(summary: Summary) -> str:
    """``3.00 (critical path 2.00)`` per agent action, finish()/fail() included."""
    if summary.calls_per_action is None:
        return "n/a"
    line = f"{summary.calls_per_action:.2f}"
    if summary.critical_calls_per_action is not None:
        line += f" (critical path {summary.critical_calls_per_action:.2f})"
    return line


def summarize(records: list[EpisodeRecord]) -> Summary:
    """Success, the claim x verdict confusion matrix, false/missed completions, loops, fast fails, cost."""
    n = len(records)
    claimed = [r for r in records if r.claimed_done]
    successes = sum(r.success for r in records)
    false_completions = sum(r.false_completion for r in records)
    missed = sum(r.missed_completion for r in records)
    loops = sum(r.looped for r in records)
    confusion = {
        "done": {"success": len(claimed) - false_completions, "failure": false_completions},
        "not_done": {"success": missed, "failure": n - len(claimed) - missed},
    }
    actions = sum(len(r.actions) for r in records)
    tasks = list(dict.fromkeys(r.task for r in records))
    per_task = []
    for task in tasks:
        rs = [r for r in records if r.task == task]
        per_task.append(
            TaskSummary(
                task=task,
                episodes=len(rs),
                successes=sum(r.success for r in rs),
                claimed=sum(r.claimed_done for r in rs),
                false_completions=sum(r.false_completion for r in rs),
                missed_completions=sum(r.missed_completion for r in rs),
                loops=sum(r.looped for r in rs),
            )
        )
    return Summary(
        episodes=n,
        errors=sum(r.error is not None for r in records),
        successes=successes,
        success_rate=_rate(successes, n),
        confusion=confusion,
        false_completions=false_completions,
        false_completion_rate=_rate(false_completions, len(claimed)),
        missed_completions=missed,
        missed_completion_rate=_rate(missed, successes),
        loops=loops,
        loop_rate=_rate(loops, n),
        no_change_fast_fails=sum(r.no_change_fast_fails for r in records),
        episodes_with_fast_fail=sum(r.no_change_fast_fails > 0 for r in records),
        mean_steps=sum(r.steps for r in records) / n if n else None,
        model_calls=sum(r.model_calls for r in records),
        agent_actions=actions,
        calls_per_action=_rate(sum(r.model_calls for r in records), actions),
        critical_calls_per_action=None
        if any(r.critical_path_calls is None for r in records)
        else _rate(sum(r.critical_path_calls for r in records), actions),
        input_tokens=sum(r.input_tokens for r in records),
        output_tokens=sum(r.output_tokens for r in records),
        cost_usd=round(sum(r.cost_usd for r in records), 6),
        mean_wall_time_s=sum(r.wall_time_s for r in records) / n if n else None,
        per_task=per_task,
    )


EPISODES_FILE = "episodes.jsonl"


def load_records(out_dir: Path) -> list[EpisodeRecord]:
    """Episodes already recorded in ``out_dir`` (a torn last line from a killed run is ignored)."""
    path = Path(out_dir) / EPISODES_FILE
    if not path.exists():
        return []
    records: dict[tuple[str, int], EpisodeRecord] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = EpisodeRecord.model_validate_json(line)
        except ValueError:
            continue
        records[record.key] = record
    return list(records.values())


def append_record(out_dir: Path, record: EpisodeRecord) -> None:
    """Append one finished episode (one JSON line, flushed) so a killed run can resume after it."""
    path = Path(out_dir) / EPISODES_FILE
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record.model_dump(mode="json"), ensure_ascii=False) + "\n")
        fh.flush()
