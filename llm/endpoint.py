"""Which model produced a run, and through which kind of endpoint: the line every report starts with.

A run is *scripted* when its model is :data:`SCRIPTED_MODEL`, the name every offline playbook runs
under (the demos, the MiniWoB++ eval, the notebooks). No price is known for that name, so a
scripted run costs $0; a loopback server reached under a real model name is priced like that model.
"""

from __future__ import annotations

import os
from typing import Literal

from veriloop.context import Context
from veriloop.schemas.base import WireModel

SCRIPTED_MODEL = "scripted-playbook"
"""The model name of the offline scripted playbooks (canned answers from a loopback server)."""

EndpointKind = Literal["scripted", "openai", "openai-compatible", "service"]


class ModelEndpoint(WireModel):
    """The model of a run and the kind of endpoint that served it."""

    model: str
    """The model name sent with every call."""
    endpoint: EndpointKind
    """scripted (canned answers on loopback), openai (the SDK's default endpoint), openai-compatible,
    or service (a veriloop service chose the model; ``model`` is unknown here)."""
    base_url: str | None = None
    """The server's URL (None for OpenAI's own endpoint)."""

    @property
    def scripted(self) -> bool:
        return self.endpoint == "scripted"

    @property
    def where(self) -> str:
        """The endpoint in words: OpenAI, or the server's URL."""
        if self.endpoint == "openai":
            return "OpenAI"
        if self.endpoint == "service":
            return f"the veriloop service at {self.base_url}"
        kind = "a loopback scripted" if self.scripted else "an OpenAI-compatible"
        return f"{kind} server at {self.base_url}"

    @property
    def label(self) -> str:
        """One line for the top of a report or the console."""
        if self.scripted:
            return (
                f"scripted model ({self.model}): canned answers from an offline playbook on a "
                "loopback server, not a real model; cost $0"
            )
        if self.endpoint == "service":
            return f"the model {self.where} is configured with"
        return f"model {self.model} on {self.where}"


def model_configured() -> bool:
    """True when the environment names a model provider (OPENAI_API_KEY or OPENAI_BASE_URL)."""
    return bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))


def describe_model(context: Context | None = None) -> ModelEndpoint:
    """The :class:`ModelEndpoint` that ``context`` (and ``OPENAI_BASE_URL``) select, as get_llm does."""
    ctx = context or Context()
    base_url = ctx.base_url or os.environ.get("OPENAI_BASE_URL") or None
    if ctx.model == SCRIPTED_MODEL:
        return ModelEndpoint(model=ctx.model, endpoint="scripted", base_url=base_url)
    if base_url is None:
        return ModelEndpoint(model=ctx.model, endpoint="openai")
    return ModelEndpoint(model=ctx.model, endpoint="openai-compatible", base_url=base_url)
