"""The page work of a step gives the same outputs as the code the digests were recorded with.

For every corpus page, the verification benchmark's before/after pair and one change of every
class of ``benchmarks.observation_mutations``: the task's first page as captured
(``stored_page_state``, with its compact page) and the step on the page after (``observe_page``:
observations, flags, page state, compact page, fingerprint). Each case's outputs are digested;
``page_outputs.json`` holds the digests recorded before the page work was rewritten for speed
(issue 34), so the compiled walk, the compiled markup scan and the shared parse must reproduce
the old outputs byte for byte. The DOM hash, the fingerprint and the digests of cut text blocks
themselves are left out (their functions changed): only whether the two pages' hashes, and the
action's fingerprints on them, are equal is compared.

Re-record (only for an intended change of the outputs, and say so in the commit)::

    PYTHONPATH=. python tests/engines/test_page_equivalence.py
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.observation_mutations import transitions
from benchmarks.verification_pairs import DEFAULT_CORPUS, PAGE_URL, load_pairs
from veriloop.engines.dom_context import CompactPage
from veriloop.engines.loop import action_fingerprint
from veriloop.engines.observation import stored_page_state
from veriloop.engines.verification import observe_page
from veriloop.schemas.observation import BeforeState

DIGESTS = Path(__file__).with_name("page_outputs.json")
ACTION = "click(5)"


# A cut text block's digest (its function changed too): whether two pages' blocks differ past
# the cut is still pinned, by the observations that report the change.
_DIGEST = re.compile("…#[g-v]{10}")


def _without_hash(state: dict[str, Any]) -> dict[str, Any]:
    kept = {key: value for key, value in state.items() if key != "dom_hash"}
    if isinstance(kept.get("semantic_skeleton"), str):
        kept["semantic_skeleton"] = _DIGEST.sub("…#", kept["semantic_skeleton"])
    return kept


def _compact(page: CompactPage | None) -> list | None:
    return None if page is None else [page.html, sorted(page.element_ids), page.source_chars]


def step_outputs(before: str, after: str) -> dict[str, Any]:
    """What a task's first page and the next step make of ``before`` and ``after``."""
    first, first_page = stored_page_state(PAGE_URL, before, None)
    observed, fingerprint = observe_page(first, after, PAGE_URL, None, None, ACTION)
    return {
        "first": _without_hash(first),
        "first_compact": _compact(first_page),
        "observations": observed.observations,
        "meaningful": observed.meaningful_content_change,
        "url_changed": observed.url_changed,
        "page_state": _without_hash(observed.page_state),
        "same_hash": first["dom_hash"] == observed.page_state["dom_hash"],
        "compact": _compact(observed.compact_page),
        "same_fingerprint": fingerprint
        == action_fingerprint(ACTION, BeforeState.model_validate(observed.page_state)),
    }


def _digest(outputs: dict[str, Any]) -> str:
    text = json.dumps(outputs, sort_keys=True, ensure_ascii=False)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def cases() -> Iterator[tuple[str, str, str]]:
    """``(case name, page before, page after)`` over the whole corpus."""
    for pair in load_pairs(DEFAULT_CORPUS):
        yield f"pair/{pair.name}", pair.before, pair.after
        for name, _, before, after in transitions(DEFAULT_CORPUS / pair.name, 1, 0):
            yield f"{name}/{pair.name}", before, after


def digests() -> dict[str, str]:
    return {name: _digest(step_outputs(before, after)) for name, before, after in cases()}


def test_page_work_reproduces_the_recorded_outputs():
    expected = json.loads(DIGESTS.read_text())
    found = digests()
    assert found.keys() == expected.keys(), "the corpus or the mutation classes changed"
    differing = sorted(name for name in expected if found[name] != expected[name])
    assert not differing, f"{len(differing)} cases differ, first: {differing[:10]}"


if __name__ == "__main__":
    DIGESTS.write_text(json.dumps(digests(), indent=0, sort_keys=True) + "\n")
    print(f"wrote {DIGESTS}")
