"""Time to answer and peak memory of one service process fed pathological pages, bodies and manifests.

One ``veriloop serve`` process (uvicorn on loopback, SQLite, default limits: a 5 MB DOM, a
21 MB body, 500 manifest steps) with the scripted model answering at once. Each page case sends a
hostile page twice over HTTP: as a new task (parse, skeleton, page excerpt) and as the next
observation of that task (parse, skeleton diff, verification), and times each answer; the chunked
case streams a 400 MB body without a Content-Length and times the 413. Each manifest case posts a
plan run (an alias bomb, 10,000 nested lists as text and as JSON, a 1,500-level YAML block, a
900-level object, 1,000 chained shell steps, a step printing 200 MB) and reads its report until
the run stops: every answer is timed, and a run still ``running`` when no process executes it is
a failure. Before each case the process's peak resident set (VmHWM) is reset
(``/proc/<pid>/clear_refs``), and read after it.

Side by side in the same run, the cost of the bounded parse on ordinary pages: parsing every
page of the shared corpus with and without :func:`veriloop.engines.markup_guard.bound_markup`
(median ratio per page); skipped, saying where it looked, when the corpus is not there.

    python -m benchmarks.hostile_input           # everything
    python -m benchmarks.hostile_input --quick   # the manifest cases and a small page (a smoke run)

Targets: every case answers (2xx or 4xx) within 2 s, peak RSS under 1 GB. A case beyond the
brief (200k interactive elements) is reported apart: the skeleton is not bounded for it yet.
Last line: ``RESULT worst_case_seconds=<s> rss_peak_mb=<mb> beyond_brief_worst_seconds=<s>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from benchmarks.hostile_manifests import (
    alias_bomb,
    chained_shell_steps,
    huge_output,
    nested_lists,
    nested_objects,
    yaml_block,
)
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


# -- manifests: each case is the body of POST /api/plans, as JSON text ----------------------

MANIFEST_CASES: dict[str, str] = {
    "manifest_alias_bomb": json.dumps({"manifest": alias_bomb()}),
    "manifest_lists_10k_text": json.dumps({"manifest": nested_lists(10_000)}),
    "manifest_lists_10k_json": f'{{"manifest": {nested_lists(10_000)}}}',
    "manifest_yaml_block_1500": json.dumps({"manifest": yaml_block(1500)}),
    "manifest_object_900": f'{{"manifest": {nested_objects(900)}}}',
    "manifest_1000_shell_steps": json.dumps({"manifest": chained_shell_steps(1000)}),
    "manifest_step_output_200mb": json.dumps({"manifest": huge_output(200)}),
}
"""Body of POST /api/plans (JSON text: a 10,000-level object is sent as written, never built)."""
RUN_WAIT_S = 60


def manifest_case(client: httpx.Client, body: str) -> list[tuple[int, float]]:
    """(status, seconds) of the POST, then of every report GET until no process executes the run.

    A run left ``running`` once nothing executes it (stuck) is a 500 in the list.
    """
    started = time.perf_counter()
    posted = client.post("/api/plans", content=body, headers={"Content-Type": "application/json"})
    results = [(posted.status_code, time.perf_counter() - started)]
    if posted.status_code != 202:
        return results
    run_id = posted.json()["runId"]
    deadline = time.monotonic() + RUN_WAIT_S
    while time.monotonic() < deadline:
        started = time.perf_counter()
        report = client.get(f"/api/plans/{run_id}")
        results.append((report.status_code, time.perf_counter() - started))
        if report.status_code != 200 or not report.json()["executing"]:
            break
        time.sleep(0.2)
    if report.status_code == 200 and report.json()["status"] == "running":
        results.append((500, 0.0))  # stuck: nothing executes it, and it never ended
    return results


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


def guard_overhead(pages: list[Path]) -> tuple[float, int]:
    """(median of (guard + parse) / parse, pages the guard changed) over ``pages``."""
    from lxml import etree

    ratios, changed = [], 0
    for path in pages:
        data = to_utf8(path.read_bytes())
        changed += bound_markup(data) is not data
        parse = _best(lambda data=data: etree.fromstring(data, _parser()))
        guard = _best(lambda data=data: bound_markup(data))
        ratios.append((parse + guard) / parse)
    return statistics.median(ratios), changed


def _best(run: Callable[[], object], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def _cases(
    server: ServiceProcess, quick: bool
) -> Iterator[tuple[str, list[tuple[int, float]], float]]:
    pid = server.process.pid
    pages = {"text_100kb": text_of(100_000)} if quick else {**CASES, **BEYOND_THE_BRIEF}
    with httpx.Client(base_url=server.url, timeout=600) as client:
        page_case(client, text_of(1000))  # warm-up: the first request of a process loads modules
        for name, page in pages.items():
            reset_peak_rss(pid)
            yield name, page_case(client, page), peak_rss_mb(pid)
        for name, body in MANIFEST_CASES.items():
            reset_peak_rss(pid)
            yield name, manifest_case(client, body), peak_rss_mb(pid)
    if quick:
        return
    reset_peak_rss(pid)
    yield (
        f"chunked_{CHUNKED_MB}mb",
        [asyncio.run(chunked_case(server.port, CHUNKED_MB))],
        peak_rss_mb(pid),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="the manifest cases and one small page"
    )
    quick = parser.parse_args().quick
    model = ScriptedModelServer().start()
    model.on(ANY_PURPOSE, answer)
    worst_s, rss_peak, beyond = 0.0, 0.0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["VERILOOP_WORKSPACE"] = tmp  # where the manifest cases' shell steps run
        # The operator lets plans run shell steps (sandboxed), so the huge-output case runs.
        os.environ["VERILOOP_PLAN_SHELL"] = "sandboxed"
        server = ServiceProcess(f"sqlite:///{tmp}/bench.sqlite", model.base_url)
        try:
            print(f"{'case':28} {'answers (status seconds)':40} peak RSS")
            for name, answers, rss in _cases(server, quick):
                shown = "  ".join(f"{status} {seconds:6.3f}" for status, seconds in answers[:4])
                more = f" (+{len(answers) - 4})" if len(answers) > 4 else ""
                print(f"{name:28} {shown + more:40} {rss:7.0f} MB")
                assert all(200 <= status < 500 for status, _ in answers), (name, answers)
                if name in BEYOND_THE_BRIEF:
                    beyond = max(beyond, *(seconds for _, seconds in answers))
                    continue
                worst_s = max([worst_s, *(seconds for _, seconds in answers)])
                rss_peak = max(rss_peak, rss)
        finally:
            server.stop()
            model.stop()
    pages = sorted(CORPUS.glob("*.html"))
    if not pages:
        print(
            f"bounded parse on corpus pages: skipped, no *.html in {CORPUS} (the page corpus "
            "beside the checkout, ../shared/corpus/html; set VERILOOP_CORPUS_HTML to another folder)"
        )
    elif not quick:
        ratio, changed = guard_overhead(pages)
        print(
            f"bounded parse on {len(pages)} corpus pages: (guard + parse) / parse, median "
            f"{ratio:.3f}; pages changed by the guard: {changed}"
        )
    print(
        f"RESULT worst_case_seconds={worst_s:.3f} rss_peak_mb={rss_peak:.0f} beyond_brief_worst_seconds={beyond:.3f}"
    )


if __name__ == "__main__":
    main()
