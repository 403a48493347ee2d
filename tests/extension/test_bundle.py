"""`veriloop extension path` / `pack`: the extension's files, with the one snapshot script; CORS."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from veriloop.extension_bundle import write_extension
from veriloop.server.app import create_app
from veriloop.server.settings import Settings

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT_SOURCE = REPO / "runners" / "browser" / "snapshot.js"
EXTENSION_ID = "a" * 16 + "p" * 16


def _veriloop(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "veriloop", "extension", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_path_writes_a_loadable_folder_with_the_runners_snapshot_script(tmp_path: Path) -> None:
    folder = Path(_veriloop("path", "--dir", str(tmp_path / "ext"), cwd=tmp_path))
    assert folder == (tmp_path / "ext").resolve()
    # The one snapshot script: byte for byte the file the Playwright runner injects.
    assert (folder / "snapshot.js").read_bytes() == SNAPSHOT_SOURCE.read_bytes()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["manifest_version"] == 3
    [script] = manifest["content_scripts"]
    assert script == {
        "matches": ["<all_urls>"],
        "js": ["snapshot.js"],
        "run_at": "document_start",
        "world": "MAIN",
    }
    # Everything the manifest, the pages and the modules name is in the folder; nothing Chrome
    # refuses to load (names starting with "_") is.
    named = [manifest["background"]["service_worker"], manifest["side_panel"]["default_path"]]
    named.append(manifest["options_page"])
    for page in folder.glob("*.html"):
        named += re.findall(r'(?:src|href)="([^":]+)"', page.read_text())
    for module in folder.glob("*.js"):
        named += re.findall(r'from "\./([^"]+)"', module.read_text())
    assert named and all((folder / name).is_file() for name in named), named
    assert not [p for p in folder.rglob("*") if p.name.startswith("_")]


def test_path_replaces_an_older_copy(tmp_path: Path) -> None:
    folder = write_extension(tmp_path / "ext")
    (folder / "snapshot.js").write_text("stale")
    (folder / "removed-since.js").write_text("old")
    write_extension(folder)
    assert (folder / "snapshot.js").read_bytes() == SNAPSHOT_SOURCE.read_bytes()
    assert not (folder / "removed-since.js").exists()


def test_pack_writes_the_same_files_into_an_archive(tmp_path: Path) -> None:
    folder = write_extension(tmp_path / "ext")
    archive = Path(_veriloop("pack", "veriloop.zip", cwd=tmp_path))
    assert archive == (tmp_path / "veriloop.zip").resolve()
    with zipfile.ZipFile(archive) as zipped:
        packed = {name: zipped.read(name) for name in zipped.namelist()}
    on_disk = {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }
    assert packed == on_disk
    assert packed["snapshot.js"] == SNAPSHOT_SOURCE.read_bytes()


def _preflight(client: TestClient, origin: str):
    return client.options(
        "/api/agent/interact",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
    )


def test_cors_accepts_extension_pages_and_no_web_origin() -> None:
    client = TestClient(create_app(Settings()))
    extension = f"chrome-extension://{EXTENSION_ID}"
    allowed = _preflight(client, extension)
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == extension
    for origin in (
        "http://evil.example",
        "https://app.example",
        f"chrome-extension://{EXTENSION_ID}.evil.example",
    ):
        refused = _preflight(client, origin)
        assert "access-control-allow-origin" not in refused.headers, origin


def test_cors_can_be_limited_to_named_extensions() -> None:
    settings = Settings.from_env({"VERILOOP_EXTENSION_IDS": EXTENSION_ID})
    client = TestClient(create_app(settings))
    assert _preflight(client, f"chrome-extension://{EXTENSION_ID}").status_code == 200
    other = f"chrome-extension://{'b' * 32}"
    assert "access-control-allow-origin" not in _preflight(client, other).headers
    with pytest.raises(ValueError, match="not a Chrome extension id"):
        create_app(Settings(extension_ids=("https://evil.example",)))
