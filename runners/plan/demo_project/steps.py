"""The demo manifest's python step. It runs in a process of its own, which loads this file by its
path: standard library only (the sandbox shows the step this file, not veriloop's source)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any


def sample_edits(input: Any = None, depends: Any = None) -> dict[str, Any]:
    """Sample edits for the gate, written to ``edits.json`` in the workspace (the step's working
    directory), with the text a reference model of the buffer (independent of the code the agent
    writes) ends with: ``input["count"]`` valid edits of ``input["start"]`` (insert, delete,
    undo, redo), drawn with ``input["seed"]``."""
    options = dict(input or {})
    start, count = options.get("start", "veriloop"), options.get("count", 6)
    rng = random.Random(options.get("seed", 7))
    text, undo, redo = start, [], []
    edits: list[dict[str, Any]] = []
    while len(edits) < count:
        choice = rng.choice(["insert", "insert", "delete", "undo", "redo"])
        if choice == "insert":
            pos, word = rng.randint(0, len(text)), rng.choice(["ab", " x", "-", "yz "])
            edits.append({"op": "insert", "pos": pos, "text": word})
            undo.append(text)
            redo.clear()
            text = text[:pos] + word + text[pos:]
        elif choice == "delete" and text:
            begin = rng.randint(0, len(text) - 1)
            end = rng.randint(begin, min(len(text), begin + 3))
            edits.append({"op": "delete", "start": begin, "end": end})
            undo.append(text)
            redo.clear()
            text = text[:begin] + text[end:]
        elif choice == "undo" and undo:
            edits.append({"op": "undo"})
            redo.append(text)
            text = undo.pop()
        elif choice == "redo" and redo:
            edits.append({"op": "redo"})
            undo.append(text)
            text = redo.pop()
    Path("edits.json").write_text(
        json.dumps({"start": start, "edits": edits}, indent=1), encoding="utf-8"
    )
    return {"edits": edits, "expected": text, "file": "edits.json"}


TOOLS = {"sample_edits": sample_edits}
