"""What a step's processes get on the CLI path (`veriloop plan run`), and how a manifest's
``sandbox`` / ``env`` / ``network`` settings are read (issue 28, items 1 and 2)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from veriloop.cli import app
from veriloop.engines.plan.confinement import seccomp
from veriloop.engines.plan.confinement.sandbox import LAYERS, stricter
from veriloop.engines.plan.manifest import ManifestError, apply_repair, load_manifest
from veriloop.schemas.plan_outputs import RepairDraft, StepDraft
from veriloop.schemas.plan_run import PlanRunReport

SECRET = "sk-cli-secret-0123456789"


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``run(manifest, *options)``: `veriloop plan run` in a fresh workspace -> (exit, report)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("VERILOOP_SECRET_SETTING", SECRET)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-passed")
    monkeypatch.setenv("DECLARED_NAME", "declared-value")
    workspace = tmp_path / "ws"
    workspace.mkdir()

    def invoke(manifest: dict, *options: str) -> tuple[int, str, PlanRunReport | None]:
        (tmp_path / "plan.yaml").write_text(yaml.safe_dump(manifest))
        result = CliRunner().invoke(
            app,
            ["plan", "run", "plan.yaml", "--workspace", str(workspace), "--report", "out",
             "--no-review", *options],
            catch_exceptions=False,
        )  # fmt: skip
        path = tmp_path / "out" / "report.json"
        report = PlanRunReport.model_validate_json(path.read_text()) if path.exists() else None
        return result.exit_code, result.output, report

    invoke.workspace = workspace
    return invoke


def test_a_cli_step_gets_a_scrubbed_environment_plus_pass_env_and_its_declared_names(run) -> None:
    manifest = {
        "steps": [
            {"id": "plain", "command": "printenv > plain.env"},
            {"id": "declared", "command": "printenv > declared.env", "env": ["DECLARED_NAME"]},
        ]
    }
    code, output, report = run(manifest, "--pass-env", "GITHUB_TOKEN")
    assert code == 0, output
    plain = (run.workspace / "plain.env").read_text()
    declared = (run.workspace / "declared.env").read_text()
    for env in (plain, declared):
        assert SECRET not in env and "VERILOOP_" not in env and "OPENAI_" not in env
        assert "GITHUB_TOKEN=ghp-passed" in env and f"HOME={run.workspace}" in env
    assert "DECLARED_NAME" not in plain and "DECLARED_NAME=declared-value" in declared
    assert report.steps["plain"].attempts[0].layers == list(LAYERS)  # auto, and all work here
    html = (run.workspace.parent / "out" / "report.html").read_text()
    assert " s, sandboxed (limits namespaces user no_caps seccomp paths), " in html


def test_sandbox_off_runs_unsandboxed_and_the_report_says_so(run) -> None:
    code, output, report = run({"steps": [{"id": "s", "command": "true"}]}, "--sandbox", "off")
    assert code == 0, output
    assert report.steps["s"].attempts[0].layers == ["limits"]
    assert (
        " s, unsandboxed (limits), " in (run.workspace.parent / "out" / "report.html").read_text()
    )


def test_a_manifest_can_only_make_the_sandbox_stricter(run, monkeypatch) -> None:
    # sandbox: required in the manifest wins over the CLI's off; without bwrap the step fails.
    monkeypatch.setenv("PATH", "/nonexistent")
    manifest = {"sandbox": "required", "steps": [{"id": "s", "command": "/bin/touch ran"}]}
    code, output, report = run(manifest, "--sandbox", "off")
    assert code == 1
    step = report.steps["s"]
    assert step.verification_status == "execution_failed"
    assert "sandbox required, but bubblewrap (bwrap) is not installed" in step.diagnosis
    assert not (run.workspace / "ran").exists()
    # A nested plan inherits it too.
    nested = {"sandbox": "required", "steps": [{"id": "outer", "plan": {"steps": [
        {"id": "inner", "command": "/bin/touch ran"}]}}]}  # fmt: skip
    code, output, report = run(nested, "--sandbox", "off")
    assert code == 1 and not (run.workspace / "ran").exists()
    inner = report.steps["outer"].sub_run["steps"]["inner"]
    assert inner["verification_status"] == "execution_failed"


def test_manifest_security_settings_are_read_and_checked() -> None:
    manifest = load_manifest(
        {
            "sandbox": "Required",
            "agents": {"coder": {"prompt": "p", "env": "A_TOKEN, B"}},
            "steps": [{"id": "s", "command": "true", "env": ["X"], "network": "yes"}],
        }
    )
    assert manifest.sandbox == "required"
    assert manifest.agents["coder"].env == ["A_TOKEN", "B"]
    assert manifest.steps[0].env == ["X"] and manifest.steps[0].network is True
    with pytest.raises(ManifestError, match="sandbox"):
        load_manifest({"sandbox": "sometimes", "steps": [{"id": "s", "command": "true"}]})
    with pytest.raises(ManifestError, match="env"):
        load_manifest({"steps": [{"id": "s", "command": "true", "env": ["A=B; rm"]}]})
    assert stricter("off", None) == "off" and stricter("auto", "required") == "required"
    assert stricter(None, None) == "auto" and stricter("required", "off") == "required"


def test_without_bubblewrap_auto_says_so_in_one_line_and_runs_unsandboxed(run, monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    code, output, report = run({"steps": [{"id": "s", "command": "/bin/touch ran"}]})
    assert code == 0, output
    assert "sandbox auto: bubblewrap (bwrap) is not installed" in output
    assert "they run unsandboxed" in output
    assert report.steps["s"].attempts[0].layers == ["limits"] and (run.workspace / "ran").exists()


def test_a_replan_keeps_the_manifests_sandbox() -> None:
    manifest = load_manifest(
        {"sandbox": "required", "steps": [{"id": "a", "command": "true"}, {"id": "b"}]}
    )
    repair = RepairDraft(summary="redo b", steps=[StepDraft(id="b2", command="make")])
    repaired = apply_repair(manifest, repair, replaced=["b"], kept=["a"])
    assert [s.id for s in repaired.steps] == ["a", "b2"] and repaired.sandbox == "required"


def test_auto_without_one_layer_names_it_and_records_the_others(run, monkeypatch) -> None:
    seccomp.compiled_filter.cache_clear()
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # the bindings are not installed
    try:
        code, output, report = run({"steps": [{"id": "s", "command": "touch ran"}]})
    finally:
        seccomp.compiled_filter.cache_clear()
    assert code == 0, output
    assert "(no seccomp layer); they run without it" in " ".join(output.split())
    assert report.steps["s"].attempts[0].layers == [layer for layer in LAYERS if layer != "seccomp"]
    assert (run.workspace / "ran").exists()
