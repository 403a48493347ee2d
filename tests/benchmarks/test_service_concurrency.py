"""The service benchmark's own arithmetic: where a step's time went, from client times and model spans."""

from __future__ import annotations

import math

from benchmarks.service_concurrency import Round, StepTime, step_waits
from veriloop.llm.scripted import ScriptedRequest, Span


def span(tab: int, start: float, end: float) -> Span:
    goal = f"User goal: Press Next ten times (tab {tab})"
    request = ScriptedRequest(
        purpose="action",
        schema_name=None,
        response_format_type=None,
        messages=[{"role": "user", "content": goal}],
        body={},
        headers={},
    )
    return Span(request, start, end)


def test_side_by_side_calls_count_once_and_the_rest_is_queueing():
    steps = [StepTime(1, 0, 0.0, 3.0), StepTime(1, 1, 3.0, 7.0), StepTime(12, 1, 3.0, 6.0)]
    spans = [
        span(1, 0.5, 2.9),  # the first step: not counted
        # tab 1, step 1: a verdict beside refinement, then the action; 1 s before, 1.5 s after
        span(1, 4.0, 5.0),
        span(1, 4.1, 4.5),
        span(1, 4.6, 5.5),
        span(1, 5.5, 5.5),
        # tab 12, step 1 (tab 1's pattern must not take it): one call
        span(12, 3.5, 5.0),
    ]
    waits = step_waits(steps, spans, first=False)
    assert waits.latency_s == 3.5  # median of 4.0 and 3.0
    assert waits.model_s == (1.5 + 1.5) / 2
    assert waits.before_model_s == (1.0 + 0.5) / 2
    assert waits.after_model_s == (1.5 + 1.0) / 2
    assert waits.slowest_s == 4.0
    first = step_waits(steps, spans, first=True)
    assert (first.latency_s, first.model_s, first.before_model_s) == (3.0, 2.4, 0.5)
    assert first.after_model_s == 3.0 - 2.9


def test_one_step_tasks_have_no_later_steps():
    waits = step_waits([StepTime(0, 0, 0.0, 1.0)], [span(0, 0.1, 0.9)], first=False)
    assert math.isnan(waits.latency_s)


def test_cpu_a_step_counts_every_step_of_every_task_and_splits_off_the_page_processes():
    nothing = step_waits([], [], first=False)
    result = Round(
        "sqlite x1", 100, 12.0, 1500, 100, 1.0, 11, 9.0, 3.0, 5, 1.0, (), nothing, nothing, 1
    )
    assert result.cpu_ms_per_step == 9.0 * 1000 / 500
    assert result.serving_cpu_ms_per_step == 6.0 * 1000 / 500
