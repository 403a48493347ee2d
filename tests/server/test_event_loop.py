"""``veriloop serve`` runs on uvloop and httptools, not on uvicorn's pure-Python fallbacks."""

from __future__ import annotations

from importlib.metadata import requires

import psutil
from packaging.requirements import Requirement


def test_the_serving_process_runs_uvloop_and_httptools(process_servers, tmp_path):
    # uvicorn's "auto" falls back to asyncio and h11 when these are missing, costing the serving
    # process about 1.5 ms a step (server/main.py): the running process must have loaded both.
    server = process_servers(f"sqlite:///{tmp_path / 'tasks.sqlite'}")
    assert server.client().get("/healthz").status_code == 200
    paths = [m.path for m in psutil.Process(server.process.pid).memory_maps()]
    assert any("/uvloop/loop." in path for path in paths), paths
    assert any("/httptools/parser/parser." in path for path in paths), paths


def test_a_plain_install_brings_them():
    # The dev extras pull both in through langgraph-api, so only the package's own requirements
    # show that a plain ``pip install veriloop`` serves on them too.
    names = {Requirement(spec).name for spec in requires("veriloop") if "extra ==" not in spec}
    assert {"uvloop", "httptools"} <= names
