"""MiniWoB++ through a real local model, behind a recording proxy: claims against the pages' truth
and how many answers parsed.

Start a server first (docs/models.md, llama-cpp-python recipe), then::

    .venv/bin/python -m benchmarks.local_model_eval --upstream http://127.0.0.1:8080/v1 \\
        --model smollm2 --episodes 3 --max-steps 4 --out /tmp/local-eval

It runs ``veriloop eval miniwob`` in-process (``run_miniwob``, the same code as the CLI) with
OPENAI_BASE_URL pointing at a :class:`~veriloop.llm.recording.RecordingProxy` in front of the
upstream, so every answer is judged against the JSON schema its request carried, independently of
veriloop's own parsing. Prints the confusion matrix, false completions per claimed completion,
the share of answers that failed to parse, and a last line ``RESULT k=v ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path

from veriloop.llm import clear_llm_cache
from veriloop.llm.recording import RecordingProxy
from veriloop.runners.miniwob.environment import DEFAULT_EPISODE_MAX_TIME_MS
from veriloop.runners.miniwob.harness import EvalConfig, run_miniwob
from veriloop.runners.miniwob.results import load_records, summarize

TASKS = "click-button,click-link,enter-text,click-checkboxes,click-dialog"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="The model server's /v1 base URL.")
    parser.add_argument("--model", required=True)
    parser.add_argument("--tasks", default=TASKS)
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=4)
    parser.add_argument(
        "--episode-seconds",
        type=int,
        default=DEFAULT_EPISODE_MAX_TIME_MS // 1000,
        help="MiniWoB's own time limit per episode: a slow CPU model needs more than the default",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=int(os.environ.get("VERILOOP_MAX_TOKENS", 320)),
        help="cap on each answer (VERILOOP_MAX_TOKENS; 0: none): a structured answer takes under "
        "200, and a small model rambling to the end of its context takes minutes a call",
    )
    parser.add_argument("--out", type=Path, default=Path("local-model-eval"))
    args = parser.parse_args()
    if args.max_tokens > 0:
        os.environ["VERILOOP_MAX_TOKENS"] = str(args.max_tokens)
    else:
        os.environ.pop("VERILOOP_MAX_TOKENS", None)

    # A slow local model may not finish every episode: SIGTERM reports the episodes recorded so far.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with RecordingProxy(args.upstream) as proxy:
        os.environ["OPENAI_BASE_URL"] = proxy.base_url
        os.environ.pop("OPENAI_API_KEY", None)
        clear_llm_cache()
        config = EvalConfig(
            tasks=args.tasks.split(","),
            episodes=args.episodes,
            out_dir=args.out,
            max_steps=args.max_steps,
            episode_max_time_ms=args.episode_seconds * 1000,
        )
        try:
            run_miniwob(config, model=args.model, scripted=False)
        except KeyboardInterrupt:
            print("interrupted: reporting the episodes recorded so far")
        exchanges = proxy.exchanges

    records = load_records(args.out)
    summary = summarize(records)
    answered = [e for e in exchanges if e.status == 200 and e.dialect is not None]
    failed_parse = [e for e in answered if not e.valid]
    needed_leniency = [e for e in answered if e.valid and not e.strict_json]
    claimed = summary.confusion["done"]["success"] + summary.confusion["done"]["failure"]
    print("confusion (claim x page):", json.dumps(summary.confusion))
    print(f"episodes {summary.episodes}, successes {summary.successes}, errors {summary.errors}")
    print(f"false completions {summary.false_completions} of {claimed} claimed completions")
    print(
        f"answers {len(answered)}: failed to parse {len(failed_parse)}, "
        f"parsed only leniently {len(needed_leniency)}; dialects "
        f"{sorted({e.dialect for e in exchanges if e.dialect})}"
    )
    for exchange in failed_parse[:5]:
        print("  parse failure:", exchange.purpose, exchange.problem)
    audits = sum(1 for e in exchanges if e.purpose == "audit")
    vetoes = sum(1 for r in records for v in r.verification_history if v.get("uncited_completion"))
    print(f"uncited completion claims {vetoes}, finish audits {audits}")
    share = len(failed_parse) / len(answered) if answered else 0.0
    print(
        f"RESULT episodes={summary.episodes} claimed={claimed} "
        f"false_completions={summary.false_completions} "
        f"false_per_claim={summary.false_completions / claimed if claimed else 0:.3f} "
        f"answers={len(answered)} parse_failures={len(failed_parse)} parse_failure_share={share:.3f} "
        f"lenient_only={len(needed_leniency)} successes={summary.successes} "
        f"uncited_claims={vetoes} audits={audits} model_calls={summary.model_calls}"
    )


if __name__ == "__main__":
    main()
