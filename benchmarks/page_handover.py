"""What handing a step's page work to a page process costs, next to running it in a thread.

On the median-size corpus page with a counter button (the service benchmarks'
page), in one run and interleaved: the observation's page work
(``engines.verification.observe_page``: parse, skeleton, diff, hash,
fingerprint, compact page) awaited (a) in a worker thread, as with
``VERILOOP_PAGE_PROCESSES=0``, and (b) in one page process, as ``veriloop
serve`` runs it; and (c) an empty round trip to the page process. One call at a
time, so this is a lone step's latency, not a busy process's throughput (for
that, ``benchmarks.service_concurrency``).

    python -m benchmarks.page_handover [--calls 30]

Last line: ``RESULT process_over_thread=<median page process / median thread>
empty_round_trip_ms=<median>``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable

from benchmarks.service_overhead import mid_size_page, observation
from veriloop.engines.observation import capture_page_state
from veriloop.engines.verification import observe_page
from veriloop.page_processes import run_in_page_process, shutdown_page_processes

URL = "http://bench.test/page"


async def _ms(call: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


def page_work(html: str) -> tuple:
    """``observe_page``'s arguments for one step on ``html``: the first page, then the next one."""
    before = capture_page_state(URL, observation(html, None, 0)["dom"])
    return (before, observation(html, None, 1)["dom"], URL, None, None, "click(1)")


def yardstick_ms(html: str, calls: int = 15) -> float:
    """Median ms of one step's page work on ``html`` in this thread: the machine's speed, to read
    absolute figures against (about 11 ms on the machine of docs/service.md's first table)."""
    work = page_work(html)
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        observe_page(*work)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def measure(calls: int) -> dict[str, list[float]]:
    name, html = mid_size_page()
    work = page_work(html)
    runs: dict[str, Callable[[], Awaitable[object]]] = {
        "thread": lambda: asyncio.to_thread(observe_page, *work),
        "page process": lambda: run_in_page_process(1, observe_page, *work),
        "empty round trip": lambda: run_in_page_process(1, os.getpid),
    }
    await runs["page process"]()  # start the pool and warm both sides
    await runs["thread"]()
    times: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(calls):
        for label, run in runs.items():
            times[label].append(await _ms(run))
    print(f"page: {name}; {calls} calls each, interleaved, one at a time")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30, help="calls of each kind")
    args = parser.parse_args()
    try:
        times = asyncio.run(measure(args.calls))
    finally:
        shutdown_page_processes()
    medians = {label: statistics.median(values) for label, values in times.items()}
    for label, median in medians.items():
        print(f"{label:17s} p50 {median:7.2f} ms")
    print(
        f"RESULT process_over_thread={medians['page process'] / medians['thread']:.2f} "
        f"empty_round_trip_ms={medians['empty round trip']:.2f}"
    )


if __name__ == "__main__":
    main()
