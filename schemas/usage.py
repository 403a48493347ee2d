"""Token usage and cost, accumulated per purpose."""

from __future__ import annotations

from typing import Literal

from veriloop.schemas.base import WireModel

Purpose = Literal[
    "planning",
    "refinement",
    "action",
    "verification",
    "correction",
    "replanning",
    "critic",
    "execution",
    "review",
    "grounding",
    "audit",
]
"""Why a model call was made. The plan graph reuses planning (writing a manifest), replanning and
critic, and adds execution (an ``llm`` step's tool-calling turns) and review (a critical step's LLM
review check). grounding is a verifier's web lookup (a search provider's call, priced like a model's).
``audit`` is the browser graph's finish audit (its usage counts as verification)."""
PURPOSES: tuple[str, ...] = Purpose.__args__


class ModelUsage(WireModel):
    """Tokens, cost and calls of one model (or search provider) within a :class:`Usage`."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0

    def __add__(self, other: ModelUsage) -> ModelUsage:
        return ModelUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=round(self.cost_usd + other.cost_usd, 10),
            calls=self.calls + other.calls,
        )

    def __sub__(self, other: ModelUsage) -> ModelUsage:
        return ModelUsage(
            input_tokens=self.input_tokens - other.input_tokens,
            output_tokens=self.output_tokens - other.output_tokens,
            cost_usd=round(self.cost_usd - other.cost_usd, 10),
            calls=self.calls - other.calls,
        )


class Usage(WireModel):
    """Tokens, cost and calls for one call or an accumulated total."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    latency_ms: float = 0.0
    """Wall time spent waiting for the model (retries included)."""
    by_model: dict[str, ModelUsage] = {}
    """The same tokens, cost and calls split by the model (or search provider) that served them."""

    def __add__(self, other: Usage) -> Usage:
        by_model = dict(self.by_model)
        for model, usage in other.by_model.items():
            by_model[model] = by_model[model] + usage if model in by_model else usage
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=round(self.cost_usd + other.cost_usd, 10),
            calls=self.calls + other.calls,
            latency_ms=round(self.latency_ms + other.latency_ms, 3),
            by_model=by_model,
        )

    def __sub__(self, earlier: Usage) -> Usage:
        """What was added since ``earlier`` (a previous total of the same counter)."""
        by_model = {
            model: usage - earlier.by_model[model] if model in earlier.by_model else usage
            for model, usage in self.by_model.items()
            if usage != earlier.by_model.get(model)
        }
        return Usage(
            input_tokens=self.input_tokens - earlier.input_tokens,
            output_tokens=self.output_tokens - earlier.output_tokens,
            cost_usd=round(self.cost_usd - earlier.cost_usd, 10),
            calls=self.calls - earlier.calls,
            latency_ms=round(self.latency_ms - earlier.latency_ms, 3),
            by_model=by_model,
        )


def add_usage(left: dict[str, dict] | None, right: dict[str, dict] | None) -> dict[str, dict]:
    """Merge two ``{purpose: Usage dict}`` maps by adding per purpose (a LangGraph reducer)."""
    merged = dict(left or {})
    for purpose, usage in (right or {}).items():
        total = Usage.model_validate(merged.get(purpose, {})) + Usage.model_validate(usage)
        merged[purpose] = total.model_dump()
    return merged


def total_usage(by_purpose: dict[str, dict] | None) -> Usage:
    """The sum over all purposes."""
    total = Usage()
    for usage in (by_purpose or {}).values():
        total = total + Usage.model_validate(usage)
    return total


def usage_by_purpose_and_model(
    by_purpose: dict[str, dict] | None,
) -> list[tuple[str, str, ModelUsage]]:
    """``(purpose, model, usage)`` rows, purposes in :data:`PURPOSES` order, models by name."""
    rows = []
    order = {name: index for index, name in enumerate(PURPOSES)}
    for purpose in sorted(by_purpose or {}, key=lambda name: (order.get(name, len(order)), name)):
        usage = Usage.model_validate(by_purpose[purpose])
        for model in sorted(usage.by_model):
            rows.append((purpose, model, usage.by_model[model]))
    return rows
