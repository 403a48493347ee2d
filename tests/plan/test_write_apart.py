"""Steps that may change the same files never run at the same time, so a step's diff holds its own
writes only; steps with disjoint ``writes:`` (or none) still run side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apart_steps
from hypothesis import given
from hypothesis import strategies as st
from langgraph.checkpoint.memory import InMemorySaver
from plan_testkit import manifest as plan_manifest

from veriloop.context import PlanContext
from veriloop.engines.plan.judge.scope import matches
from veriloop.engines.plan.policy import WriteClaims, apart, write_globs
from veriloop.plans import PlanRunner
from veriloop.schemas.manifest import AgentSpec, Manifest, ManifestStep


def _step(**fields: Any) -> ManifestStep:
    return ManifestStep.model_validate({"id": "s", "executor": "python", **fields})


def test_what_a_step_may_change_for_scheduling() -> None:
    reader = AgentSpec(prompt="read", tools=["read_file", "list_files"])
    writer = AgentSpec(prompt="write", tools=["read_file", "write_file"])
    assert write_globs(_step(), None) is None  # the default scope: any path, as far as others know
    assert write_globs(_step(writes=["src/a.py"]), None) == ["src/a.py"]
    assert write_globs(_step(writes=[]), None) == []
    assert write_globs(_step(writes=["src/a.py"], writes_tests=True), None) is None
    assert write_globs(_step(type="human_review", executor="llm"), None) == []
    llm = {"executor": "llm", "agent": "x"}
    assert write_globs(_step(**llm), reader) == []
    assert write_globs(_step(**llm), writer) is None
    assert write_globs(_step(**llm), None) is None


def test_claims_admit_only_steps_that_share_no_path() -> None:
    claims = WriteClaims()
    assert claims.admits(None)
    claims.claim(["src/a/*.py"])
    assert claims.admits(["src/b/*.py"]) and claims.admits(["docs/**"]) and claims.admits([])
    assert not claims.admits(["src/a/x.py"])  # a path the claimed glob matches
    assert not claims.admits(["src/*"])  # a glob that matches the claimed paths
    assert not claims.admits(["**/*.py"])
    assert not claims.admits(None)
    claims.claim(None)
    assert not claims.admits(["elsewhere.txt"]) and claims.admits([])


_segment = st.sampled_from(["a", "b", "ab", "x.py", "*", "**", "?", "*.py", "[ab]"])
_glob = st.lists(_segment, min_size=1, max_size=3).map("/".join)
_path = st.lists(st.sampled_from(["a", "b", "ab", "x.py", "b.py", "abx"]), min_size=1, max_size=4)


@given(st.lists(_glob, max_size=3), st.lists(_glob, max_size=3), st.lists(_path, max_size=30))
def test_admitted_globs_never_match_a_claimed_path(mine, theirs, paths) -> None:
    claims = WriteClaims()
    claims.claim(theirs)
    if claims.admits(mine):
        for parts in paths:
            path = "/".join(parts)
            assert not (matches(path, mine) and matches(path, theirs)), path


def test_lanes_are_cut_where_a_step_could_write_what_another_lane_may() -> None:
    manifest = Manifest.model_validate(
        plan_manifest(
            {"id": "a", "executor": "python"},
            {"id": "b", "executor": "python", "writes": ["b.txt"]},
            {"id": "b2", "executor": "python", "depends_on": ["b"]},
            {"id": "c", "executor": "python", "writes": []},
            {"id": "d", "executor": "python", "writes": ["d/*"]},
            {"id": "e", "executor": "python", "writes": ["d/e.txt"]},
        )
    )
    lanes, claims = apart(manifest, [["a"], ["c"]])
    assert lanes == [["a"], ["c"]]  # a step that changes no file runs beside anything
    lanes, claims = apart(manifest, [["d"], ["e"], ["b", "b2"], ["a"]])
    # e may write under d/; b2 may change anything, so b's lane stops before it; a waits too
    assert lanes == [["d"], ["b"]]
    assert not claims.admits(["d/e.txt"]) and claims.admits(["f.txt"])


def _run(tmp_path: Path, *steps: dict[str, Any]) -> Any:
    context = PlanContext(
        workspace=str(tmp_path), replan_cooldown_s=0.0, review_critical_steps=False
    )
    runner = PlanRunner(
        checkpointer=InMemorySaver(),
        context=context,
        tools={"write_module": apart_steps.write_module},
    )
    return runner.run(plan_manifest(*steps))


def _writer(at: Path, name: str, other: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": name,
        "function": "write_module",
        "input": {"name": name, "other": other, "at": str(at)},
        "checks": [f"result.wrote == '{name}'"],
        **fields,
    }


def test_steps_that_may_write_the_same_files_run_one_after_another(tmp_path: Path) -> None:
    """Two default-scope steps of one level each write a module: neither sees the other running,
    and each is judged on its own writes (both complete)."""
    report = _run(tmp_path, _writer(tmp_path, "a", "b"), _writer(tmp_path, "b", "a"))
    assert report.status == "completed", report
    assert [report.steps[s].output["overlap"] for s in "ab"] == [False, False]


def test_steps_with_disjoint_writes_run_side_by_side(tmp_path: Path) -> None:
    report = _run(
        tmp_path,
        _writer(tmp_path, "a", "b", writes=["a.py", "marks/a.*"]),
        _writer(tmp_path, "b", "a", writes=["b.py", "marks/b.*"]),
    )
    assert report.status == "completed", report
    assert [report.steps[s].output["overlap"] for s in "ab"] == [True, True]
    assert (tmp_path / "a.py").exists() and (tmp_path / "b.py").exists()
