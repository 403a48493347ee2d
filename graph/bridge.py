"""One async implementation per model-calling node, usable from both LangGraph entry points.

``graph.ainvoke``/``astream`` (the service, ``Agent.astep``, LangServe, Studio)
await the node's coroutine on the caller's event loop, so a process holds as
many tasks in flight as clients send. ``graph.invoke`` (``Agent.step``, the
Playwright runner, notebooks) runs nodes synchronously; there the same
coroutine runs on one long-lived bridge loop in a daemon thread. One loop, not
``asyncio.run`` per node: the model client keeps one ``AsyncOpenAI`` per event
loop, and a fresh loop per call was measured at ~38 ms of client set-up (the SSL
context) on top of every model call, and loses keep-alive.

The nodes that only reshape state (:func:`on_loop`) run on the event loop under
``ainvoke`` as well, instead of in LangGraph's thread pool.

Both give LangGraph a :class:`NodeBodies`: the two bodies and nothing else. ``RunnableLambda``
(langchain-core's runnable for a sync and an async body) opened a callback run around every
call, ~0.2 ms each, five nodes a step; LangGraph already opens one for every task. Routers
likewise reach it as :class:`Router`: LangGraph wraps a plain routing function in a traced
runnable, ~0.4 ms a call, about four a step.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.runtime import Runtime, get_runtime

from veriloop.context import Context
from veriloop.graph.state import State

R = TypeVar("R")
Node = Callable[[State, Runtime[Context]], Awaitable[dict]]

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def run_sync(coroutine: Coroutine[Any, Any, R]) -> R:
    """Run ``coroutine`` on the bridge loop and wait for it (never call this on the bridge loop itself)."""
    return asyncio.run_coroutine_threadsafe(coroutine, _bridge_loop()).result()


class NodeBodies(Runnable[State, dict]):
    """A graph node's sync body (``invoke``) and async body (``ainvoke``), called as they are."""

    def __init__(
        self, name: str, run: Callable[[State], dict], arun: Callable[[State], Awaitable[dict]]
    ) -> None:
        self.name = name
        self._run = run
        self._arun = arun

    def invoke(self, input: State, config: RunnableConfig | None = None, **kwargs: Any) -> dict:
        return self._run(input)

    async def ainvoke(
        self, input: State, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict:
        return await self._arun(input)


def sync_and_async(node: Node) -> NodeBodies:
    """The node as a runnable whose sync body drives the async one (see the module docstring)."""

    async def arun(state: State) -> dict:
        return await node(state, get_runtime(Context))

    def run(state: State) -> dict:
        # The runtime is read here: the bridge loop's thread does not carry the run's config.
        return run_sync(node(state, get_runtime(Context)))

    return NodeBodies(node.__name__, run, arun)


def sync_and_async_twins(
    node: Callable[[State, Runtime[Context]], dict], anode: Node
) -> NodeBodies:
    """A node written twice, ``(state, runtime)`` each: ``node`` for ``invoke``, ``anode`` for
    ``ainvoke`` (for a node that must call a graph the way it was itself called)."""

    def run(state: State) -> dict:
        return node(state, get_runtime(Context))

    async def arun(state: State) -> dict:
        return await anode(state, get_runtime(Context))

    return NodeBodies(anode.__name__, run, arun)


def on_loop(node: Callable[..., dict]) -> NodeBodies:
    """A node ``(state)`` or ``(state, runtime)`` that only reshapes state (no model call, no page
    work) as a runnable that runs on the event loop under ``ainvoke``, where LangGraph would hand a
    sync node to its thread pool: the hop there and back cost more than the node's own work. Under
    ``invoke`` it runs as itself."""
    if "runtime" in inspect.signature(node).parameters:

        def run(state: State) -> dict:
            return node(state, get_runtime(Context))

    else:
        run = node

    async def arun(state: State) -> dict:
        return run(state)

    return NodeBodies(node.__name__, run, arun)


class Router(RunnableLambda):
    """A routing function ``(state)`` or ``(state, runtime)``, called as it is.

    A ``RunnableLambda``, so LangGraph still reads the function's ``Literal`` return type for
    the graph's edges (Studio draws them); its calls skip the callback run."""

    def __init__(self, route: Callable[..., Any]) -> None:
        super().__init__(route, name=route.__name__)
        self._with_runtime = "runtime" in inspect.signature(route).parameters

    def invoke(self, input: State, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if not self._with_runtime:
            return self.func(input)
        # LangGraph routes outside the node's config context: make this run's config current.
        token = var_child_runnable_config.set(config)
        try:
            return self.func(input, get_runtime(Context))
        finally:
            var_child_runnable_config.reset(token)

    async def ainvoke(
        self, input: State, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        return self.invoke(input, config)


def _bridge_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(
                target=_loop.run_forever, name="veriloop-sync-bridge", daemon=True
            ).start()
        return _loop
