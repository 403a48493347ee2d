"""The whole buffer: insert, delete, undo and redo together (the plan's synthesis gate)."""

import json
import subprocess
import sys

from textbuffer import TextBuffer
from textbuffer.replay import replay


def test_edit_undo_redo_round_trip():
    buffer = TextBuffer("hello")
    buffer.insert(5, " world")
    buffer.delete(0, 1)
    assert buffer.text == "ello world"
    assert buffer.undo() == "hello world"
    assert buffer.undo() == "hello"
    assert buffer.redo() == "hello world"
    buffer.insert(0, ">")
    assert buffer.text == ">hello world"
    assert buffer.undo() == "hello world"


def test_a_failed_edit_changes_nothing():
    buffer = TextBuffer("abc")
    try:
        buffer.delete(2, 9)
    except IndexError:
        pass
    assert buffer.text == "abc"
    try:
        buffer.undo()
    except IndexError:
        pass
    else:
        raise AssertionError("a failed edit must not be undoable")


def test_replay_from_the_command_line(tmp_path):
    edits = {
        "start": "abc",
        "edits": [
            {"op": "insert", "pos": 3, "text": "def"},
            {"op": "delete", "start": 0, "end": 1},
            {"op": "undo"},
        ],
    }
    path = tmp_path / "edits.json"
    path.write_text(json.dumps(edits))
    assert replay(edits) == "abcdef"
    done = subprocess.run(
        [sys.executable, "-m", "textbuffer.replay", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "abcdef"
