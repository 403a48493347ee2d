"""What confinement costs a step's process: the wall time of starting and finishing a ``true``
step and a 20-test pytest run, with every layer (``sandbox: required``: limits, bubblewrap, the
step's own uid, no capabilities, seccomp, the path allowlist) and without the sandbox (``off``:
the limits only), through the same :func:`run_command` / :func:`run_tests` the plan runs use.

Each case runs ``--repeats`` times after one warm-up, alternating the two modes; the median counts.

    python -m benchmarks.sandbox_overhead [--repeats 15] [--tests 20]

Last line: ``RESULT true_ratio=R true_ms_sandboxed=S true_ms_unsandboxed=U pytest_ratio=R2
pytest_ms_sandboxed=S2 pytest_ms_unsandboxed=U2``: the ratios are sandboxed over unsandboxed.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated

import typer

from veriloop.engines.plan.confinement.process import run_command
from veriloop.engines.plan.confinement.sandbox import LAYERS, Confinement, layers_for
from veriloop.engines.plan.judge.testrun import run_tests

PYTEST = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 pytest -q test_many.py"
"""The test command: without the installed plugins' autoload (one of this venv's waits about 10 s
at each start, sandboxed or not, which would drown the figure this benchmark is for)."""
MODES = {"sandboxed": Confinement(sandbox="required"), "unsandboxed": Confinement(sandbox="off")}


def write_tests(workspace: Path, count: int) -> None:
    """``count`` trivial passing tests in one file."""
    body = "".join(f"def test_{i}():\n    assert {i} == {i}\n\n" for i in range(count))
    (workspace / "test_many.py").write_text(body)


async def median_ms(
    run: Callable[[Confinement], Awaitable[None]], repeats: int
) -> dict[str, float]:
    """The median wall milliseconds of ``run`` in each mode (one warm-up each, modes alternating)."""
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    for round_ in range(repeats + 1):
        for mode, confinement in MODES.items():
            start = time.perf_counter()
            await run(confinement)
            if round_:
                times[mode].append((time.perf_counter() - start) * 1000)
    return {mode: statistics.median(values) for mode, values in times.items()}


async def measure(repeats: int, tests: int) -> dict[str, dict[str, float]]:
    workspace = Path(tempfile.mkdtemp(prefix="veriloop-sandbox-overhead-"))
    try:
        write_tests(workspace, tests)

        async def true_step(confinement: Confinement) -> None:
            run = await run_command("true", workspace, timeout_s=60, confinement=confinement)
            assert run.exit_code == 0, run.output

        async def pytest_run(confinement: Confinement) -> None:
            run = await run_tests(PYTEST, workspace, timeout_s=300, confinement=confinement)
            assert run.ok and run.passed == tests, run.output

        return {
            "true": await median_ms(true_step, repeats),
            "pytest": await median_ms(pytest_run, repeats),
        }
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def main(
    repeats: Annotated[int, typer.Option(min=1, help="Timed runs per case and mode.")] = 15,
    tests: Annotated[int, typer.Option(min=1, help="Tests in the pytest run.")] = 20,
) -> None:
    applied = layers_for(MODES["sandboxed"])
    if applied != LAYERS:
        raise SystemExit(f"not every layer applies here ({', '.join(applied)}): nothing to measure")
    figures = asyncio.run(measure(repeats, tests))
    print(f"{'case':8} {'sandboxed ms':>13} {'unsandboxed ms':>15} {'ratio':>7}")
    result = []
    for case, ms in figures.items():
        ratio = ms["sandboxed"] / ms["unsandboxed"]
        print(f"{case:8} {ms['sandboxed']:13.1f} {ms['unsandboxed']:15.1f} {ratio:7.2f}")
        result += [
            f"{case}_ratio={ratio:.2f}",
            f"{case}_ms_sandboxed={ms['sandboxed']:.1f}",
            f"{case}_ms_unsandboxed={ms['unsandboxed']:.1f}",
        ]
    print("RESULT " + " ".join(result))


if __name__ == "__main__":
    typer.run(main)
