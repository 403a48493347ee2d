"""Pages for the engine tests: a small form with a ticker, built with the mutations verification must see.

The rotating quote carries the background mark the snapshot script writes on an element that
changed while no action was pending; the clock is unmarked (an older client).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from veriloop.context import Context
from veriloop.llm import StructuredLLM, get_llm

FORM = """<!DOCTYPE html>
<html><head><title>Patients</title><script>var t = "<button>not a button</button>";</script></head>
<body>
  <div class="ticker">Server time {ticker}</div>
  <h1>New patient</h1>
  <form>
    <input name="patient_name" data-veriloop-id="12" value="{value}" placeholder="Name">
    <input type="checkbox" id="consent" data-veriloop-id="13"{checked}>
    <button id="save" data-veriloop-id="14">{button}</button>
  </form>
  {alert}
  <footer data-veriloop-background="text">Quote of the minute: {quote}</footer>
</body></html>"""


def make_page(
    *,
    button: str = "Save",
    value: str = "",
    checked: bool = False,
    alert: str | None = None,
    ticker: str = "12:00:01",
    quote: str = "Measure twice.",
) -> str:
    return FORM.format(
        button=button,
        value=value,
        checked=" checked" if checked else "",
        alert=f'<div class="toast">{alert}</div>' if alert else "",
        ticker=ticker,
        quote=quote,
    )


@pytest.fixture
def page() -> Callable[..., str]:
    """``page(button="Saved", alert="Patient saved", ...)``: the form page with those changes."""
    return make_page


@pytest.fixture
def llm(scripted_model) -> StructuredLLM:
    """The real openai client, pointed at the scripted server; no retries so failures are fast."""
    return get_llm(Context(llm_max_retries=0, llm_timeout_s=10))
