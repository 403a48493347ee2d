"""One answer to "can this run here?" (issue 45): POST /api/plans/validate says ``runnable:
false``, with the same located reason, for everything POST /api/plans refuses on this service
(the plan-shell setting, a model it does not have), and Check and Start agree on the four shipped
examples on a default service, a ``plan_shell=sandboxed`` one, with and without a model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from service_testkit import REPO, wait_for_run

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@pytest.fixture
def workspace(monkeypatch, tmp_path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    monkeypatch.setenv("VERILOOP_WORKSPACE", str(root))
    monkeypatch.setenv("VERILOOP_LLM_MAX_RETRIES", "0")
    return root


def refused_messages(check: dict) -> list[str]:
    return [f["message"] for f in check["critique"]["findings"] if f["rule"] == "not_allowed_here"]


@pytest.mark.parametrize("plan_shell", ["off", "sandboxed"])
@pytest.mark.parametrize("model", [False, True])
def test_check_and_start_agree_on_the_shipped_examples(
    plan_shell, model, request, workspace, thread_server, sqlite_settings
) -> None:
    if model:
        request.getfixturevalue("scripted_model")  # OPENAI_BASE_URL points at it
    assert len(EXAMPLES) == 4
    settings = dataclasses.replace(sqlite_settings, plan_shell=plan_shell)
    client = thread_server(settings).client()
    for example in EXAMPLES:
        manifest = example.read_text()
        check = client.post("/api/plans/validate", json={"manifest": manifest})
        assert check.status_code == 200, check.text
        check = check.json()
        started = client.post("/api/plans", json={"manifest": manifest})
        if started.status_code == 422:
            # Refused at the door: Check said so, with the very same located sentences.
            assert check["runnable"] is False, (example.name, check)
            assert "; ".join(refused_messages(check)) == started.json()["detail"][0]["msg"]
            continue
        assert started.status_code == 202, started.text
        report = wait_for_run(client, started.json()["runId"])
        rejected = report["status"] == "rejected"
        assert check["runnable"] is not rejected, (example.name, check, report["haltReason"])

    # What each one says on this service.
    checks = {
        e.name: client.post("/api/plans/validate", json={"manifest": e.read_text()}).json()
        for e in EXAMPLES
    }
    shell_refused = "runs no processes for plans"
    for name in ("hello_shell.yaml", "review.yaml"):
        says = " ".join(refused_messages(checks[name]))
        assert checks[name]["runnable"] is (plan_shell == "sandboxed"), (name, checks[name])
        assert (shell_refused in says) is (plan_shell == "off")
    notes = " ".join(refused_messages(checks["llm_notes.yaml"]))
    assert checks["llm_notes.yaml"]["runnable"] is (plan_shell == "sandboxed" and model)
    assert (
        "step 'glossary' is run by a model (an llm step), but this service has no model" in notes
    ) is (not model)
    assert "veriloop serve --scripted" in notes or model
    # python_steps names functions this service was not given (VERILOOP_TOOLS): said plainly.
    python = checks["python_steps.yaml"]
    assert python["runnable"] is False
    assert any("word_stats" in f["message"] for f in python["critique"]["findings"])


def test_a_goal_alone_needs_a_model(workspace, thread_server, sqlite_settings) -> None:
    client = thread_server(sqlite_settings).client()
    refused = client.post("/api/plans", json={"goal": "summarise the README"})
    assert refused.status_code == 422
    assert "no model" in refused.json()["message"]
