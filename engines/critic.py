"""Critic approval, read only from the <Approved>YES</Approved> / <Approved>NO</Approved> tag."""

from __future__ import annotations

import re

_APPROVED_TAG = re.compile(r"<Approved>(YES|NO)</Approved>")


def parse_critic_response(text: str | None) -> bool:
    """True only for a review whose tags all say ``<Approved>YES</Approved>``.

    No tag, a misspelt tag, free text such as "approved", or tags that
    disagree all mean "not approved".
    """
    verdicts = set(_APPROVED_TAG.findall(text or ""))
    return verdicts == {"YES"}
