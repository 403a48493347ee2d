"""Time to answer and peak memory of one service process fed pathological pages and bodies.

One ``veriloop serve`` process (uvicorn on loopback, SQLite, default limits: a 5 MB DOM, a
21 MB body) with the scripted model answering at once. Each case sends a hostile page twice
over HTTP: as a new task (parse, skeleton, page excerpt) and as the next observation of that
task (parse, skeleton diff, verification), and times each answer; the chunked case streams a
400 MB body without a Content-Length and times the 413. Before each case the process's peak
resident set (VmHWM) is reset (``/proc/<pid>/clear_refs``), and read after it.

Side by side in the same run, the cost of the bounded parse on ordinary pages: parsing every
page of the shared corpus with and without :func:`veriloop.engines.markup_guard.bound_markup`
(median ratio per page).

    python -m benchmarks.hostile_input

Targets: every case answers (2xx or 4xx) within 2 s, peak RSS under 1 GB. A case beyond the
brief (200k interactive elements) is reported apart: the skeleton is not bounded for it yet.
Last line: ``RESULT worst_case_seconds=<s> rss_peak_mb=<mb> beyond_brief_worst_seconds=<s>``.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from benchmarks.service_overhead import CORPUS, ServiceProcess, answer
from veriloop.engines.markup_guard import bound_markup
from veriloop.engines.skeleton import _parser, to_utf8
from veriloop.llm.scripted import ANY_PURPOSE, ScriptedModelServer
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR

BUTTON = f'<button {ELEMENT_ID_ATTR}="1">Next ({{n}})</button>'
CHUNKED_MB = 400


def many_attributes(count: int) -> Callable[[int], str]:
    attributes = " ".join(f'data-a{i}="x"' for i in range(count))
    return lambda n: f"<html><body><div {attributes}>hi</div>{BUTTON.format(n=n)}</body></html>"


def nested_divs(depth: int) -> Callable[[int], str]:
    return lambda n: (
        (f"<html><body>{BUTTON.format(n=n)}" + "<div>" * depth + "deep" + "</div>" * depth)
        + "</body></html>"
    )


def text_of(size: int) -> Callable[[int], str]:
    words = "lorem ipsum dolor sit amet " * (size // 27)
    return lambda n: f"<html><body>{BUTTON.format(n=n)}<p>{words}</p></body></html>"


def many_buttons(count: int) -> Callable[[int], str]:
    buttons = "".join(f"<button>b{i}</button>" for i in range(count))
    return lambda n: f"<html><body>{BUTTON.format(n=n)}{buttons}</body></html>"


CASES: dict[str, Callable[[int], str]] = {
    "attributes_40k": many_attributes(40_000),
    "attributes_200k": many_attributes(200_000),
    "nested_divs_400k": nested_divs(400_000),
    "text_5mb": text_of(4_900_000),
    "dom_over_limit_6mb": text_of(6_000_000),
}
BEYOND_THE_BRIEF: dict[str, Callable[[int], str]] = {
    # 200k interactive elements: the skeleton has one descriptor each (not bounded yet).
    "buttons_200k": many_buttons(200_000),
}


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set since the last reset, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def reset_peak_rss(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def page_case(client: httpx.Client, page: Callable[[int], str]) -> list[tuple[int, float]]:
    """(status, seconds) of a new task on the page, then of its next observation."""
    results = []
    body = {"url": "http://bench.test/", "dom": page(0), "query": "Press Next"}
    started = time.perf_counter()
    first = client.post("/api/agent/interact", json=body)
    results.append((first.status_code, time.perf_counter() - started))
    if first.status_code == 200:
        body = {
            "url": "http://bench.test/",
            "dom": page(1),
            "taskId": first.json()["taskId"],
            "clientObservations": {"didDomMutate": True},
        }
        started = time.perf_counter()
        second = client.post("/api/agent/interact", json=body)
        results.append((second.status_code, time.perf_counter() - started))
    return results


async def chunked_case(port: int, megabytes: int) -> tuple[int, float]:
    """Stream ``megabytes`` of JSON with chunked transfer encoding; (status, seconds to the answer)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.perf_counter()
    writer.write(
        b"POST /api/agent/interact HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"x" * 65536
    framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)

    async def send() -> None:
        writer.write(b'1c\r\n{"url": "http://a", "dom": "\r\n')
        for _ in range(megabytes * 16):
            writer.write(framed)
            await writer.drain()

    sender = asyncio.create_task(send())
    status_line = await reader.readline()
    seconds = time.perf_counter() - started
    sender.cancel()
    writer.close()
    return int(status_line.split()[1]), seconds


def guard_overhead() -> tuple[int, float, int]:
    """(pages, median of (guard + parse) / parse, pages the guard changed) over the corpus."""
    from lxml import etree

    ratios, changed = [], 0
    for path in sorted(CORPUS.glob("*.html")):
        data = to_utf8(path.read_bytes())
        changed += bound_markup(data) is not data
        parse = _best(lambda data=data: etree.fromstring(data, _parser()))
        guard = _best(lambda data=data: bound_markup(data))
        ratios.append((parse + guard) / parse)
    return len(ratios), statistics.median(ratios), changed


def _best(run: Callable[[], object], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def _cases(server: ServiceProcess) -> Iterator[tuple[str, list[tuple[int, float]], float]]:
    pid = server.process.pid
    with httpx.Client(base_url=server.url, timeout=600) as client:
        page_case(client, text_of(1000))  # warm-up: the first request of a process loads modules
        for name, page in {**CASES, **BEYOND_THE_BRIEF}.items():
            reset_peak_rss(pid)
            yield name, page_case(client, page), peak_rss_mb(pid)
    reset_peak_rss(pid)
    yield (
        f"chunked_{CHUNKED_MB}mb",
        [asyncio.run(chunked_case(server.port, CHUNKED_MB))],
        peak_rss_mb(pid),
    )


def main() -> None:
    model = ScriptedModelServer().start()
    model.on(ANY_PURPOSE, answer)
    worst_s, rss_peak, beyond = 0.0, 0.0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        server = ServiceProcess(f"sqlite:///{tmp}/bench.sqlite", model.base_url)
        try:
            print(f"{'case':22} {'answers (status seconds)':40} peak RSS")
            for name, answers, rss in _cases(server):
                shown = "  ".join(f"{status} {seconds:6.3f}" for status, seconds in answers)
                print(f"{name:22} {shown:40} {rss:7.0f} MB")
                assert all(200 <= status < 500 for status, _ in answers), (name, answers)
                if name in BEYOND_THE_BRIEF:
                    beyond = max(beyond, *(seconds for _, seconds in answers))
                    continue
                worst_s = max([worst_s, *(seconds for _, seconds in answers)])
                rss_peak = max(rss_peak, rss)
        finally:
            server.stop()
            model.stop()
    pages, ratio, changed = guard_overhead()
    print(
        f"bounded parse on {pages} corpus pages: (guard + parse) / parse, median {ratio:.3f}; "
        f"pages changed by the guard: {changed}"
    )
    print(
        f"RESULT worst_case_seconds={worst_s:.3f} rss_peak_mb={rss_peak:.0f} beyond_brief_worst_seconds={beyond:.3f}"
    )


if __name__ == "__main__":
    main()
