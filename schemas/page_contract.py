"""The page contract shared by every browser client and the skeleton extractor.

The snapshot script (``runners/browser/snapshot.js``) writes exactly these names and
the extractor (``engines/skeleton.py``) reads exactly these names; a test
checks that the script spells them the same way.
"""

ELEMENT_ID_ATTR = "data-veriloop-id"
"""Stable number of an interactive element; actions name it, e.g. click(12) -> [data-veriloop-id="12"]."""

HIDDEN_ATTR = "data-veriloop-hidden"
"""Set to "1" on elements the browser does not render (display:none, visibility:hidden, zero size)."""

LIVE_STATE_ATTRS = ("value", "checked", "selected")
"""Live properties the script mirrors into these standard attributes of the snapshot (not of the live page).

contenteditable text is already in the DOM; aria-* states are already attributes.
"""
