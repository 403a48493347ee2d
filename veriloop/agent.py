"""The Python front door: one observation in, the next action out; or a whole task with your executor.

    agent = Agent()                                   # InMemorySaver; pass any LangGraph checkpointer
    reply = agent.step(Observation(url=..., dom=..., query="Add a patient named Jas"))
    ...execute reply.action, take the next snapshot...
    reply = agent.step(Observation(url=..., dom=..., task_id=reply.task_id))

Each step is one graph invocation on thread ``task_id``: it verifies the
previous action against the new page, then chooses the next action (or
``finish()`` / ``fail("...")``).
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph

from veriloop.context import Context
from veriloop.graph.builder import build_graph
from veriloop.graph.io import observation_to_input, state_to_response
from veriloop.schemas.actions import Action, parse_action
from veriloop.schemas.api import InteractResponse, TaskStatus
from veriloop.schemas.observation import Observation
from veriloop.schemas.usage import Usage, total_usage

Executor = Callable[
    [Action], Observation | Mapping[str, Any] | Awaitable[Observation | Mapping[str, Any]]
]
"""Executes an action on the page and returns the next observation (sync or async)."""


class UnknownTaskError(LookupError):
    """An observation names a task id this agent's checkpointer has never seen."""

    def __init__(self, task_id: str) -> None:
        super().__init__(
            f"unknown task {task_id!r}: send the first observation without task_id to start a task"
        )
        self.task_id = task_id


class TaskFinishedError(RuntimeError):
    """An observation continues a task that is already completed or failed."""

    def __init__(self, task_id: str, status: TaskStatus) -> None:
        super().__init__(f"task {task_id!r} is already {status}; start a new task (no task_id)")
        self.task_id = task_id
        self.status = status


@dataclass
class TaskReport:
    """A task as the checkpointer holds it."""

    task_id: str
    status: TaskStatus
    goal: str
    plan: dict[str, Any] | None
    actions: list[dict[str, Any]] = field(default_factory=list)
    """ActionRecord dumps, in order."""
    verifications: list[dict[str, Any]] = field(default_factory=list)
    """VerificationResult dumps, in order (one per executed action that was verified)."""
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Usage per purpose."""

    @property
    def total_usage(self) -> Usage:
        """Tokens, cost and calls over all purposes."""
        return total_usage(self.usage)


class Agent:
    """A compiled veriloop graph with a checkpointer, driven one observation at a time."""

    def __init__(
        self, checkpointer: BaseCheckpointSaver | None = None, context: Context | None = None
    ) -> None:
        self.checkpointer = checkpointer if checkpointer is not None else InMemorySaver()
        self.context = context or Context()
        self.graph: CompiledStateGraph = build_graph().compile(
            checkpointer=self.checkpointer, name="veriloop"
        )

    # -- one observation ------------------------------------------------------------------------

    def step(self, observation: Observation | Mapping[str, Any]) -> InteractResponse:
        """Verify the previous action on this page and return the next action.

        A step that raises (a provider outage, ...) leaves the task as it was: send it again.
        """
        obs = _observation(observation)
        before = self.graph.get_state(_config(obs.task_id)) if obs.task_id else None
        graph_input, config = _invocation(obs, before.values if before else None)
        try:
            return state_to_response(self.graph.invoke(graph_input, config, context=self.context))
        except BaseException:
            # A failed run still saved its finished nodes' writes: put the old values back on top.
            if before is None:
                self.checkpointer.delete_thread(graph_input["task_id"])
            elif self.graph.get_state(config).config != before.config:
                self.graph.update_state(before.config, None, as_node="__copy__")
            raise

    async def astep(self, observation: Observation | Mapping[str, Any]) -> InteractResponse:
        """Async :meth:`step` (with an async-capable checkpointer: InMemorySaver, AsyncSqliteSaver, ...)."""
        obs = _observation(observation)
        before = await self.graph.aget_state(_config(obs.task_id)) if obs.task_id else None
        graph_input, config = _invocation(obs, before.values if before else None)
        try:
            return state_to_response(
                await self.graph.ainvoke(graph_input, config, context=self.context)
            )
        except BaseException:
            if before is None:
                await self.checkpointer.adelete_thread(graph_input["task_id"])
            elif (await self.graph.aget_state(config)).config != before.config:
                await self.graph.aupdate_state(before.config, None, as_node="__copy__")
            raise

    # -- a whole task -----------------------------------------------------------------------------

    def run(
        self,
        goal: str,
        executor: Executor,
        first_observation: Observation | Mapping[str, Any],
        max_steps: int = 50,
    ) -> TaskReport:
        """Drive a task to completion, failure or ``max_steps`` invocations; ``executor`` (sync) runs each action."""
        reply = self.step(_start(goal, first_observation))
        for _ in range(max_steps - 1):
            if reply.status != "executing":
                break
            reply = self.step(_continue(executor(parse_action(reply.action)), reply.task_id))
        return self.get_task(reply.task_id)

    async def arun(
        self,
        goal: str,
        executor: Executor,
        first_observation: Observation | Mapping[str, Any],
        max_steps: int = 50,
    ) -> TaskReport:
        """Async :meth:`run`; ``executor`` may be sync or async."""
        reply = await self.astep(_start(goal, first_observation))
        for _ in range(max_steps - 1):
            if reply.status != "executing":
                break
            observation = executor(parse_action(reply.action))
            if inspect.isawaitable(observation):
                observation = await observation
            reply = await self.astep(_continue(observation, reply.task_id))
        return await self.aget_task(reply.task_id)

    # -- inspection -------------------------------------------------------------------------------

    def get_task(self, task_id: str) -> TaskReport:
        """Status, plan, action and verification history, and usage of a task."""
        return _report(task_id, self.graph.get_state(_config(task_id)).values)

    async def aget_task(self, task_id: str) -> TaskReport:
        """Async :meth:`get_task`."""
        return _report(task_id, (await self.graph.aget_state(_config(task_id))).values)


def _invocation(
    obs: Observation, values: Mapping[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Graph input and config for ``obs``: a new task without task_id, else a known, unfinished task."""
    if obs.task_id is None:
        task_id = uuid.uuid4().hex
        return observation_to_input(obs, task_id, new_task=True), _config(task_id)
    if not values:
        raise UnknownTaskError(obs.task_id)
    if values.get("status") in ("completed", "failed"):
        raise TaskFinishedError(obs.task_id, values["status"])
    return observation_to_input(obs, obs.task_id, new_task=False), _config(obs.task_id)


def _report(task_id: str, values: Mapping[str, Any] | None) -> TaskReport:
    if not values:
        raise UnknownTaskError(task_id)
    return TaskReport(
        task_id=task_id,
        status=values.get("status", "executing"),
        goal=values.get("goal", ""),
        plan=values.get("plan"),
        actions=list(values.get("action_history") or []),
        verifications=list(values.get("verification_history") or []),
        usage=dict(values.get("usage") or {}),
    )


def _config(task_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": task_id}}


def _observation(value: Observation | Mapping[str, Any]) -> Observation:
    return value if isinstance(value, Observation) else Observation.model_validate(value)


def _start(goal: str, first: Observation | Mapping[str, Any]) -> Observation:
    return _observation(first).model_copy(update={"query": goal, "task_id": None})


def _continue(observation: Observation | Mapping[str, Any], task_id: str) -> Observation:
    return _observation(observation).model_copy(update={"task_id": task_id})
