"""The browser runner's report is drawn by the console's templates: the console's stylesheet,
the task page's step cards (each action with its target's name, beside the verdict the next turn
brought on it), the inlined screenshots; opened in real Chromium."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from veriloop.runners.browser.client import ChromiumBrowser
from veriloop.runners.demo.run import ADD_PATIENT, run_demo

pytestmark = pytest.mark.browser


def test_the_report_is_the_console_s_step_cards_with_its_stylesheet(
    tmp_path: Path, browser: ChromiumBrowser
) -> None:
    result = run_demo(tmp_path, goals=[ADD_PATIENT], browser=browser)
    assert result.checks[0].passed
    console_css = resources.files("veriloop.server.pages").joinpath("static/console.css")

    session = browser.new_session()
    try:
        page = session.page
        page.goto(result.report.as_uri())
        # One stylesheet: the console's, inlined (the page loads nothing else).
        assert page.evaluate("document.querySelectorAll('style, link').length") == 1
        assert page.locator("style").text_content() == console_css.read_text()
        header = page.evaluate("getComputedStyle(document.querySelector('header')).backgroundColor")
        assert header == "rgb(31, 78, 121)"  # console.css's header colour

        cards = page.locator("article.card.step")
        steps = result.runs[0].steps
        assert cards.count() == len(steps)
        shots = page.locator("article.card.step.shot img")
        assert shots.count() == len(steps)
        widths = shots.evaluate_all("imgs => imgs.map(i => i.complete && i.naturalWidth)")
        assert all(width and width > 100 for width in widths)  # the screenshots decode

        # The Save click, named as the task page names it, with the verdict on it.
        save = cards.filter(has=page.locator("h3 .target", has_text="“Save”"))
        assert save.count() == 1
        assert "Verdict succeeded" in " ".join(save.inner_text().split())
        # The last action ended the run: nothing judged it.
        assert "The task ended with this action." in cards.last.inner_text()
    finally:
        session.close()
