"""Both notebooks run offline, top to bottom, with the command the README gives (`make notebooks`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
COMMAND = "make notebooks"
EXECUTED = ROOT / "build" / "notebooks"


def _text(cell) -> str:
    return "\n".join(
        output.get("text", "") + str(output.get("data", {}).get("text/plain", ""))
        for output in cell.get("outputs", [])
    )


def _images(cell) -> list[str]:
    return [
        o["data"]["image/png"] for o in cell.get("outputs", []) if "image/png" in o.get("data", {})
    ]


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> dict[str, nbformat.NotebookNode]:
    assert f"{COMMAND} " in (ROOT / "README.md").read_text()  # the command users are told to run
    # A temp folder of its own: /tmp is shared with other processes that may leave folders there.
    temp = tmp_path_factory.mktemp("notebook-temp")
    for stale in EXECUTED.glob("*.ipynb"):
        stale.unlink()
    done = subprocess.run(
        COMMAND.split(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "TMPDIR": str(temp)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not list(temp.glob("miniwob-eval-*"))  # the eval notebook cleans up after itself
    return {
        path.name: nbformat.read(path, as_version=4) for path in sorted(EXECUTED.glob("*.ipynb"))
    }


@pytest.mark.parametrize("name", ["quickstart.ipynb", "miniwob_eval.ipynb"])
def test_notebooks_are_stored_without_outputs(name: str) -> None:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert all(not cell.get("outputs") for cell in nb.cells if cell.cell_type == "code")


def test_quickstart_draws_the_graph_and_completes_the_task(executed) -> None:
    code = [c for c in executed["quickstart.ipynb"].cells if c.cell_type == "code"]
    drawing = next(c for c in code if "graph_png" in c.source)
    (png,) = _images(drawing)  # a picture, not Mermaid text
    assert len(png) > 10_000
    text = "\n".join(_text(c) for c in code)
    assert "scripted model (scripted-playbook)" in text
    assert "agent status: completed" in text and ", Jas" in text
    assert (
        "model=False" in text and "model=True" in text
    )  # a fast no-change failure and model verdicts
    assert "$0.0000" in text


def test_the_eval_notebook_shows_the_false_claim_and_the_plot(executed) -> None:
    cells = executed["miniwob_eval.ipynb"].cells
    text = "\n".join(_text(c) for c in cells if c.cell_type == "code")
    assert "'done': {'success': 5, 'failure': 1}" in text
    assert "Scripted run" in text
    assert any(_images(c) for c in cells if c.cell_type == "code")
