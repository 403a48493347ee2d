"""The extension-overhead benchmark runs end to end in quick mode and prints its RESULT line."""

from __future__ import annotations

import re

import pytest

from benchmarks.extension_overhead import main
from veriloop.runners.browser.client import ChromiumNotFound, chromium_path

pytestmark = pytest.mark.browser


def test_quick_run_prints_the_result_line(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        chromium_path()
    except ChromiumNotFound as exc:
        pytest.skip(f"Chromium is not installed: {exc}")
    main(["--quick"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(
        r"RESULT snapshot_ms_extension=[\d.]+ snapshot_ms_runner=[\d.]+ snapshot_ratio=[\d.]+ "
        r"roundtrip_ms_extension=[\d.]+ roundtrip_ms_runner=[\d.]+ roundtrip_ratio=[\d.]+",
        last,
    ), last
