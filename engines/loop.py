"""Loop memory: a fingerprint of (action, page) so the same action on an unchanged page is noticed."""

from __future__ import annotations

import xxhash

from veriloop.engines.skeleton import page_identity
from veriloop.schemas.actions import Action, ActionParseError, parse_action
from veriloop.schemas.observation import BeforeState


def _normalized_action(action: Action | str) -> str:
    if isinstance(action, Action):
        return action.to_string()
    try:
        return parse_action(action).to_string()
    except ActionParseError:
        return " ".join(str(action).split())


def _page_identity(page_state: BeforeState) -> bytes:
    # Without what changes on its own, so a page that only "ticked" keeps its fingerprint.
    if page_state.semantic_skeleton is not None:
        try:
            return page_identity(page_state.semantic_skeleton)
        except TypeError:  # a foreign before_state holding what JSON cannot: its hash stands in
            pass
    return f"hash:{page_state.dom_hash}".encode()


def action_fingerprint(action: Action | str, page_state: BeforeState) -> str:
    """A stable digest of the action (canonical protocol form; protocol text, or the action read
    from it) and the page it acts on (URL + skeleton).

    ``click( 5 )`` and ``click(5)`` on the same page give the same fingerprint; a changed
    interactive element or URL gives another.
    """
    # Only ever compared with the task's earlier fingerprints, so a fast non-cryptographic 128-bit
    # digest does (as for the DOM hash): a page crafted to collide could only make an action look
    # repeated, which escalates to correction and replanning, never to a success.
    head = "\n".join((_normalized_action(action), page_state.url, "")).encode("utf-8", "replace")
    return xxhash.xxh3_128_hexdigest(head + _page_identity(page_state))
