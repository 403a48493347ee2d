"""Cost of one verification step next to a bare parse, on real pages.

For every corpus page, in one run and interleaved: (a) ``lxml.html.fromstring``
of the page after the action, (b) a BeautifulSoup ``html.parser`` parse of it,
(c) the page work of one verification step as the graph performs it
(``observe_page``, what a page process runs): with the ``before_state``
captured outside the timed region and kept as graph state keeps it, read it,
fingerprint the action on it, and build the observation list against the
mutated copy, which from the same parse also yields the copy's
``before_state`` for the next action and its compact page for the next prompt.
Medians of repeated runs per page; ratios per page; medians over pages.

``observation_vs_lxml`` is (c) without the compact page and the fingerprint
(``build_observation_list`` alone), the figure this benchmark timed before
issue 34.

    python -m benchmarks.verification_overhead [CORPUS] [--repeat 5] [--out FILE]
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import lxml.html
import typer
from bs4 import BeautifulSoup

from benchmarks.verification_pairs import DEFAULT_CORPUS, PAGE_URL, RESULTS_DIR, load_pairs
from veriloop.engines.observation import build_observation_list, capture_page_state
from veriloop.engines.verification import observe_page

DEFAULT_OUT = RESULTS_DIR / "verification_overhead.json"
ACTION = "click(5)"


def _median_seconds(repeat: int, fn: Callable[..., object], *args: object) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main(
    corpus: Annotated[Path, typer.Argument(help="Folder of *.html pages.")] = DEFAULT_CORPUS,
    repeat: Annotated[
        int, typer.Option(min=1, help="Timed runs per page and method (BeautifulSoup: at most 3).")
    ] = 5,
    out: Annotated[
        Path, typer.Option(help="Where to write the per-page figures (JSON).")
    ] = DEFAULT_OUT,
) -> None:
    pairs = load_pairs(corpus)
    rows = []
    for pair in pairs:
        before_state = capture_page_state(PAGE_URL, pair.before)
        stored = before_state.stored()
        after = pair.after
        gc.collect()
        step = _median_seconds(repeat, observe_page, stored, after, PAGE_URL, None, None, ACTION)
        observation = _median_seconds(repeat, build_observation_list, before_state, after, PAGE_URL)
        lxml_parse = _median_seconds(repeat, lxml.html.fromstring, after)
        bs4_parse = _median_seconds(min(repeat, 3), BeautifulSoup, after, "html.parser")
        result, _ = observe_page(stored, after, PAGE_URL, None, None, ACTION)
        rows.append(
            {
                "page": pair.name,
                "chars": len(after),
                "elements": result.page_state["skeleton_elements"],
                "mutations": pair.mutations,
                "observations": result.observations,
                "meaningful_content_change": result.meaningful_content_change,
                "lxml_ms": lxml_parse * 1000,
                "bs4_ms": bs4_parse * 1000,
                "step_ms": step * 1000,
                "vs_lxml": step / lxml_parse,
                "observation_vs_lxml": observation / lxml_parse,
                "speedup_vs_bs4": bs4_parse / step,
            }
        )
    vs_lxml = [row["vs_lxml"] for row in rows]
    observation_only = [row["observation_vs_lxml"] for row in rows]
    speedup = [row["speedup_vs_bs4"] for row in rows]
    missed = [row["page"] for row in rows if not row["meaningful_content_change"]]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"corpus": str(corpus), "repeat": repeat, "pages": rows}, indent=1))
    print(f"per-page figures: {out}")
    print(
        f"median ms: lxml={statistics.median(r['lxml_ms'] for r in rows):.2f} "
        f"bs4={statistics.median(r['bs4_ms'] for r in rows):.2f} "
        f"step={statistics.median(r['step_ms'] for r in rows):.2f}; "
        f"pages where the mutations were not seen: {len(missed)}"
    )
    print(
        f"RESULT median_vs_lxml={statistics.median(vs_lxml):.3f} p90_vs_lxml={_percentile(vs_lxml, 90):.3f} "
        f"observation_vs_lxml={statistics.median(observation_only):.3f} "
        f"median_speedup_vs_bs4={statistics.median(speedup):.2f} pages={len(rows)}"
    )


if __name__ == "__main__":
    typer.run(main)
