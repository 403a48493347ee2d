"""Reports name the model that produced them: a scripted run says so at the top and costs $0; a run
under a real model name (here the same loopback playbook, reached as an OpenAI-compatible server) is
priced like that model."""

from __future__ import annotations

import json
from pathlib import Path

import lxml.html
import pytest

from veriloop.llm.endpoint import SCRIPTED_MODEL, ModelEndpoint
from veriloop.llm.pricing import DEFAULT_PRICES
from veriloop.llm.scripted import ScriptedModelServer
from veriloop.runners.browser.client import ChromiumBrowser
from veriloop.runners.browser.loop import RunResult, StepRecord, StepTimings
from veriloop.runners.browser.report import write_report
from veriloop.runners.demo.playbook import SCRIPTED_NOTES, DemoPlaybook
from veriloop.runners.demo.run import ADD_PATIENT, SEARCH_PATIENT, run_demo
from veriloop.runners.miniwob.harness import EvalConfig, run_miniwob
from veriloop.runners.miniwob.scripted import MiniWobPlaybook
from veriloop.schemas.usage import total_usage

pytestmark = pytest.mark.browser
REAL_MODEL = "gpt-4.1-mini"


def _priced(usage: dict[str, dict]) -> float:
    """What ``usage``'s tokens cost at REAL_MODEL's list price."""
    total, price = total_usage(usage), DEFAULT_PRICES[REAL_MODEL]
    return (total.input_tokens * price.input_per_m + total.output_tokens * price.output_per_m) / 1e6


def test_a_scripted_demo_report_says_so_and_costs_nothing(
    tmp_path: Path, browser: ChromiumBrowser
) -> None:
    result = run_demo(tmp_path, goals=[ADD_PATIENT], browser=browser, screenshots=False)
    assert result.scripted and result.checks[0].passed

    data = json.loads((tmp_path / "report.json").read_text())
    assert data["model"]["model"] == SCRIPTED_MODEL and data["model"]["scripted"] is True
    run = data["runs"][0]
    assert run["totalUsage"]["calls"] > 0 and run["totalUsage"]["cost_usd"] == 0.0
    assert run["note"] == SCRIPTED_NOTES[ADD_PATIENT]  # the deliberate no-op, explained
    save = next(step for step in run["steps"] if step["target"] == "Save")
    assert save["action"].startswith("click(")

    page = result.report.read_text()
    banner = page.index("Scripted run.")
    assert banner < page.index("Run 1:")  # at the top, above the figures
    assert f"<code>{SCRIPTED_MODEL}</code>" in page and "$0.0000" in page
    assert "deliberate mistake" in page
    assert f'<code>{save["action"]}</code> <span class="target">“Save”</span>' in page


def test_a_demo_report_under_a_real_model_name_is_priced(
    tmp_path: Path, browser: ChromiumBrowser, monkeypatch: pytest.MonkeyPatch
) -> None:
    with DemoPlaybook().install(ScriptedModelServer()) as server:
        base_url = server.base_url
        monkeypatch.setenv("OPENAI_BASE_URL", base_url)
        result = run_demo(
            tmp_path, goals=[SEARCH_PATIENT], model=REAL_MODEL, browser=browser, screenshots=False
        )
    assert not result.scripted and result.checks[0].passed

    data = json.loads((tmp_path / "report.json").read_text())
    assert data["model"] == {
        "model": REAL_MODEL,
        "endpoint": "openai-compatible",
        "baseUrl": base_url,
        "scripted": False,
        "label": f"model {REAL_MODEL} on an OpenAI-compatible server at {base_url}",
    }
    run = data["runs"][0]
    assert "note" not in run
    cost = run["totalUsage"]["cost_usd"]
    assert cost > 0 and cost == pytest.approx(_priced(run["usage"]), rel=1e-6)
    page = result.report.read_text()
    assert "Scripted run" not in page and f"Model <code>{REAL_MODEL}</code>" in page
    assert f"${cost:.4f}" in page


def test_eval_reports_name_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scripted = run_miniwob(EvalConfig(tasks=["click-button"], out_dir=tmp_path / "scripted"))
    markdown = scripted.paths["markdown"].read_text()
    head = markdown[: markdown.index("## Summary")]
    assert SCRIPTED_MODEL in head and "Scripted run" in head
    assert "| cost (USD) | 0.0000 |" in markdown
    assert "Scripted run" in scripted.paths["html"].read_text()
    summary = json.loads(scripted.paths["summary"].read_text())
    assert summary["model"]["endpoint"] == "scripted" and summary["cost_usd"] == 0.0

    with MiniWobPlaybook().install(ScriptedModelServer()) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        real = run_miniwob(
            EvalConfig(tasks=["click-button"], out_dir=tmp_path / "real"),
            model=REAL_MODEL,
            scripted=False,
        )
    (record,) = real.records
    assert record.model == REAL_MODEL and record.model_calls > 0
    assert real.summary.cost_usd > 0
    assert real.summary.cost_usd == pytest.approx(
        _priced(record.usage), abs=1e-6
    )  # rounded to 6 places
    markdown = real.paths["markdown"].read_text()
    assert f"Model: model {REAL_MODEL} on an OpenAI-compatible server" in markdown
    assert "Scripted run" not in markdown
    assert f"| cost (USD) | {real.summary.cost_usd:.4f} |" in markdown


def test_what_a_page_or_model_wrote_is_shown_as_text(tmp_path: Path) -> None:
    """Goals, URLs, thoughts, observations and errors come from pages and models: never markup."""
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    first = StepRecord(
        index=0,
        url=f"http://x.test/?q={hostile}",
        action="click(3)",
        thought=hostile,
        status="executing",
        verification=None,
        client_observations=None,
        usage={},
        timings=StepTimings(),
        execution_ok=False,
        execution_error=hostile,
        target=hostile,
    )
    # The next turn brings the verdict on the first action and what the browser saw after it.
    second = StepRecord(
        index=1,
        url="http://x.test/",
        action="fail()",
        thought="",
        status="failed",
        verification={"success": False, "confidence": 0.4, "observations": [hostile]},
        client_observations={"didDomMutate": True},
        usage={"verification": {"input_tokens": 5, "output_tokens": 2}},
        timings=StepTimings(),
        settled=False,
    )
    run = RunResult(
        goal=hostile,
        start_url="http://x.test/",
        status="failed",
        error=hostile,
        steps=[first, second],
    )
    model = ModelEndpoint(
        model=hostile, endpoint="openai-compatible", base_url="http://127.0.0.1:1/v1"
    )
    page = write_report([run], tmp_path, model=model, notes={hostile: hostile}).read_text()

    tree = lxml.html.fromstring(page)
    assert (
        tree.xpath("//script") == [] and tree.xpath("//img") == []
    )  # no screenshot, no injected one
    assert page.count("&lt;script&gt;") >= 8  # every field shown, as text
    first_card, second_card = tree.xpath("//article[contains(@class, 'step')]")
    first_text = first_card.text_content()
    assert "Verdict failed" in first_text and "DOM mutation yes" in first_text
    assert "page still busy at the 5 s cap" in first_text
    assert "verification 5+2" in second_card.text_content()
    assert "The task ended with this action." in second_card.text_content()
