"""Checkpoint bytes written per step, as a task gets longer.

One task on the median-size page of the shared HTML corpus (with a counter
button, so every step is a real verification plus a real next action), 40
steps against the scripted loopback model answering instantly; the
checkpointer's serializer counts the bytes it writes during each step (every
channel whose value changed, as the PostgreSQL saver stores them, plus pending
writes). Bounded task state means step 40 writes about what step 5 writes.

    python -m benchmarks.state_growth [--steps 40]

Last line: ``RESULT step40_over_step5=<bytes written at step 40 / at step 5>``.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from benchmarks.service_overhead import answer, mid_size_page, observation
from veriloop.graph.builder import build_graph
from veriloop.graph.io import observation_to_input, state_to_response
from veriloop.llm.scripted import ANY_PURPOSE, ScriptedModelServer
from veriloop.schemas.api import InteractRequest


class CountingSerializer(JsonPlusSerializer):
    """The default serializer, counting the bytes of everything it serializes."""

    written = 0

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        kind, data = super().dumps_typed(obj)
        self.written += len(data)
        return kind, data


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    name, html = mid_size_page()
    print(f"page: {name} ({len(html.encode()) / 1024:.0f} kB); {args.steps} steps")
    model = ScriptedModelServer().start()
    model.on(ANY_PURPOSE, answer)
    os.environ.update(OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="bench")
    try:
        written = bytes_per_step(html, args.steps)
    finally:
        model.stop()
    for step in (1, 2, 5, 10, 20, args.steps):
        if step <= len(written):
            print(f"step {step:3d}: {written[step - 1]:8d} bytes written")
    print(f"RESULT step{args.steps}_over_step5={written[args.steps - 1] / written[4]:.2f}")


if __name__ == "__main__":
    main()
