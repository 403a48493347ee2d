"""The page contract shared by every browser client and the skeleton extractor.

The snapshot script (``runners/browser/snapshot.js``) writes exactly these names and
the extractor (``engines/skeleton.py``) reads exactly these names; a test
checks that the script spells them the same way.
"""

ELEMENT_ID_ATTR = "data-veriloop-id"
"""Stable number of an interactive element; actions name it, e.g. click(12) -> [data-veriloop-id="12"]."""

HIDDEN_ATTR = "data-veriloop-hidden"
"""Set to "1" on elements the browser does not render (display:none, visibility:hidden, zero size)."""

BACKGROUND_ATTR = "data-veriloop-background"
"""What changed on its own on this element while no action was pending: space-separated tokens of
:data:`BACKGROUND_KINDS` (``"text"``, ``"href src"``). A clock, a relative time, a ticker, a rotating
ad. The diff ignores such a change unless the action targeted the element."""

BACKGROUND_KINDS = ("text", "href", "src")
"""``text``: the element's own text; ``href`` / ``src``: that attribute."""

SCROLL_ATTR = "data-veriloop-scroll"
"""On ``<html>``: the window's scroll position when the snapshot was taken, ``"x,y"`` in CSS pixels."""

VIEWPORT_ATTR = "data-veriloop-viewport"
"""On ``<html>``: the numbers (:data:`ELEMENT_ID_ATTR`) of the elements inside the viewport,
space-separated, ranges written ``"3-9"`` (``"1-4 7 12-15"``)."""

LIVE_STATE_ATTRS = ("value", "checked", "selected")
"""Live properties the script mirrors into these standard attributes of the snapshot (not of the live page).

contenteditable text is already in the DOM; aria-* states are already attributes.
"""
