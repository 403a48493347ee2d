"""Per-purpose models, reasoning effort and token caps: what each request carried, read at the server."""

from __future__ import annotations

import pytest

from veriloop.context import Context, PlanContext, cli_settings
from veriloop.llm import get_llm
from veriloop.llm.reasoning import effort_for
from veriloop.llm.scripted import ANY_PURPOSE, Fail, ScriptedModelServer, ScriptedRequest
from veriloop.schemas import PURPOSES, ActionChoice

MESSAGES = [{"role": "user", "content": "next action?"}]
CHOICE = ActionChoice(thought="t", action="click(2)")
REJECTION = "Unsupported parameter: 'reasoning_effort' is not supported with this model."


def test_each_purpose_gets_its_own_model_effort_and_token_cap(
    scripted_model: ScriptedModelServer,
) -> None:
    ctx = PlanContext(
        model="gpt-4.1-mini",
        purposes={
            "planning": {"model": "o3", "reasoning_effort": "medium"},
            "critic": {"model": "local-critic", "max_tokens": 300},
            "execution": {"reasoning_effort": "low"},  # gpt-4.1-mini takes none: left out
        },
    )
    scripted_model.on(ANY_PURPOSE, lambda _r: CHOICE)
    for purpose in PURPOSES:
        get_llm(ctx, purpose).structured(purpose, MESSAGES, ActionChoice)
    sent = {r.purpose: r.body for r in scripted_model.requests}
    assert set(sent) == set(PURPOSES)
    assert (sent["planning"]["model"], sent["planning"]["reasoning_effort"]) == ("o3", "medium")
    assert sent["critic"]["model"] == "local-critic"
    assert sent["critic"]["max_completion_tokens"] == 300
    assert "reasoning_effort" not in sent["critic"]
    assert "reasoning_effort" not in sent["execution"]
    for purpose in set(PURPOSES) - {"planning", "critic"}:
        assert sent[purpose]["model"] == "gpt-4.1-mini", purpose
        assert "max_completion_tokens" not in sent[purpose], purpose


def test_verification_asks_for_the_highest_effort_its_model_supports() -> None:
    assert effort_for("verification", "o4-mini", None) == "high"
    assert effort_for("verification", "gpt-5.2-2025-12-11", None) == "xhigh"
    assert effort_for("verification", "openai/gpt-oss-20b", None) == "high"  # vLLM's name
    assert effort_for("verification", "gpt-4.1-mini", None) is None
    assert effort_for("verification", "qwen2.5:7b", None) is None  # unknown: nothing assumed
    assert effort_for("action", "o4-mini", None) is None  # only verification defaults to it
    assert effort_for("verification", "o4-mini", "low") == "low"  # configured wins
    assert effort_for("action", "qwen3:8b", "high") == "high"  # unknown: sent when configured
    assert effort_for("action", "gpt-4o", "high") is None  # known to refuse it


def _refuses_effort(request: ScriptedRequest):
    if "reasoning_effort" in request.body:
        return Fail(400, REJECTION)
    return CHOICE


def test_a_model_that_rejects_reasoning_effort_fails_once_per_endpoint_and_model(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.on("action", _refuses_effort)
    ctx = Context(model="local-model", reasoning_effort="high")
    llm = get_llm(ctx, "action")
    assert llm.structured("action", MESSAGES, ActionChoice).value == CHOICE
    assert llm.structured("action", MESSAGES, ActionChoice).value == CHOICE
    # A fresh client for the same endpoint and model (another effort) remembers the refusal too.
    other = get_llm(Context(model="local-model", reasoning_effort="low"), "action")
    assert other.structured("action", MESSAGES, ActionChoice).value == CHOICE
    assert [r.body.get("reasoning_effort") for r in scripted_model.requests] == [
        "high",
        None,
        None,
        None,
    ]
    # Another model on the same endpoint still gets its effort.
    scripted_model.on("action", lambda _r: CHOICE)
    get_llm(Context(model="local-reasoner", reasoning_effort="high"), "action").structured(
        "action", MESSAGES, ActionChoice
    )
    assert scripted_model.requests[-1].body["reasoning_effort"] == "high"


@pytest.mark.anyio
async def test_the_async_path_falls_back_the_same_way(scripted_model: ScriptedModelServer) -> None:
    scripted_model.on("verification", _refuses_effort)
    ctx = Context(model="local-model", purposes={"verification": {"reasoning_effort": "medium"}})
    llm = get_llm(ctx, "verification")
    await llm.astructured("verification", MESSAGES, ActionChoice)
    await llm.astructured("verification", MESSAGES, ActionChoice)
    assert [r.body.get("reasoning_effort") for r in scripted_model.requests] == [
        "medium",
        None,
        None,
    ]


def test_another_endpoint_with_the_same_model_is_asked_again(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.on("action", _refuses_effort)
    ctx = Context(model="local-model", reasoning_effort="high")
    get_llm(ctx, "action").structured("action", MESSAGES, ActionChoice)
    with ScriptedModelServer() as other:
        other.on("action", lambda _r: CHOICE)
        get_llm(
            Context(model="local-model", reasoning_effort="high", base_url=other.base_url), "action"
        ).structured("action", MESSAGES, ActionChoice)
        assert other.requests[0].body["reasoning_effort"] == "high"


def test_a_400_about_something_else_is_not_taken_for_a_refusal(
    scripted_model: ScriptedModelServer,
) -> None:
    scripted_model.script("action", Fail(400, "messages: too long"))
    with pytest.raises(Exception, match="too long"):
        get_llm(Context(model="local-model", reasoning_effort="high"), "action").structured(
            "action", MESSAGES, ActionChoice
        )
    assert len(scripted_model.requests) == 1


def test_purposes_come_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "VERILOOP_PURPOSES", '{"verification": {"model": "o4-mini", "grounding": "tavily"}}'
    )
    monkeypatch.setenv("VERILOOP_REASONING_EFFORT", "low")
    monkeypatch.setenv("VERILOOP_MAX_TOKENS", "2000")
    ctx = Context()
    assert ctx.for_purpose("verification") == {  # the default effort is not verification's
        "model": "o4-mini",
        "max_tokens": 2000,
        "grounding": "tavily",
    }
    assert ctx.for_purpose("action") == {
        "model": "gpt-4.1-mini",
        "reasoning_effort": "low",
        "max_tokens": 2000,
    }
    # An explicit value beats the environment.
    assert Context(purposes={"action": {"model": "x"}}).purposes == {"action": {"model": "x"}}


@pytest.mark.parametrize(
    ("purposes", "message"),
    [
        ({"verificaton": {"model": "x"}}, "verificaton"),
        ({"action": {"modle": "x"}}, "modle"),
        ({"action": {"reasoning_effort": "huge"}}, "reasoning_effort"),
        ({"action": {"grounding": "tavily"}}, "only verification can look facts up"),
        ({"verification": {"grounding": "bing"}}, "grounding"),
        ({"critic": {"max_tokens": "many"}}, "max_tokens"),
    ],
)
def test_bad_purpose_settings_say_what_is_wrong(purposes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Context(purposes=purposes)


def test_bad_environment_json_says_which_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERILOOP_PURPOSES", "{verification: o4-mini}")
    with pytest.raises(ValueError, match="VERILOOP_PURPOSES must be a JSON object"):
        Context()


def test_cli_values_become_context_settings() -> None:
    settings = cli_settings(
        ["gpt-4.1", "verification=o4-mini", "grounding = gpt-4o-mini-search-preview"],
        ["low", "verification=xhigh"],
        ["openai"],
    )
    assert settings == {
        "model": "gpt-4.1",
        "reasoning_effort": "low",
        "purposes": {
            "verification": {
                "model": "o4-mini",
                "reasoning_effort": "xhigh",
                "grounding": "openai",
            },
            "grounding": {"model": "gpt-4o-mini-search-preview"},
        },
    }
    assert Context(**settings).for_purpose("grounding")["model"] == "gpt-4o-mini-search-preview"
    with pytest.raises(ValueError, match="only verification can look facts up"):
        Context(**cli_settings(groundings=["action=tavily"]))
