"""Replay a list of edits (JSON) through TextBuffer and print the final text.

    python -m textbuffer.replay edits.json

The file holds ``{"start": "text", "edits": [{"op": "insert", ...}, ...]}``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from textbuffer import TextBuffer


def replay(data: dict) -> str:
    buffer = TextBuffer(data.get("start", ""))
    for edit in data["edits"]:
        buffer.apply(edit)
    return buffer.text


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m textbuffer.replay EDITS.json", file=sys.stderr)
        return 2
    data = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    print(replay(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
