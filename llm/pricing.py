"""Model prices (USD per 1M tokens) and the cost of one call.

Defaults cover a handful of current OpenAI models (list prices, standard tier).
Override or extend them with env ``VERILOOP_PRICES='{"my-model": [0.5, 1.5]}'``
or the ``overrides`` argument (argument beats env beats defaults). An unknown
model costs 0; its tokens are still counted.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from veriloop.schemas.usage import ModelUsage, Usage

PRICES_ENV = "VERILOOP_PRICES"


class Price(NamedTuple):
    """USD per one million tokens."""

    input_per_m: float
    output_per_m: float


DEFAULT_PRICES: dict[str, Price] = {
    "gpt-5": Price(1.25, 10.00),
    "gpt-5-mini": Price(0.25, 2.00),
    "gpt-5-nano": Price(0.05, 0.40),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "o3": Price(2.00, 8.00),
    "o4-mini": Price(1.10, 4.40),
}

# Dated snapshots ("gpt-4.1-mini-2025-04-14") cost what their alias costs.
_SNAPSHOT_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")

PriceOverrides = Mapping[str, Sequence[float]]


def load_prices(
    overrides: PriceOverrides | None = None, env: str | None = None
) -> dict[str, Price]:
    """The price table: defaults, then ``env`` (default: ``$VERILOOP_PRICES``), then ``overrides``.

    Raises ValueError with the offending entry when a price is malformed.
    """
    table = dict(DEFAULT_PRICES)
    raw_env = os.environ.get(PRICES_ENV) if env is None else env
    if raw_env:
        try:
            parsed = json.loads(raw_env)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f'{PRICES_ENV} must be JSON like {{"model": [input, output]}}: {exc}'
            ) from exc
        if not isinstance(parsed, dict):
            raise ValueError(
                f'{PRICES_ENV} must be a JSON object like {{"model": [input, output]}}'
            )
        table.update(_validated(parsed, PRICES_ENV))
    if overrides:
        table.update(_validated(overrides, "prices"))
    return table


def _validated(entries: Mapping[str, object], source: str) -> dict[str, Price]:
    table = {}
    for model, value in entries.items():
        if (
            not isinstance(value, list | tuple)
            or len(value) != 2
            or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in value
            )
        ):
            raise ValueError(
                f"{source}: price of {model!r} must be [input_usd_per_1m, output_usd_per_1m] (two numbers >= 0), got {value!r}"
            )
        table[str(model)] = Price(float(value[0]), float(value[1]))
    return table


def price_of(model: str, table: Mapping[str, Price]) -> Price | None:
    """The model's price, matching a dated snapshot to its alias; None when unknown."""
    return table.get(model) or table.get(_SNAPSHOT_SUFFIX.sub("", model))


def cost_usd(
    model: str, input_tokens: int, output_tokens: int, table: Mapping[str, Price]
) -> float:
    """Cost of one call in USD (0.0 for a model without a price)."""
    price = price_of(model, table)
    if price is None:
        return 0.0
    return round(
        (input_tokens * price.input_per_m + output_tokens * price.output_per_m) / 1_000_000, 10
    )


def usage_for(
    model: str, input_tokens: int, output_tokens: int, table: Mapping[str, Price]
) -> Usage:
    """The Usage of one call: its tokens and their cost, under ``by_model[model]`` too."""
    spent = ModelUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=cost_usd(model, input_tokens, output_tokens, table),
        calls=1,
    )
    return Usage(**spent.model_dump(), by_model={model: spent})
