"""The Chrome extension as files: the ``extension/`` package data plus the one snapshot script.

The extension's folder ships without ``snapshot.js``; every copy of the extension (the folder
``veriloop extension path`` writes, the archive ``veriloop extension pack`` writes) gets the
snapshot script from ``veriloop.runners.browser``, the file the Playwright runner injects, so
the two clients cannot drift apart.
"""

from __future__ import annotations

import zipfile
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from playwright.sync_api import BrowserContext, Playwright

from veriloop.runners.browser.client import OFFLINE_FLAGS, chromium_path, snapshot_script

EXTENSION_PACKAGE = "veriloop.extension"
SHIPPED_SUFFIXES = (".json", ".js", ".html", ".css", ".png")
SNAPSHOT_FILE = "snapshot.js"
_ZIP_TIME = (2024, 1, 1, 0, 0, 0)
"""Archive entries carry a fixed time: the same extension packs to the same bytes."""


def extension_files() -> dict[str, bytes]:
    """Every file of the extension by its name in the extension's folder, snapshot script included."""
    files: dict[str, bytes] = {}

    def walk(folder: Traversable, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                if entry.name != "__pycache__":
                    walk(entry, f"{prefix}{entry.name}/")
            elif entry.name.endswith(SHIPPED_SUFFIXES):
                files[prefix + entry.name] = entry.read_bytes()

    walk(resources.files(EXTENSION_PACKAGE), "")
    if "manifest.json" not in files:
        raise FileNotFoundError(f"the package {EXTENSION_PACKAGE} has no manifest.json")
    files[SNAPSHOT_FILE] = snapshot_script().encode("utf-8")
    return dict(sorted(files.items()))


def write_extension(folder: Path) -> Path:
    """Write the unpacked extension into ``folder`` (created; files of an older copy replaced)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = extension_files()
    for old in folder.rglob("*"):
        if old.is_file() and old.relative_to(folder).as_posix() not in files:
            old.unlink()
    for name, data in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_bytes() != data:
            target.write_bytes(data)
    return folder


def pack_extension(archive: Path) -> Path:
    """Write the extension as a zip archive (the files at its root, as the Web Store wants)."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zipped:
        for name, data in extension_files().items():
            zipped.writestr(zipfile.ZipInfo(name, _ZIP_TIME), data, zipfile.ZIP_DEFLATED)
    return archive


def launch_with_extension(
    playwright: Playwright, folder: Path, profile: Path, *, executable_path: str | None = None
) -> tuple[BrowserContext, str]:
    """Headless Chromium (off the network) with the unpacked extension in ``folder``, on the
    profile ``profile``; returns the context and the extension's id (tests, benchmarks)."""
    context = playwright.chromium.launch_persistent_context(
        str(profile),
        executable_path=chromium_path(executable_path),
        headless=True,  # Chromium's "new" headless mode, which loads extensions
        args=[
            *OFFLINE_FLAGS,
            f"--disable-extensions-except={folder}",
            f"--load-extension={folder}",
        ],
        viewport={"width": 1100, "height": 800},
    )
    worker = context.service_workers[0] if context.service_workers else None
    worker = worker or context.wait_for_event("serviceworker")
    return context, worker.url.split("/")[2]
