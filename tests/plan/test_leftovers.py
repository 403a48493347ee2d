"""Nothing privileged or unbounded survives a step: setuid/setgid bits go, a finished run's folder
and snapshot store go (unless kept), and the snapshot store's caps fail the step past them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from veriloop.context import PlanContext
from veriloop.engines.plan.confinement.limits import folder_bytes
from veriloop.engines.plan.confinement.process import run_command
from veriloop.engines.plan.judge.snapshot import (
    SnapshotLimitExceeded,
    StoreScope,
    read_blob,
    store_scope,
    take_snapshot,
)
from veriloop.engines.plan.leftovers import remove_tree, strip_privilege_bits
from veriloop.plans import PlanRunner, RunFiles, run_snapshot_store, run_workspace

pytestmark = pytest.mark.anyio
SUID = stat.S_ISUID | stat.S_ISGID


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_setuid_and_setgid_bits_go_everywhere_links_never_followed(tmp_path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "deep" / "closed").mkdir(parents=True)
    outside.mkdir()
    target = outside / "host-suid"
    target.write_text("x")
    target.chmod(0o4755)
    shell = work / "sh"
    shell.write_text("x")
    shell.chmod(0o6755)
    hidden = work / "deep" / "closed" / "g"
    hidden.write_text("x")
    hidden.chmod(0o2711)
    (work / "deep").chmod(0o2775)
    (work / "link").symlink_to(target)
    (work / "deep" / "closed").chmod(0o000)

    stripped = strip_privilege_bits([work, tmp_path / "missing"])

    assert mode(shell) == 0o755 and mode(hidden) == 0o711 and mode(work / "deep") == 0o775
    assert sorted(Path(p).name for p in stripped) == ["deep", "g", "sh"]
    assert mode(target) == 0o4755  # the link's target outside is not the step's


async def test_a_command_cannot_leave_a_setuid_file(tmp_path) -> None:
    run = await run_command(
        "cp /bin/true mine && chmod 6755 mine && mkdir d && cp /bin/true d/t && chmod u+s d/t",
        tmp_path,
        timeout_s=30,
    )
    assert run.exit_code == 0, run.output
    assert mode(tmp_path / "mine") == 0o755 and mode(tmp_path / "d" / "t") == 0o755


def test_remove_tree_removes_folders_a_step_closed(tmp_path) -> None:
    run = tmp_path / "run"
    (run / "a" / "b").mkdir(parents=True)
    (run / "a" / "b" / "f").write_text("x")
    (run / "a" / "b").chmod(0o000)
    (run / "a").chmod(0o500)
    (run / "escape").symlink_to(tmp_path / "keep", target_is_directory=True)
    (tmp_path / "keep").mkdir()
    remove_tree(run)
    remove_tree(run)  # gone already is fine
    assert not run.exists() and (tmp_path / "keep").is_dir()


def test_the_snapshot_store_caps_refuse_past_them(tmp_path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.py").write_bytes(b"a" * 3000)
    (work / "b.py").write_bytes(b"b" * 3000)
    stores = tmp_path / "snapshots"
    with store_scope(StoreScope(stores / "run1", 1 << 20, 1 << 20)):
        tree, _ = take_snapshot(work)
        assert read_blob(tree["a.py"]) == b"a" * 3000
    used = folder_bytes([stores / "run1"])  # the two blobs, as the disk holds them
    assert used >= 6000
    (work / "c.py").write_bytes(b"c" * 5000)
    with (
        store_scope(StoreScope(stores / "run1", used + 100, 1 << 20)),
        pytest.raises(SnapshotLimitExceeded, match=f"past its cap of {used + 100}"),
    ):
        take_snapshot(work)
    # Another run has room of its own, but not past the total of every run's stores.
    with (
        store_scope(StoreScope(stores / "run2", 1 << 20, used + 100)),
        pytest.raises(SnapshotLimitExceeded, match=f"past the total cap of {used + 100}"),
    ):
        take_snapshot(work)


def shell_step(step_id: str, command: str, **more) -> dict:
    return {"id": step_id, "executor": "shell", "command": command, **more}


async def test_a_finished_run_leaves_no_folder_and_a_step_past_the_snapshot_cap_fails(
    tmp_path,
) -> None:
    base = tmp_path / "base"
    runner = PlanRunner(
        context=PlanContext(workspace=str(base), sandbox="off"),
        workspace_per_run=True,
        run_files=RunFiles(keep=False, snapshot_run_bytes=50_000, snapshot_total_bytes=10**9),
    )
    seen = {}

    def note(event) -> None:
        folder = run_workspace(base, "r1")
        if folder.exists():
            seen["mode"] = mode(folder)
            seen["runs"] = mode(folder.parent)
            seen["snapshots"] = mode(base / "snapshots")

    manifest = {
        "steps": [
            shell_step("big", "head -c 60000 /dev/zero > blob.py"),
            shell_step("next", "echo after > after.txt", depends_on=["big"]),
        ]
    }
    report = await runner.arun(manifest=manifest, run_id="r1", on_event=note)
    assert seen == {"mode": 0o700, "runs": 0o700, "snapshots": 0o700}
    assert report.steps["big"].status == "completed"
    step = report.steps["next"]
    assert step.status != "completed"
    assert "snapshot store full" in (step.attempts[-1].error or "")
    assert not run_workspace(base, "r1").exists()
    assert not run_snapshot_store(base, "r1").exists()


async def test_a_kept_or_unfinished_run_keeps_its_folder(tmp_path) -> None:
    base = tmp_path / "base"
    kept = PlanRunner(
        context=PlanContext(workspace=str(base), sandbox="off"),
        workspace_per_run=True,
        run_files=RunFiles(keep=True),
    )
    report = await kept.arun(manifest={"steps": [shell_step("s", "echo hi > f")]}, run_id="k")
    assert report.status == "completed"
    assert (run_workspace(base, "k") / "f").read_text() == "hi\n"

    dropping = PlanRunner(
        context=PlanContext(workspace=str(base), sandbox="off"),
        workspace_per_run=True,
        run_files=RunFiles(keep=False),
    )
    manifest = {
        "steps": [
            shell_step("s", "echo hi > f"),
            {"id": "ok", "executor": "human", "depends_on": ["s"], "question": "Ship?"},
        ]
    }
    report = await dropping.arun(manifest=manifest, run_id="w")
    assert report.status == "awaiting_review"
    assert (run_workspace(base, "w") / "f").exists()  # the review's answer resumes the run there
    report = await dropping.aresume("w", {"ok": {"approved": True}})
    assert report.status == "completed"
    assert not run_workspace(base, "w").exists() and os.path.isdir(base / "runs")
