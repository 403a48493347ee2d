"""One call to a real provider; runs only when OPENAI_API_KEY is set in the environment pytest started with."""

from __future__ import annotations

import pytest

from veriloop.llm import get_llm
from veriloop.schemas import SemanticVerdict


@pytest.mark.live
def test_real_model_returns_a_structured_verdict() -> None:
    messages = [
        {
            "role": "system",
            "content": "You judge whether a browser action achieved the user's goal.",
        },
        {
            "role": "user",
            "content": "Goal: open the settings page. Action: click(4). Observations: URL changed from /home "
            "to /settings; heading 'Settings' appeared.",
        },
    ]
    result = get_llm().structured("verification", messages, SemanticVerdict)
    assert isinstance(result.value, SemanticVerdict)
    assert result.value.action_succeeded is True
    assert (
        result.usage.input_tokens > 0 and result.usage.output_tokens > 0 and result.usage.calls == 1
    )
