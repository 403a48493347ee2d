"""Price table: defaults, snapshots, env and argument overrides, unknown models, malformed prices."""

from __future__ import annotations

import pytest

from veriloop.context import Context
from veriloop.llm import get_llm
from veriloop.llm.pricing import DEFAULT_PRICES, Price, cost_usd, load_prices, price_of
from veriloop.llm.scripted import ScriptedModelServer
from veriloop.schemas import ActionChoice

MESSAGES = [{"role": "user", "content": "next action?"}]


def test_cost_of_a_known_model() -> None:
    table = load_prices()
    assert table["gpt-4.1-mini"] == DEFAULT_PRICES["gpt-4.1-mini"]
    # 1M input at 0.40 + 0.5M output at 1.60
    assert cost_usd("gpt-4.1-mini", 1_000_000, 500_000, table) == pytest.approx(0.40 + 0.80)


def test_dated_snapshot_costs_what_its_alias_costs() -> None:
    table = load_prices()
    assert price_of("gpt-4o-mini-2024-07-18", table) == table["gpt-4o-mini"]
    assert price_of("gpt-4o-mini-preview", table) is None


def test_unknown_model_costs_nothing() -> None:
    assert cost_usd("llama3.1:8b", 1000, 1000, load_prices()) == 0.0


def test_env_overrides_and_extends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERILOOP_PRICES", '{"gpt-4.1-mini": [1, 2], "qwen2.5": [0.1, 0.2]}')
    table = load_prices()
    assert table["gpt-4.1-mini"] == Price(1.0, 2.0)
    assert table["qwen2.5"] == Price(0.1, 0.2)
    assert table["gpt-4o"] == DEFAULT_PRICES["gpt-4o"]


def test_argument_beats_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERILOOP_PRICES", '{"m": [1, 2]}')
    assert load_prices({"m": (3, 4)})["m"] == Price(3.0, 4.0)
    assert "m" not in load_prices(env="")  # an explicit empty env ignores $VERILOOP_PRICES


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "must be JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"m": [1]}', "price of 'm' must be"),
        ('{"m": [1, -2]}', "price of 'm' must be"),
        ('{"m": ["1", "2"]}', "price of 'm' must be"),
        ('{"m": [true, 1]}', "price of 'm' must be"),
    ],
)
def test_malformed_env_prices_are_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, raw: str, message: str
) -> None:
    monkeypatch.setenv("VERILOOP_PRICES", raw)
    with pytest.raises(ValueError, match=message):
        load_prices()


def test_usage_is_counted_for_an_unpriced_model(scripted_model: ScriptedModelServer) -> None:
    scripted_model.script("action", ActionChoice(thought="t", action="finish()"))
    result = get_llm(Context(model="llama3.1:8b")).structured("action", MESSAGES, ActionChoice)
    assert result.usage.cost_usd == 0.0
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0


def test_env_prices_reach_the_client(
    scripted_model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERILOOP_PRICES", '{"llama3.1:8b": [1000000, 0]}')  # $1 per input token
    scripted_model.script("action", ActionChoice(thought="t", action="finish()"))
    result = get_llm(Context(model="llama3.1:8b")).structured("action", MESSAGES, ActionChoice)
    assert result.usage.cost_usd == pytest.approx(result.usage.input_tokens)
