"""What a person would call the element an action targets: ``click(9)`` -> ``"Save"``.

Reports and the console show it beside the action, read from the page the action was chosen on:
the page's one parse names its numbered elements
(:attr:`~veriloop.engines.dom_context.CompactPage.names`), and
:meth:`~veriloop.engines.dom_context.CompactPage.target` shows a name at most
:data:`TARGET_CHARS` long.
"""

from __future__ import annotations

TARGET_CHARS = 60
"""A longer name is cut at a word boundary and ends with an ellipsis."""


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word boundary, with an ellipsis (and any quote it
    opened closed again) when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    cut = cut.rstrip(" ,;:") + "…"
    for quote in ("'", '"'):
        if cut.count(quote) % 2:
            cut += quote
    return cut
