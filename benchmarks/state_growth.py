"""Checkpoint bytes written and read per step, as a task gets longer.

One task on the median-size page of the shared HTML corpus (with a counter
button, so every step is a real verification plus a real next action), 40
steps against the scripted loopback model answering instantly; the
checkpointer's serializer counts the bytes it writes during each step (every
channel whose value changed, as the PostgreSQL saver stores them, plus pending
writes). Bounded task state means step 40 writes about what step 5 writes.

Writing less can cost reading more: a history kept as deltas is rebuilt on
every load from the checkpoints since its last snapshot, and the SQLite saver
(the service's default) deserializes each of those whole. So the same task runs
again on ``AsyncSqliteSaver`` under ``ainvoke``, as the service runs it, and the
benchmark prints the bytes each step deserializes and the CPU time that takes,
averaged over steps 2-10 and over the last ten.

    python -m benchmarks.state_growth [--steps 40]

Last line: ``RESULT step40_over_step5=<bytes written at step 40 / at step 5>``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from benchmarks.service_overhead import answer, mid_size_page, observation
from veriloop.graph.builder import build_graph
from veriloop.graph.io import observation_to_input, state_to_response
from veriloop.llm.scripted import ANY_PURPOSE, ScriptedModelServer
from veriloop.schemas.api import InteractRequest


class CountingSerializer(JsonPlusSerializer):
    """The default serializer, counting the bytes of everything it serializes and deserializes."""

    written = 0
    read = 0
    loading_s = 0.0

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        kind, data = super().dumps_typed(obj)
        self.written += len(data)
        return kind, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.read += len(data[1])
        started = time.process_time()
        try:
            return super().loads_typed(data)
        finally:
            self.loading_s += time.process_time() - started


def bytes_per_step(html: str, steps: int) -> list[int]:
    """Bytes the checkpointer serialized during each step of one task (one checkpoint per run)."""
    serde = CountingSerializer()
    graph = build_graph().compile(checkpointer=InMemorySaver(serde=serde))
    task_id, written = "growth", []
    for n in range(steps):
        request = InteractRequest.model_validate(observation(html, task_id if n else None, n))
        serde.written = 0
        values = graph.invoke(
            observation_to_input(request, task_id, new_task=n == 0),
            {"configurable": {"thread_id": task_id}},
            durability="exit",
        )
        written.append(serde.written)
        if state_to_response(values).status != "executing":
            raise SystemExit(f"the task ended at step {n + 1}")
    return written


@dataclass
class Loads:
    """Per step of one task on SQLite: the bytes it deserialized and the CPU seconds that took."""

    read: list[int] = field(default_factory=list)
    loading_s: list[float] = field(default_factory=list)


async def sqlite_steps(html: str, steps: int) -> Loads:
    """Run one task of ``steps`` steps on a SQLite file, as the service does (ainvoke, saved at exit)."""
    serde, loads = CountingSerializer(), Loads()
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncSqliteSaver.from_conn_string(f"{tmp}/growth.sqlite") as saver:
            saver.serde = serde
            graph = build_graph().compile(checkpointer=saver)
            task_id = "growth"
            for n in range(steps):
                request = InteractRequest.model_validate(
                    observation(html, task_id if n else None, n)
                )
                serde.read, serde.loading_s = 0, 0.0
                await graph.ainvoke(
                    observation_to_input(request, task_id, new_task=n == 0),
                    {"configurable": {"thread_id": task_id}},
                    durability="exit",
                )
                loads.read.append(serde.read)
                loads.loading_s.append(serde.loading_s)
    return loads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="steps of the task (at least 11)")
    args = parser.parse_args()
    if args.steps < 11:  # the figures compare step 5 with the last ten steps after step 10
        parser.error("--steps must be at least 11")
    name, html = mid_size_page()
    print(f"page: {name} ({len(html.encode()) / 1024:.0f} kB); {args.steps} steps")
    model = ScriptedModelServer().start()
    model.on(ANY_PURPOSE, answer)
    os.environ.update(OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="bench")
    try:
        written = bytes_per_step(html, args.steps)
        loads = asyncio.run(sqlite_steps(html, args.steps))
    finally:
        model.stop()
    for step in (1, 2, 5, 10, 20, args.steps):
        if step <= len(written):
            print(
                f"step {step:3d}: {written[step - 1]:8d} bytes written, "
                f"{loads.read[step - 1]:9d} bytes read on SQLite"
            )
    early, late = slice(1, 10), slice(max(10, args.steps - 10), args.steps)
    # A step that stores a history whole writes more than one between: show both.
    print(
        f"bytes written, last ten steps over step 5: mean "
        f"{statistics.mean(written[late]) / written[4]:.2f}, max {max(written[late]) / written[4]:.2f}"
    )
    read = [statistics.mean(loads.read[part]) / 1024 for part in (early, late)]
    cpu = [statistics.mean(loads.loading_s[part]) * 1000 for part in (early, late)]
    print(
        f"SQLite, steps 2-10 -> last ten: {read[0]:.0f} -> {read[1]:.0f} kB deserialized a step, "
        f"{cpu[0]:.1f} -> {cpu[1]:.1f} ms of CPU doing it"
    )
    print(f"RESULT step{args.steps}_over_step5={written[args.steps - 1] / written[4]:.2f}")


if __name__ == "__main__":
    main()
