"""What changed after an action: the page-state capture and the observation list (seed Step 5.2).

One parse of the current page serves both the observation list and the
``before_state`` of the next action (:attr:`ObservationList.page_state`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from veriloop.engines.dom_context import CompactPage, compact_tree
from veriloop.engines.page_hash import utf8_and_digest, whitespace_free_digest
from veriloop.engines.skeleton import (
    carry_background,
    describe_element,
    diff_skeletons,
    parse_utf8,
    skeleton_from_tree,
    to_utf8,
)
from veriloop.schemas.actions import Action, ActionParseError, parse_action
from veriloop.schemas.observation import BeforeState, ClientObservations
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR

_log = logging.getLogger("veriloop.observation")

URL_UNCHANGED = "URL did not change"
CONTENT_UPDATED_NO_SKELETON_CHANGE = (
    "No interactive element or alert changed (other markup differs)"
)
CONTENT_UNCHANGED_SKELETON = "Page content did not change (no interactive element or alert changes)"
CONTENT_UPDATED_HASH = "Page content updated (DOM changed)"
CONTENT_UNCHANGED_HASH = "Page content did not change (DOM hash identical)"
NETWORK_WITNESSED = "Background network activity detected"
MUTATION_WITNESSED = "DOM was mutated"
CLIENT_URL_CHANGED = "The browser client reported a URL change"
CLIENT_URL_UNCHANGED = "The browser client reported no URL change"


def _hash(data: bytes) -> str:
    # An identity, not a seal: it is only compared with the previous page's hash (and stands in a
    # fingerprint when there is no skeleton), never trusted to prove what a page held. So a fast
    # non-cryptographic 128-bit hash does: XXH3 reads a page in a fraction of SHA-256's time, and
    # 128 bits keep accidental collisions out of reach. A page crafted to collide could at worst
    # make a change look like none where there is no skeleton: a failed verification (or a
    # repeat), never a success.
    return whitespace_free_digest(data)


def _utf8_and_hash(html: str | bytes | None) -> tuple[bytes, str]:
    """The page's UTF-8 bytes (:func:`~veriloop.engines.skeleton.to_utf8`) and their DOM hash; a page
    given as text is encoded and hashed in one pass."""
    if isinstance(html, str):
        return utf8_and_digest(html)
    data = to_utf8(html)
    return data, _hash(data)


def compute_dom_hash(html: str | bytes | None) -> str:
    """XXH3-128 of the page with all whitespace removed: whitespace-only edits keep the hash.

    Text and the same page's bytes in its declared charset hash alike.
    """
    return _utf8_and_hash(html)[1]


def capture_page_state(
    url: str,
    dom: str | bytes | None,
    active_element: str | None = None,
    background_from: dict | None = None,
) -> BeforeState:
    """The page as an action is chosen on it: URL, DOM hash and skeleton from one parse.

    ``background_from``: the skeleton of the previous page; the elements it knew as background
    stay background here. ``semantic_skeleton`` is None when extraction failed; verification then
    compares hashes only.
    """
    return _capture(url, dom, active_element, background_from, compact=False)[0]


def stored_page_state(
    url: str, dom: str | bytes | None, active_element: str | None
) -> tuple[dict[str, Any], CompactPage | None]:
    """:func:`capture_page_state` in the form graph state keeps (:meth:`BeforeState.stored`), and
    the page's compact form for the prompts from the same parse (a task's first page)."""
    state, page = _capture(url, dom, active_element, None, compact=True)
    return state.stored(), page


def _capture(
    url: str,
    dom: str | bytes | None,
    active_element: str | None,
    background_from: dict | None,
    *,
    compact: bool,
) -> tuple[BeforeState, CompactPage | None]:
    """:func:`capture_page_state`, and with ``compact`` the page's compact form from the same parse."""
    data, dom_hash = _utf8_and_hash(dom)
    page = None
    try:
        root = parse_utf8(data)
        carry_background(root, background_from)
        skeleton = skeleton_from_tree(root)
    except (
        Exception
    ):  # a skeleton is an optimisation: without one, verification falls back to the hash
        _log.warning(
            "semantic skeleton extraction failed; keeping url and dom hash only", exc_info=True
        )
        skeleton = None
    else:
        if compact and dom is not None:
            page = compact_tree(root, len(dom))
    state = BeforeState(
        url=url, dom_hash=dom_hash, active_element=active_element, semantic_skeleton=skeleton
    )
    return state, page


@dataclass
class ObservationList:
    """Observations of what an action changed, and the flags verification decides on."""

    observations: list[str]
    meaningful_content_change: bool
    url_changed: bool
    client_saw_something: bool
    page_state: dict[str, Any]
    """The current page as the next action's ``before_state``, from the same parse, in the form
    graph state keeps (:meth:`BeforeState.stored`)."""
    compact_page: CompactPage | None = None
    """The current page's compact form for the next prompt, from the same parse (``keep_compact``)."""


def _content_observations(
    before: BeforeState, now: BeforeState, has_dom: bool, target: str | None
) -> tuple[list[str], bool]:
    """Skeleton-primary page-content lines and whether the change is meaningful."""
    hash_changed = before.dom_hash != now.dom_hash
    if has_dom and before.semantic_skeleton is not None and now.semantic_skeleton is not None:
        try:
            lines = diff_skeletons(before.semantic_skeleton, now.semantic_skeleton, target=target)
        except (
            Exception
        ):  # any skeleton problem (old or foreign before_state): hash-only, per Step 5.2
            _log.warning("skeleton diff failed; falling back to the DOM hash", exc_info=True)
        else:
            if lines:
                return lines, True
            # Tickers, ads and other background change the hash but nothing a user would call a change.
            return [
                CONTENT_UPDATED_NO_SKELETON_CHANGE if hash_changed else CONTENT_UNCHANGED_SKELETON
            ], False
    return [CONTENT_UPDATED_HASH if hash_changed else CONTENT_UNCHANGED_HASH], hash_changed


def _client_lines(client: ClientObservations | None) -> list[str]:
    if client is None:
        return []
    lines = []
    if client.did_network_occur:
        lines.append(NETWORK_WITNESSED)
    if client.did_dom_mutate:
        lines.append(MUTATION_WITNESSED)
    if client.did_url_change is not None:
        lines.append(CLIENT_URL_CHANGED if client.did_url_change else CLIENT_URL_UNCHANGED)
    return lines


def _parsed(action: Action | str | None) -> Action | None:
    if isinstance(action, str):
        try:
            return parse_action(action)
        except ActionParseError:
            return None
    return action


def _focus_taken(
    action: Action | None, before: BeforeState, now: BeforeState, active_element: str | None
) -> str | None:
    """A line when a click moved focus onto the element it clicked, else None.

    The browser focuses a clicked element only when the click reached it and it is enabled (not
    covered, not disabled): evidence the click landed, worth a verdict rather than a fast
    ``no_effect``. Not for an element that already was the current one (a selected tab).
    """
    if action is None or action.kind != "click" or active_element is None:
        return None
    number = f'[{ELEMENT_ID_ATTR}="{action.element_id}"]'
    if number not in active_element or number in (before.active_element or ""):
        return None
    elements = (now.semantic_skeleton or {}).get("elements", {})
    desc = elements.get(str(action.element_id))
    if not isinstance(desc, dict) or desc.get("aria-selected") == "true":
        return None
    if desc.get("aria-current", "false") != "false":
        return None
    return f"The clicked element {describe_element(str(action.element_id), desc)} took focus"


def build_observation_list(
    before_state: BeforeState,
    current_dom: str | bytes | None,
    current_url: str,
    client_observations: ClientObservations | None = None,
    current_active_element: str | None = None,
    action: Action | str | None = None,
    *,
    keep_compact: bool = False,
) -> ObservationList:
    """Compare the page now with ``before_state``: URL, skeleton diff (hash fallback), focus, client witness.

    ``action`` (the one being verified, object or protocol text) names the element it targeted: a
    background change of that element is its effect, not noise, and a click that moved focus onto
    its element is a change (see :func:`_focus_taken`). ``keep_compact``: also make the page's
    compact form for the next prompt from the same parse (:attr:`ObservationList.compact_page`).
    """
    now, page = _capture(
        current_url,
        current_dom,
        current_active_element,
        before_state.semantic_skeleton,
        compact=keep_compact,
    )
    url_changed = before_state.url != current_url
    observations = [
        f"Navigation occurred: URL changed from {before_state.url} to {current_url}"
        if url_changed
        else URL_UNCHANGED
    ]
    action = _parsed(action)
    target = None if action is None or action.element_id is None else str(action.element_id)
    content, meaningful = _content_observations(before_state, now, bool(current_dom), target)
    observations += content
    # Only a reported focus can have changed; a client that sends none says nothing about focus.
    if current_active_element is not None and current_active_element != before_state.active_element:
        observations.append(
            f"Focus changed from {before_state.active_element or 'nothing'} to {current_active_element}"
        )
    focus = _focus_taken(action, before_state, now, current_active_element)
    if focus is not None:
        observations.append(focus)
        meaningful = True
    observations += _client_lines(client_observations)
    return ObservationList(
        observations=observations,
        meaningful_content_change=meaningful,
        url_changed=url_changed,
        client_saw_something=bool(client_observations and client_observations.saw_something),
        page_state=now.stored(),
        compact_page=page,
    )
