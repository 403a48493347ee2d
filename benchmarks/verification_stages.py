"""Where the wall time of a verification step goes: the step of
:mod:`benchmarks.verification_overhead` built up stage by stage, each stage's added cost in lxml
parses.

For every ``--every``-th corpus pair, in rounds: a bare ``lxml.html.fromstring`` of the page after
(the unit), then pipelines that each do one stage more than the one before: the page's UTF-8 and
hash with the bounded-markup scan and the parse (and freeing the tree), the skeleton's walk, the
compact page, the observation list (diff, observations, the stored page state) and the whole
``observe_page`` (reading the stored ``before_state``, the fingerprint). Each round starts at
another pipeline, so none always follows the same one (glibc consolidates the chunks a freed tree
leaves at the next large allocation, whoever makes it). CPU time of the thread per call, medians
per page, then medians over pages: a stage's figure is the difference of two pipelines' medians.

Instruction counts say how much work a stage is (:mod:`benchmarks.verification_instructions`);
this says what it costs on the clock, where cache misses and branches count too.

    python -m benchmarks.verification_stages [CORPUS] [--every 2] [--rounds 14]
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import lxml.html
import typer

from benchmarks.verification_pairs import DEFAULT_CORPUS, PAGE_URL, load_pairs
from veriloop.engines.dom_context import compact_tree
from veriloop.engines.observation import build_observation_list, capture_page_state
from veriloop.engines.page_hash import utf8_and_digest
from veriloop.engines.skeleton import carry_background, parse_utf8, skeleton_from_tree
from veriloop.engines.verification import observe_page
from veriloop.schemas.observation import BeforeState

ACTION = "click(5)"


def _pipelines(stored: dict, after: str) -> dict[str, Callable[[], object]]:
    """Each pipeline does what the one before it does and one stage more."""
    before = BeforeState.model_validate(stored)

    def parse() -> object:  # parse_utf8 runs the bounded-markup scan first
        data, _ = utf8_and_digest(after)
        return parse_utf8(data)

    def skeleton() -> object:
        root = parse()
        carry_background(root, before.semantic_skeleton)
        return root, skeleton_from_tree(root)

    def compact() -> object:
        root, found = skeleton()
        return found, compact_tree(root, len(after))

    return {
        "lxml": lambda: lxml.html.fromstring(after),
        "parse": parse,
        "skeleton": skeleton,
        "compact": compact,
        "observations": lambda: build_observation_list(
            before, after, PAGE_URL, None, None, ACTION, keep_compact=True
        ),
        "step": lambda: observe_page(stored, after, PAGE_URL, None, None, ACTION),
    }


def main(
    corpus: Annotated[Path, typer.Argument(help="Folder of *.html pages.")] = DEFAULT_CORPUS,
    every: Annotated[int, typer.Option(min=1, help="Time every n-th corpus pair.")] = 2,
    rounds: Annotated[int, typer.Option(min=1, help="Timed calls per page and pipeline.")] = 14,
) -> None:
    clock = time.thread_time_ns
    ratios: dict[str, list[float]] = {}
    for pair in load_pairs(corpus)[::every]:
        pipelines = _pipelines(capture_page_state(PAGE_URL, pair.before).stored(), pair.after)
        names = list(pipelines)
        times: dict[str, list[int]] = {name: [] for name in names}
        gc.collect()
        for n in range(rounds):
            for name in names[n % len(names) :] + names[: n % len(names)]:
                start = clock()
                pipelines[name]()
                times[name].append(clock() - start)
        unit = statistics.median(times["lxml"])
        for name in names:
            ratios.setdefault(name, []).append(statistics.median(times[name]) / unit)
    medians = {name: statistics.median(values) for name, values in ratios.items()}
    names = list(medians)
    for name, previous in zip(names[1:], names, strict=False):
        print(f"{name}: {medians[name]:.3f} parses, +{medians[name] - medians[previous]:.3f}")
    print("RESULT " + " ".join(f"{name}={medians[name]:.3f}" for name in names[1:]))


if __name__ == "__main__":
    typer.run(main)
