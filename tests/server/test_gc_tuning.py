"""A served process keeps the collector cheap; a process that embeds the graph keeps its own settings."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

from veriloop.server.app import create_app
from veriloop.server.main import GC_THRESHOLD
from veriloop.server.settings import Settings

PROBE = """
import gc, json
from veriloop.server.main import app_from_env
before = gc.get_freeze_count()
app_from_env()
print(json.dumps({"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count() - before}))
"""


def test_the_served_app_freezes_the_import_heap_and_collects_young_objects_less_often(tmp_path):
    env = {**os.environ, "VERILOOP_DATABASE_URL": f"sqlite:///{tmp_path / 'tasks.sqlite'}"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert tuple(probe["threshold"]) == GC_THRESHOLD
    assert probe["frozen"] > 10_000  # the modules, schemas and graph built so far


def test_building_the_app_elsewhere_leaves_the_collector_alone(tmp_path):
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    create_app(Settings(database_url=f"sqlite:///{tmp_path / 'tasks.sqlite'}"))
    assert (gc.get_threshold(), gc.get_freeze_count()) == (threshold, frozen)
