"""get_llm: configuration from Context and env, caching, clear errors, and the test guard in conftest."""

from __future__ import annotations

import os

import pytest

from veriloop.context import Context
from veriloop.llm import PLACEHOLDER_API_KEY, LLMUnavailable, clear_llm_cache, get_llm
from veriloop.llm.scripted import ScriptedModelServer
from veriloop.schemas import ActionChoice

MESSAGES = [{"role": "user", "content": "next action?"}]
CHOICE = ActionChoice(thought="t", action="click(2)")


def test_tests_never_see_a_provider_from_the_shell() -> None:
    assert "OPENAI_API_KEY" not in os.environ
    assert "OPENAI_BASE_URL" not in os.environ
    assert "VERILOOP_MODEL" not in os.environ


def test_no_key_and_no_base_url_says_how_to_configure() -> None:
    with pytest.raises(LLMUnavailable) as info:
        get_llm()
    message = str(info.value)
    assert (
        "OPENAI_API_KEY" in message and "OPENAI_BASE_URL" in message and "VERILOOP_MODEL" in message
    )


def test_base_url_without_key_uses_a_placeholder_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedModelServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        server.script("action", CHOICE)
        assert get_llm().structured("action", MESSAGES, ActionChoice).value == CHOICE
        assert server.requests[0].headers["authorization"] == f"Bearer {PLACEHOLDER_API_KEY}"


def test_context_base_url_beats_the_env(monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedModelServer() as env_server, ScriptedModelServer() as context_server:
        monkeypatch.setenv("OPENAI_BASE_URL", env_server.base_url)
        context_server.script("action", CHOICE)
        get_llm(Context(base_url=context_server.base_url)).structured(
            "action", MESSAGES, ActionChoice
        )
        assert (env_server.calls(), context_server.calls()) == (0, 1)


def test_key_and_model_from_env_reach_the_request(
    scripted_model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERILOOP_MODEL", "qwen2.5:7b")
    scripted_model.script("action", CHOICE)
    get_llm().structured("action", MESSAGES, ActionChoice)
    request = scripted_model.requests[0]
    assert request.body["model"] == "qwen2.5:7b"
    assert request.headers["authorization"] == "Bearer test-key"


def test_timeout_and_retries_come_from_context(scripted_model: ScriptedModelServer) -> None:
    llm = get_llm(Context(llm_timeout_s=7.5, llm_max_retries=4))
    assert llm.client.max_retries == 4
    assert llm.client.timeout == 7.5
    assert str(llm.client.base_url).rstrip("/") == scripted_model.base_url


def test_clients_are_cached_per_configuration(
    scripted_model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = get_llm(Context())
    assert get_llm(Context()) is first
    assert get_llm() is first
    assert get_llm(Context(model="gpt-4o")) is not first
    assert get_llm(Context(llm_max_retries=0)) is not first
    assert get_llm(Context(llm_timeout_s=3)) is not first
    monkeypatch.setenv("VERILOOP_PRICES", '{"x": [1, 1]}')
    priced = get_llm()
    assert priced is not first and priced.prices["x"] == (1.0, 1.0)
    monkeypatch.setenv("OPENAI_API_KEY", "other-key")
    assert get_llm() is not priced


def test_clear_llm_cache_builds_a_new_client(scripted_model: ScriptedModelServer) -> None:
    first = get_llm()
    clear_llm_cache()
    assert get_llm() is not first


def test_json_mode_fallback_is_remembered_per_client(scripted_model: ScriptedModelServer) -> None:
    scripted_model.reject_json_schema = True
    scripted_model.on("action", lambda req: CHOICE)
    mini, other = get_llm(Context(model="a")), get_llm(Context(model="b"))
    mini.structured("action", MESSAGES, ActionChoice)
    assert mini.dialect == "json_object_schema" and other.dialect == "json_schema"
    assert (
        get_llm(Context(model="a")).dialect == "json_object_schema"
    )  # the cached client keeps what it learned
