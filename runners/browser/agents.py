"""The agent as the browser runner sees it: one observation in, one answer out, in process or over HTTP."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import httpx

from veriloop.agent import Agent
from veriloop.context import Context
from veriloop.llm.base import LLMUnavailable
from veriloop.schemas.api import InteractRequest, InteractResponse
from veriloop.schemas.observation import Observation
from veriloop.schemas.usage import Usage, total_usage

INTERACT_PATH = "/api/agent/interact"
TASK_PATH = "/api/tasks/{task_id}"


class AgentError(RuntimeError):
    """The agent gave no answer (model provider down, service error); the task is unchanged."""


@dataclass(frozen=True)
class AgentTurn:
    """One answer and what it cost."""

    response: InteractResponse
    usage: dict[str, dict] = field(default_factory=dict)
    """This turn's usage per purpose (add_usage-shaped); empty when the agent does not report it."""
    agent_ms: float = 0.0
    """Wall time of the whole turn (graph, engines, model calls, transport)."""
    model_ms: float | None = None
    """Time spent waiting for the model (the usage's latency_ms)."""


class UsageMeter:
    """Turns a task's cumulative usage (as the agent reports it) into each turn's own usage."""

    def __init__(self) -> None:
        self.so_far: dict[str, dict] = {}

    def turn(
        self,
        response: InteractResponse,
        cumulative: dict[str, dict],
        agent_ms: float,
        *,
        continuing: bool,
    ) -> AgentTurn:
        """The turn that answered ``response``; ``continuing`` is False for a task's first turn."""
        usage = usage_delta(self.so_far if continuing else {}, cumulative)
        self.so_far = cumulative
        return AgentTurn(
            response=response,
            usage=usage,
            agent_ms=agent_ms,
            model_ms=total_usage(usage).latency_ms,
        )


class AgentClient(Protocol):
    def step(self, observation: Observation) -> AgentTurn:
        """Answer one observation; raise :class:`AgentError` when no answer can be had."""
        ...


class InProcessAgent:
    """The graph in this process (:class:`veriloop.agent.Agent`); usage read from the task's checkpoint."""

    def __init__(self, agent: Agent | None = None, *, context: Context | None = None) -> None:
        self.agent = agent or Agent(context=context)
        self._meter = UsageMeter()

    def step(self, observation: Observation) -> AgentTurn:
        started = time.perf_counter()
        try:
            response = self.agent.step(observation)
        except LLMUnavailable as exc:
            raise AgentError(f"model provider unavailable: {exc}") from exc
        elapsed = (time.perf_counter() - started) * 1000
        usage = self.agent.get_task(response.task_id).usage
        return self._meter.turn(
            response, usage, elapsed, continuing=observation.task_id is not None
        )


class HttpAgent:
    """A running veriloop service: POST /api/agent/interact per observation.

    Tokens come from the task's own record (``GET /api/tasks/{taskId}``): this
    turn's usage is the difference from the previous turn's.
    """

    def __init__(
        self,
        server_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 180.0,
        client: httpx.Client | None = None,
    ) -> None:
        self.server_url = server_url.rstrip("/")
        headers = {"X-API-Key": api_key} if api_key else {}
        self._client = client or httpx.Client(timeout=timeout_s, headers=headers)
        self._meter = UsageMeter()

    def close(self) -> None:
        self._client.close()

    def step(self, observation: Observation) -> AgentTurn:
        body = InteractRequest.model_validate(observation.model_dump()).to_wire()
        started = time.perf_counter()
        reply = self._request("POST", INTERACT_PATH, json=body)
        elapsed = (time.perf_counter() - started) * 1000
        response = InteractResponse.model_validate(reply.json())
        detail = self._request("GET", TASK_PATH.format(task_id=response.task_id)).json()
        usage = detail.get("usage") or {}
        return self._meter.turn(
            response, usage, elapsed, continuing=observation.task_id is not None
        )

    def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            reply = self._client.request(method, self.server_url + path, **kwargs)
        except httpx.HTTPError as exc:
            raise AgentError(f"veriloop service at {self.server_url} unreachable: {exc}") from exc
        if reply.status_code >= 400:
            raise AgentError(
                f"veriloop service answered {method} {path} with HTTP {reply.status_code}: {reply.text[:300]}"
            )
        return reply


def usage_delta(before: dict[str, dict], after: dict[str, dict]) -> dict[str, dict]:
    """Per-purpose usage added between two cumulative totals (purposes that did not move are left out)."""
    delta: dict[str, dict] = {}
    for purpose, now in after.items():
        then = Usage.model_validate(before.get(purpose, {}))
        now_usage = Usage.model_validate(now)
        if now_usage.calls != then.calls or now_usage.input_tokens != then.input_tokens:
            delta[purpose] = (now_usage - then).model_dump()
    return delta
