"""The four shipped examples from the console's New run page, in headless Chromium (issue 45):
on a default service (no processes for plans, no model) and on one with ``plan_shell=sandboxed``
and a model, Check and Start agree: Start is enabled only when Check says "Ready to run", and a
run started that way is not refused; otherwise Check says plainly why."""

from __future__ import annotations

import pytest
from console_kit import screenshot, sign_in
from playwright.sync_api import Page, expect
from service_testkit import REPO

pytestmark = pytest.mark.browser

DEFAULT = {"VERILOOP_PLAN_SHELL": None, "OPENAI_BASE_URL": None, "OPENAI_API_KEY": None}
"""A default ``veriloop serve``: plan shell off, no model configured."""
WHY_NOT_ON_A_DEFAULT_SERVICE = {
    "hello_shell.yaml": "runs no processes for plans",
    "review.yaml": "runs no processes for plans",
    "llm_notes.yaml": "this service has no model",
    "python_steps.yaml": "word_stats",
}
WHY_NOT_WHEN_SANDBOXED = {"python_steps.yaml": "word_stats"}


@pytest.mark.parametrize(
    ("overrides", "why_not"),
    [(DEFAULT, WHY_NOT_ON_A_DEFAULT_SERVICE), ({}, WHY_NOT_WHEN_SANDBOXED)],
    ids=["default", "sandboxed_with_a_model"],
)
def test_check_and_start_agree_on_the_shipped_examples(page: Page, launch, overrides, why_not):
    server = launch(env_overrides=overrides)
    sign_in(page, f"{server.url}/new")
    for example in sorted((REPO / "examples").glob("*.yaml")):
        page.goto(f"{server.url}/new")
        page.get_by_label("or paste it").fill(example.read_text())
        start = page.get_by_role("button", name="Start the run")
        page.get_by_role("button", name="Check").click()
        result = page.locator(".manifest-check")
        expect(result).to_be_visible()
        if example.name in why_not:
            expect(result.locator("h2")).to_have_text("Cannot run")
            expect(result).to_contain_text(why_not[example.name])
            expect(start).to_be_disabled()
            if overrides is DEFAULT and example.name == "llm_notes.yaml":
                screenshot(page, "new_run_cannot_run")
            continue
        expect(result.locator("h2")).to_have_text("Ready to run")
        expect(start).to_be_enabled()
        start.click()
        page.wait_for_url("**/runs/*")
        expect(page.locator("#run-status")).not_to_have_text("rejected")
        expect(page.locator("main")).not_to_contain_text("Not started")
