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
    "audit",
]
"""Why a model call was made. The plan graph reuses planning (writing a manifest), replanning and
critic, and adds execution (an ``llm`` step's tool-calling turns) and review (a critical step's LLM
review check). ``audit`` is the browser graph's finish audit (its usage counts as verification)."""
PURPOSES: tuple[str, ...] = Purpose.__args__


class Usage(WireModel):
    """Tokens, cost and calls for one call or an accumulated total."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    latency_ms: float = 0.0
    """Wall time spent waiting for the model (retries included)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=round(self.cost_usd + other.cost_usd, 10),
            calls=self.calls + other.calls,
            latency_ms=round(self.latency_ms + other.latency_ms, 3),
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
