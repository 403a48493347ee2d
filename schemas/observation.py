"""What a client sends about the page, and the page state recorded when an action is chosen."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import Field, field_validator

from veriloop.schemas.base import WireModel


class ClientObservations(WireModel):
    """What the client witnessed between executing the last action and taking this snapshot."""

    did_network_occur: bool | None = Field(
        default=None, description="fetch/XHR/resource activity happened."
    )
    did_dom_mutate: bool | None = Field(
        default=None, description="A MutationObserver saw DOM mutations."
    )
    did_url_change: bool | None = Field(default=None, description="The page URL changed.")

    @property
    def saw_something(self) -> bool:
        """True when the client witnessed any change at all."""
        return bool(self.did_network_occur or self.did_dom_mutate or self.did_url_change)


class ClientVerification(WireModel):
    """The client's own check of an expected element (prediction path)."""

    element_found: bool
    selector: str | None = None
    url_changed: bool | None = None


class Observation(WireModel):
    """One snapshot of the page a client sends: the input of one graph invocation."""

    url: str = Field(description="The page URL now.")
    dom: str = Field(description="The page's outerHTML as written by the snapshot script.")
    query: str | None = Field(
        default=None, description="The user's goal (required for a new task)."
    )
    task_id: str | None = Field(
        default=None, description="The task this snapshot continues; none starts a task."
    )
    session_id: str | None = Field(
        default=None, description="The client's session (chat thread / tab)."
    )
    active_element: str | None = Field(
        default=None, description="Descriptor of the focused element."
    )
    client_observations: ClientObservations | None = None
    client_verification: ClientVerification | None = None
    previous_url: str | None = Field(
        default=None, description="The URL before the last action, if known."
    )


def _element_count(skeleton: Mapping[str, Any]) -> int:
    return len(skeleton.get("elements", ()))


class BeforeState(WireModel):
    """The page as it was when an action was chosen; verification compares the next page against it."""

    url: str
    dom_hash: str
    active_element: str | None = None
    semantic_skeleton: dict[str, Any] | None = Field(
        default=None,
        description="Interactive elements, messages, page text blocks, background marks and scroll;"
        " None when extraction failed.",
    )

    @field_validator("semantic_skeleton", mode="before")
    @classmethod
    def _parsed(cls, value: Any) -> Any:
        if not isinstance(value, str | bytes):
            return value
        # Text that is not a skeleton is a lost skeleton, as when extraction fails, not a lost
        # step: verification compares hashes instead.
        try:
            parsed = orjson.loads(value)  # every step reads one: orjson is the fastest reader here
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None

    def stored(self) -> dict[str, Any]:
        """The dump graph state keeps: the skeleton as compact JSON text, beside its element count.

        The serving process stores, loads and forwards a page state at every step; as text it
        does so without building and walking the skeleton's hundreds of small dicts. Only the page
        work, which compares skeletons, parses it (this model accepts either form)."""
        skeleton = self.semantic_skeleton
        return {
            "url": self.url,
            "dom_hash": self.dom_hash,
            "active_element": self.active_element,
            "semantic_skeleton": None if skeleton is None else orjson.dumps(skeleton).decode(),
            "skeleton_elements": None if skeleton is None else _element_count(skeleton),
        }


class BeforeStateSummary(WireModel):
    """The page an action was chosen on, without the skeleton itself (what a history record keeps)."""

    url: str
    dom_hash: str
    active_element: str | None = None
    skeleton_elements: int | None = Field(
        default=None,
        description="Elements in the semantic skeleton; None when it was not extracted.",
    )

    @classmethod
    def of(cls, before_state: Mapping[str, Any]) -> BeforeStateSummary:
        """The summary of a BeforeState dump, stored (``BeforeState.stored``) or whole, or of a summary
        (records of older tasks carry any of these)."""
        skeleton = before_state.get("semantic_skeleton")
        return cls(
            url=before_state["url"],
            dom_hash=before_state["dom_hash"],
            active_element=before_state.get("active_element"),
            skeleton_elements=_element_count(skeleton)
            if isinstance(skeleton, dict)
            else before_state.get("skeleton_elements"),
        )
