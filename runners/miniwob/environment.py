"""MiniWoB++ task pages as an environment: serve them on loopback, start seeded episodes, read the reward.

The ``miniwob`` package ships the task pages; each page computes its own
reward in JS. We drive episodes exactly as the package's Selenium instance
does (``Math.seedrandom`` -> ``core.startEpisodeReal()``), but through a
Playwright page, and read ``WOB_DONE_GLOBAL`` / ``WOB_RAW_REWARD_GLOBAL`` /
``WOB_REWARD_REASON`` as the ground truth.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

DEFAULT_EPISODE_MAX_TIME_MS = 120_000
"""Long enough that a model-driven episode is judged on what the agent did, not on the page's 10 s clock."""


class MiniWobMissing(RuntimeError):
    """The ``miniwob`` package (the task pages) is not installed."""


def miniwob_html_dir() -> Path:
    """The ``html/`` folder of the installed ``miniwob`` package; :class:`MiniWobMissing` without it."""
    try:
        root = resources.files("miniwob") / "html"
    except ModuleNotFoundError as exc:
        raise MiniWobMissing(
            "the MiniWoB++ task pages come from the 'miniwob' package, which the runtime install "
            "(make demo) leaves out: run `make setup-dev` or `.venv/bin/pip install miniwob`"
        ) from exc
    return Path(str(root))


def available_tasks() -> list[str]:
    """Every MiniWoB++ task name shipped by the package (e.g. ``click-button``)."""
    return sorted(p.stem for p in (miniwob_html_dir() / "miniwob").glob("*.html"))


def resolve_tasks(names: list[str] | None) -> list[str]:
    """Validate task names (all tasks when ``names`` is None); raise ValueError naming the unknown ones."""
    known = available_tasks()
    if names is None:
        return known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"unknown MiniWoB task(s): {', '.join(unknown)} (see `veriloop eval miniwob --list`)"
        )
    if not names:
        raise ValueError("no tasks given")
    return list(dict.fromkeys(names))


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


class MiniWobServer:
    """The package's task pages served over HTTP on 127.0.0.1 (a free port); a context manager."""

    def __init__(self, html_dir: Path | None = None) -> None:
        self.html_dir = html_dir or miniwob_html_dir()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> MiniWobServer:
        handler = functools.partial(_QuietHandler, directory=str(self.html_dir))
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="miniwob-http", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the MiniWoB server is not running")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/miniwob/"

    def task_url(self, task: str) -> str:
        return f"{self.base_url}{task}.html"


@dataclass(frozen=True)
class EpisodeState:
    """What the page says about the current episode."""

    done: bool
    raw_reward: float
    reward: float
    reason: str | None

    @property
    def success(self) -> bool:
        """The environment's verdict: a positive raw reward."""
        return self.done and self.raw_reward > 0


def episode_seed(seed: int, task: str, episode: int) -> str:
    """The seed given to the page's ``Math.seedrandom`` for one episode (stable across runs and workers)."""
    return f"{seed}:{task}:{episode}"


def wait_for_task(page: Any, *, timeout_ms: float = 15_000) -> None:
    """After loading a task page: wait until its start cover exists (``core.startEpisode`` ran on load)."""
    page.wait_for_function("() => window.core && core.cover_div !== null", timeout=timeout_ms)


def start_episode(page: Any, seed: str, *, max_time_ms: int = DEFAULT_EPISODE_MAX_TIME_MS) -> str:
    """Start a seeded episode on an opened task page; return its utterance (the goal)."""
    page.evaluate(
        """([seed, maxTime]) => {
            Math.seedrandom(seed);
            core.EPISODE_MAX_TIME = maxTime;
            core.startEpisodeReal();
        }""",
        [seed, max_time_ms],
    )
    page.wait_for_function("() => WOB_TASK_READY === true && WOB_DONE_GLOBAL === false")
    return page.evaluate("() => core.getUtterance()")


def episode_state(page: Any) -> EpisodeState:
    """Read the page's reward globals."""
    raw = page.evaluate(
        "() => ({done: WOB_DONE_GLOBAL, raw: WOB_RAW_REWARD_GLOBAL, reward: WOB_REWARD_GLOBAL, reason: WOB_REWARD_REASON})"
    )
    reason = raw.get("reason")
    return EpisodeState(
        done=bool(raw["done"]),
        raw_reward=float(raw["raw"] or 0.0),
        reward=float(raw["reward"] or 0.0),
        reason=None if reason is None else str(reason),
    )


def end_episode(page: Any) -> None:
    """Stop a running episode (no reward) so its timers do not outlive it."""
    page.evaluate(
        "() => { if (!WOB_DONE_GLOBAL) core.endEpisode(0, false, 'stopped by the harness'); }"
    )
