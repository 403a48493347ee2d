"""Plans at scale: a run's checkpoint bytes grow with its length, not its square, and read back
whole; a user's wide level runs bounded by its concurrency instead of being rejected."""

from __future__ import annotations

import asyncio

import aiosqlite
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from plan_testkit import manifest, py_step

from benchmarks.plan_scaling import plan_manifest, sqlite_bytes
from benchmarks.plan_steps import work
from veriloop.context import PlanContext
from veriloop.graph.plan import build_plan_graph
from veriloop.plans import PlanRunner


def test_a_chain_stores_bytes_in_proportion_to_its_length_and_reads_back_whole(tmp_path):
    # The database lives outside the workspace: a file the runner writes there while steps run
    # would be a change outside every step's scope.
    (tmp_path / "workspace").mkdir()
    context = PlanContext(workspace=str(tmp_path / "workspace"), review_critical_steps=False)

    async def chain(n: int):
        path = tmp_path / f"chain{n}.sqlite"
        async with aiosqlite.connect(path) as conn:
            runner = PlanRunner(
                checkpointer=AsyncSqliteSaver(conn), context=context, tools={"work": work}
            )
            report = await runner.arun(manifest=plan_manifest("chain", n), run_id="chain")
            stored = await sqlite_bytes(conn, "chain")
        # Another connection (another process, a resume) rebuilds the results from the deltas.
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            again = await PlanRunner(checkpointer=saver, context=context).areport("chain")
        return report, again, stored

    small, again_small, small_bytes = asyncio.run(chain(20))
    large, again_large, large_bytes = asyncio.run(chain(200))
    assert small.status == large.status == "completed"
    assert list(large.steps) == [f"s{i}" for i in range(200)]
    assert again_small == small and again_large == large
    # Each checkpoint stores what its superstep changed: 10 times the steps, about 10 times the
    # bytes (a whole copy of the results every RESULTS_SNAPSHOT_EVERY updates adds a little).
    # Storing every result so far in every checkpoint made this ratio about 65.
    assert large_bytes <= 1.5 * 10 * small_bytes, (small_bytes, large_bytes)


def test_a_users_wide_level_runs_bounded_by_its_concurrency(runner):
    wide = manifest(*(py_step(f"p{i}", "slow") for i in range(25)))
    report = runner().run(wide, concurrency=8)
    assert report.status == "completed"
    assert all(len(step.attempts) == 1 for step in report.steps.values())
    (explosion,) = [f for f in report.critique.findings if f.rule == "parallel_explosion"]
    assert explosion.severity == "warning"


def test_the_parallel_limit_comes_from_the_context(runner):
    wide = manifest(*(py_step(f"p{i}") for i in range(12)))
    report = runner(max_parallel_steps=12).run(wide)
    assert "parallel_explosion" not in {f.rule for f in report.critique.findings}


def test_a_wide_level_runs_in_batches_of_four_a_slot(tools, tmp_path):
    graph = build_plan_graph().compile(checkpointer=InMemorySaver())
    wide = manifest(*(py_step(f"p{i}") for i in range(20)))

    def batches(lane_steps: int) -> list[tuple[list[str], list[str]]]:
        config = {"configurable": {"thread_id": f"wide-{lane_steps}"}, "max_concurrency": 2}
        context = PlanContext(
            workspace=str(tmp_path), tools=tools, review_critical_steps=False, lane_steps=lane_steps
        )
        found = [
            (
                [s for lane in update["dispatch"]["lanes"] for s in lane],
                update["dispatch"]["window"],
            )
            for update in graph.stream(
                {"run_id": "wide", "manifest": wide}, config, context=context
            )
            if "dispatch" in update
        ]
        assert graph.get_state(config).values["status"] == "completed"
        return found

    # Four steps a slot (nodes/plan/dispatch.BATCH_PER_SLOT), in manifest order.
    sent = batches(1)
    assert [len(lanes) for lanes, _ in sent] == [8, 8, 4, 0]
    assert [s for lanes, _ in sent for s in lanes] == [f"p{i}" for i in range(20)]
    # In lanes, the batch's window holds as many more, each taken by a lane as it ends.
    ids = [f"p{i}" for i in range(20)]
    assert batches(16) == [(ids[:8], ids[8:16]), (ids[16:], []), ([], [])]


def test_the_rest_of_a_split_level_shares_a_batch_with_the_next_levels_ready_steps(tools, tmp_path):
    graph = build_plan_graph().compile(checkpointer=InMemorySaver())
    # Ten independent steps, each with one dependent: batches of 8 (four a slot, two slots).
    split = manifest(
        *(py_step(f"p{i}") for i in range(10)),
        *(py_step(f"d{i}", depends_on=[f"p{i}"]) for i in range(10)),
    )

    def batches(lane_steps: int) -> list[list[list[str]]]:
        config = {"configurable": {"thread_id": f"split-{lane_steps}"}, "max_concurrency": 2}
        context = PlanContext(
            workspace=str(tmp_path), tools=tools, review_critical_steps=False, lane_steps=lane_steps
        )
        run = {"run_id": "split", "manifest": split}
        return [
            (update["dispatch"]["lanes"], update["dispatch"]["window"])
            for update in graph.stream(run, config, context=context)
            if "dispatch" in update
        ]

    # Lanes of one step: p8 and p9 do not run alone; d0..d5, whose dependencies finished, fill
    # their batch.
    assert batches(1) == [
        ([[f"p{i}"] for i in range(8)], []),
        ([["p8"], ["p9"], *([f"d{i}"] for i in range(6))], []),
        ([[f"d{i}"] for i in range(6, 10)], []),
        ([], []),
    ]
    # In lanes, each d runs right after its p; p8 and p9 and their dependents are the window, taken
    # by lanes as they end: one batch.
    assert batches(16) == [
        ([[f"p{i}", f"d{i}"] for i in range(8)], ["p8", "p9", "d8", "d9"]),
        ([], []),
    ]
    for lane_steps in (1, 16):
        config = {"configurable": {"thread_id": f"split-{lane_steps}"}}
        assert graph.get_state(config).values["status"] == "completed"
