"""The graph state: one task's page, plan, history, verdicts, budgets and usage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from langgraph.channels import DeltaChannel
from typing_extensions import TypedDict

from veriloop.schemas.usage import add_usage


def _appended(history: list, batches: Sequence[list]) -> list:
    """The history with each batch of new records appended, in order."""
    return [*history, *(record for batch in batches for record in batch)]


HISTORY_SNAPSHOT_EVERY = 2
"""A history is stored whole at every 2nd update, as new records only in between.

Loading a task replays the records since the last whole copy, and the SQLite saver deserializes
every checkpoint on the way back, page state included (~45 kB each on a mid-size page). At
LangGraph's default (100) that made loading grow with the task: 1.5 MB and 18 ms of CPU a step
by step 40 (``benchmarks.state_growth``). At 2 a load usually reads one checkpoint back, and a
whole copy costs a few hundred bytes a record every other step."""


def history() -> DeltaChannel:
    """A task history's channel: it grows by a record a step; a checkpoint stores the new records,
    and the whole history every :data:`HISTORY_SNAPSHOT_EVERY` updates."""
    return DeltaChannel(_appended, snapshot_frequency=HISTORY_SNAPSHOT_EVERY)


class InputState(TypedDict, total=False):
    """What a client sends for one invocation (one observation of the page)."""

    task_id: str
    """The task (also the checkpointer thread id)."""
    session_id: str | None
    """The client's session, for logs and task recovery."""
    goal: str
    """The user's goal in their own words."""
    url: str
    """The page URL now."""
    dom: str
    """The page's outerHTML as the snapshot script wrote it (emptied when the run ends)."""
    active_element: str | None
    """Descriptor of the focused element, if the client reported one."""
    previous_url: str | None
    """The URL before the last action, if the client reported it."""
    client_observations: dict[str, Any] | None
    """ClientObservations dump: what the client witnessed since the last action."""
    client_verification: dict[str, Any] | None
    """ClientVerification dump: the client's own check of an expected element."""


class State(InputState, total=False):
    """Everything the graph keeps per task across invocations."""

    page_state: dict[str, Any] | None
    """BeforeState dump of the current observation, computed once per invocation."""
    plan: dict[str, Any] | None
    """Plan dump; None until planning runs."""
    current_step_index: int
    """Index of the plan step being worked on."""
    current_sub_task_index: int
    """Index of the sub-task being worked on inside the current step (hierarchical plans)."""
    refined_instruction: str | None
    """step_refinement's concrete instruction for the current step."""
    target_element_id: int | None
    """The element step_refinement suggests acting on (centres the action prompt's DOM window)."""
    action: dict[str, Any] | None
    """Action dump chosen by this invocation (None until chosen)."""
    thought: str
    """Why this invocation chose its action; for display only."""
    action_source: Literal["action_generation", "correction", "goal_achieved"] | None
    """Which node chose this invocation's action (recorded in the action history)."""
    correction_strategy: str | None
    """Strategy key correction applied this invocation, e.g. ``alternative_element(170)``; counted by finalize."""
    action_history: Annotated[list[dict[str, Any]], history()]
    """ActionRecord dumps of every action handed to the client, in order (page summaries, no skeletons)."""
    before_state: dict[str, Any] | None
    """BeforeState dump (with its skeleton) of the page the last action was chosen on; None before the first."""
    action_observation: dict[str, Any] | None
    """VerificationResult-shaped dump of what changed after the last action, before the model judges it."""
    lookahead_planned: bool
    """This run prepares the next action beside the verification call (engines/lookahead.py)."""
    lookahead: dict[str, Any] | None
    """Lookahead dump: the next step and action a verified success leads to; used only after that success."""
    verification_result: dict[str, Any] | None
    """VerificationResult dump for the previous action, from this invocation (None when not verified)."""
    verification_history: Annotated[list[dict[str, Any]], history()]
    """Every VerificationResult dump of the task, in order."""
    completion_audit: dict[str, Any] | None
    """CompletionAuditResult dump of this invocation's finish audit (set before every finish())."""
    audit_ahead_planned: bool
    """This run audits the finish beside the verification call (the plan's last step was verified)."""
    audit_ahead: dict[str, Any] | None
    """CompletionAuditResult dump of the audit run beside this run's verdict; completion_audit uses it."""
    action_fingerprints: Annotated[list[str], history()]
    """Fingerprints of (action, page skeleton) already tried, for loop detection."""
    correction_attempts: int
    """Corrections spent on the current step."""
    tried_strategies: list[str]
    """Correction strategies already tried on the current step (never offered again unchanged)."""
    replan_count: int
    """Replans spent on this task."""
    plan_validation: dict[str, Any] | None
    """PlanValidation dump from the last replanning (minor_modifications_only as derived, not as claimed)."""
    replanning_result: dict[str, Any] | None
    """ReplanningResult dump from the last replanning."""
    needs_correction: bool
    """action_generation could not produce a valid action; hand over to correction."""
    status: Literal["executing", "completed", "failed"]
    """Task status after this invocation."""
    usage: Annotated[dict[str, dict[str, Any]], add_usage]
    """Usage dumps per purpose (planning, refinement, action, verification, correction, replanning, critic)."""
