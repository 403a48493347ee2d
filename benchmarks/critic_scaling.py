"""How the plan critic's time grows with a manifest's length: the static review of generated
manifests of 100, 250 and 500 steps, in six shapes, side by side in one run.

Every step is an llm task with one predicate check whose input names each dependency
(``{{id}}``); an agent with a network tool makes some of them flaky, and every tenth step is a
synthesis gate over the ten before it (or none, in ``ungated``). Shapes:

- ``fan``: every step in one level (parallel_explosion and missing_gate fire on it);
- ``chain``: each step needs the one before it, listed backwards (the order a naive levelling
  pass handles one step at a time);
- ``dag``: each step needs up to three seeded earlier ones;
- ``ungated``: ``dag`` without gates, every level's steps reported by missing_gate;
- ``fanin``: ids with a character outside words (``x.1``), the last step needing and naming all
  the others (disconnected_flow looks every one of them up in its input);
- ``agents``: as many agents as steps; every step needs itself (a one-step cycle each) and is
  critical, on one agent of as many tools as steps (optimism_bias) or on an unknown one
  (unknown_agent lists the agents).

Each size is critiqued ``--repeats`` times after one warm-up; the median CPU time counts.

    python -m benchmarks.critic_scaling [--sizes 100,250,500] [--repeats 15]

Last line: ``RESULT critique_ms_500=M per_step_ratio_500_over_100=R``: M the slowest shape's
median CPU milliseconds at the largest size, R the largest ratio over shapes of the large size's
time per step over the small one's (1.0 is linear; a quadratic rule gives about 5).
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Annotated, Any, Literal

import typer

from veriloop.engines.plan.critic import static_review
from veriloop.schemas.manifest import Manifest

Shape = Literal["fan", "chain", "dag", "ungated", "fanin", "agents"]
SHAPES: tuple[Shape, ...] = ("fan", "chain", "dag", "ungated", "fanin", "agents")
GATE_EVERY = 10


def critic_manifest(shape: Shape, n: int, seed: int = 7) -> Manifest:
    """``n`` steps of ``shape`` (see the module docstring)."""
    if shape == "fanin":
        return _fanin_manifest(n)
    if shape == "agents":
        return _agents_manifest(n)
    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    for i in range(n):
        gate = shape != "ungated" and i % GATE_EVERY == GATE_EVERY - 1
        if gate:
            depends = [f"s{j}" for j in range(i - GATE_EVERY + 1, i)]
        elif shape == "chain":
            depends = [f"s{i - 1}"] if i else []
        elif shape in ("dag", "ungated"):
            depends = [f"s{j}" for j in rng.sample(range(i), min(i, rng.randint(0, 3)))]
        else:
            depends = []
        steps.append(
            {
                "id": f"s{i}",
                "type": "synthesis_gate" if gate else "task",
                "executor": "llm",
                "agent": "web" if i % 3 == 0 else "writer",
                "critical": i % 4 == 0,
                "input": f"part {i} from " + " and ".join(f"{{{{{d}}}}}" for d in depends),
                "depends_on": depends,
                "checks": [{"kind": "predicate", "expr": f"len(result) > {i} and 'x' in result"}],
            }
        )
    if shape == "chain":
        steps.reverse()
    return Manifest.model_validate(
        {
            "goal": f"a {shape} of {n} steps",
            "agents": {"web": {"tools": ["web_search"]}, "writer": {"tools": []}},
            "steps": steps,
        }
    )


def _fanin_manifest(n: int) -> Manifest:
    ids = [f"x.{i}" for i in range(n - 1)]
    steps: list[dict[str, Any]] = [{"id": i, "executor": "llm", "input": "part"} for i in ids]
    steps.append(
        {
            "id": "all",
            "executor": "llm",
            "depends_on": ids,
            "input": "combine " + " ".join(f"{{{{{i}}}}}" for i in ids),
        }
    )
    return Manifest.model_validate({"goal": f"a fan-in of {n} steps", "steps": steps})


def _agents_manifest(n: int) -> Manifest:
    hub_tools = [f"web_search{i}" if i % 10 == 0 else f"notes{i}" for i in range(n)]
    agents = {"hub": {"tools": hub_tools}, **{f"a{i}": {"tools": []} for i in range(n)}}
    steps = [
        {
            "id": f"s{i}",
            "executor": "llm",
            "agent": "hub" if i % 2 else f"ghost{i}",
            "critical": True,
            "depends_on": [f"s{i}"],
            "input": f"again from {{{{s{i}}}}}",
        }
        for i in range(n)
    ]
    return Manifest.model_validate({"goal": f"{n} agents", "agents": agents, "steps": steps})


def critique_ms(manifest: Manifest, repeats: int) -> float:
    """The median CPU milliseconds of one static review, after a warm-up (CPU time: on a shared
    machine the wall time also counts the other processes' turns)."""
    static_review(manifest)
    times = []
    for _ in range(repeats):
        start = time.process_time()
        static_review(manifest)
        times.append((time.process_time() - start) * 1000)
    return statistics.median(times)


def main(
    sizes: Annotated[str, typer.Option(help="Comma-separated step counts, smallest first.")] = (
        "100,250,500"
    ),
    repeats: Annotated[int, typer.Option(help="Timed reviews per shape and size.")] = 15,
) -> None:
    counts = [int(size) for size in sizes.split(",")]
    small, large = counts[0], counts[-1]
    print(f"{'shape':8} " + " ".join(f"{f'ms@{n}':>9}" for n in counts) + "  per-step ratio")
    worst_ms, worst_ratio = 0.0, 0.0
    for shape in SHAPES:
        ms = {n: critique_ms(critic_manifest(shape, n), repeats) for n in counts}
        ratio = (ms[large] / large) / (ms[small] / small)
        worst_ms, worst_ratio = max(worst_ms, ms[large]), max(worst_ratio, ratio)
        print(f"{shape:8} " + " ".join(f"{ms[n]:9.1f}" for n in counts) + f"  {ratio:14.2f}")
    print(
        f"RESULT critique_ms_{large}={worst_ms:.1f} "
        f"per_step_ratio_{large}_over_{small}={worst_ratio:.2f}"
    )


if __name__ == "__main__":
    typer.run(main)
