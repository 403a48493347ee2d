"""The runner's loop: snapshot -> agent step -> execute -> stability wait -> next snapshot.

One turn is one agent invocation: it judges the previous action (the verdict
and its observation list) and chooses the next one. The loop ends on
``finish()`` / ``fail()`` (the task's status), the step budget, or an agent
error (the task is left as it was).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from playwright.sync_api import Error as PlaywrightError

from veriloop.engines.dom_context import compact_page
from veriloop.runners.browser.agents import AgentClient, AgentError
from veriloop.runners.browser.client import Execution, PageSession, Snapshot
from veriloop.schemas.actions import ActionParseError, parse_action
from veriloop.schemas.api import InteractResponse
from veriloop.schemas.observation import ClientObservations, Observation
from veriloop.schemas.usage import add_usage, total_usage

RunStatus = str
"""completed | failed | budget_exhausted | error | stopped"""


@dataclass
class StepTimings:
    """Milliseconds spent in one turn, by phase."""

    snapshot_ms: float = 0.0
    """Capturing the page this turn saw, stability wait included."""
    stability_wait_ms: float = 0.0
    """The part of snapshot_ms spent waiting for the page to settle."""
    agent_ms: float = 0.0
    """The agent's whole turn (graph, engines, model calls, transport)."""
    model_ms: float | None = None
    """Waiting for the model (None when the agent does not report usage)."""
    execute_ms: float = 0.0
    """Executing the chosen action in the browser."""

    @property
    def engine_ms(self) -> float | None:
        """The agent's own work without the model: graph, engines, checkpointing."""
        return None if self.model_ms is None else max(0.0, self.agent_ms - self.model_ms)


@dataclass
class StepRecord:
    """One turn: the page the agent saw, its verdict on the previous action, the action it chose."""

    index: int
    url: str
    action: str
    thought: str
    status: str
    verification: dict | None
    """VerificationSummary (camelCase) on the previous action; None on the first turn."""
    client_observations: dict | None
    """What the page witnessed since the previous action (sent with this turn)."""
    usage: dict[str, dict]
    timings: StepTimings
    execution_ok: bool | None = None
    execution_error: str | None = None
    screenshot: bytes | None = field(default=None, repr=False)
    settled: bool = True
    target: str | None = None
    """What a person would call the element the action targets (``"Save"`` for ``click(9)``)."""

    @property
    def described_action(self) -> str:
        """The action with its target's name: ``click(9) "Save"``."""
        return f'{self.action} "{self.target}"' if self.target else self.action

    @property
    def tokens(self) -> int:
        usage = total_usage(self.usage)
        return usage.input_tokens + usage.output_tokens


@dataclass
class RunResult:
    """A whole run of one goal."""

    goal: str
    start_url: str
    task_id: str | None = None
    status: RunStatus = "executing"
    error: str | None = None
    steps: list[StepRecord] = field(default_factory=list)

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def usage(self) -> dict[str, dict]:
        merged: dict[str, dict] = {}
        for step in self.steps:
            merged = add_usage(merged, step.usage)
        return merged


def run_task(
    goal: str,
    start_url: str,
    *,
    session: PageSession,
    agent: AgentClient,
    max_steps: int = 40,
    screenshots: bool = True,
    session_id: str | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
    navigate: bool = True,
    stop_before_action: Callable[[PageSession], bool] | None = None,
) -> RunResult:
    """Drive ``agent`` on ``start_url`` until it finishes, fails, errs or spends ``max_steps`` turns.

    ``on_step`` gets each finished turn; ``on_phase`` gets short progress notes
    ("waiting for the agent", "executing click(3)").

    ``navigate=False`` starts on the page the session already shows (prepared by
    the caller, e.g. a started MiniWoB episode). ``stop_before_action(session)``
    returning True ends the run with status ``stopped`` before the agent's next
    action is executed (the environment is over; the agent's verdict on the
    last action was still taken).
    """
    result = RunResult(goal=goal, start_url=start_url)
    note = on_phase or (lambda _text: None)
    try:
        if navigate:
            note(f"opening {start_url}")
            session.goto(start_url)
        snapshot = session.snapshot()
    except PlaywrightError as exc:
        result.status, result.error = "error", f"could not open {start_url}: {exc}"
        return result
    execution: Execution | None = None
    previous_url: str | None = None
    for index in range(max_steps):
        observation = Observation(
            url=snapshot.url,
            dom=snapshot.dom,
            query=goal if result.task_id is None else None,
            task_id=result.task_id,
            session_id=session_id,
            active_element=snapshot.active_element,
            client_observations=snapshot.client_observations if result.task_id else None,
            client_verification=execution.client_verification if execution else None,
            previous_url=previous_url,
        )
        shot = session.screenshot() if screenshots else None
        note(f"step {index + 1}: waiting for the agent")
        try:
            turn = agent.step(observation)
        except AgentError as exc:
            result.status, result.error = "error", str(exc)
            return result
        response = turn.response
        result.task_id = response.task_id
        step = _record(index, snapshot, observation.client_observations, response, turn, shot)
        result.steps.append(step)
        try:
            action = parse_action(response.action)
        except (
            ActionParseError
        ) as exc:  # the agent's contract says this cannot happen; never execute a guess
            result.status, result.error = "error", f"the agent answered an invalid action: {exc}"
            _emit(on_step, step)
            return result
        if action.element_id is not None:  # named from the page's compact form (one parse, cached)
            step.target = compact_page(snapshot.dom).target(action.element_id)
        if response.status != "executing" or action.is_terminal:
            result.status = response.status
            if response.status == "executing":  # a terminal action must come with a final status
                result.status, result.error = (
                    "error",
                    f"the agent answered {action} but left the task executing",
                )
            _emit(on_step, step)
            return result
        if stop_before_action is not None and stop_before_action(session):
            result.status = "stopped"
            _emit(on_step, step)
            return result
        note(f"step {index + 1}: executing {action}")
        previous_url = snapshot.url
        try:
            session.mark_action()
            execution = session.execute(action)
            note(f"step {index + 1}: waiting for the page to settle")
            snapshot = session.snapshot(since_url=previous_url)
        except PlaywrightError as exc:
            result.status, result.error = "error", f"the browser failed during {action}: {exc}"
            _emit(on_step, step)
            return result
        step.execution_ok, step.execution_error = execution.ok, execution.error
        step.timings.execute_ms = execution.duration_ms
        _emit(on_step, step)
    result.status = "budget_exhausted"
    result.error = f"no finish() or fail() within {max_steps} steps"
    return result


def _record(
    index: int,
    snapshot: Snapshot,
    witnessed: ClientObservations | None,
    response: InteractResponse,
    turn,
    shot: bytes | None,
) -> StepRecord:
    return StepRecord(
        index=index,
        url=snapshot.url,
        action=response.action,
        thought=response.thought,
        status=response.status,
        verification=response.verification.to_wire() if response.verification else None,
        client_observations=witnessed.to_wire() if witnessed else None,
        usage=turn.usage,
        timings=StepTimings(
            snapshot_ms=snapshot.total_ms,
            stability_wait_ms=snapshot.stability_wait_ms,
            agent_ms=turn.agent_ms,
            model_ms=turn.model_ms,
        ),
        screenshot=shot,
        settled=snapshot.settled,
    )


def _emit(callback: Callable[[StepRecord], None] | None, step: StepRecord) -> None:
    if callback is not None:
        callback(step)
