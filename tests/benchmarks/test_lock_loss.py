"""The lock-loss benchmark's quick mode: two service processes, backends terminated mid-step,
every step (a task's start too) sent to both at once; nothing lost, duplicated, forked, started
twice or answered out of step."""

from __future__ import annotations

import os
import re

from benchmarks import lock_loss

RESULT = re.compile(
    r"^RESULT lost=(?P<lost>\d+) duplicated=(?P<dup>\d+) siblings=(?P<sib>\d+) "
    r"split_starts=(?P<split>\d+) wrong_step_index=(?P<wrong>\d+) tasks=(?P<tasks>\d+) terminations=(?P<terms>\d+)$"
)
PG_URL = os.environ.get(
    "VERILOOP_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/veriloop_test"
)


def test_quick_mode_loses_duplicates_and_forks_nothing(capsys):
    lock_loss.main(["--quick", "--postgres-url", PG_URL])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    match = RESULT.match(last)
    assert match, last
    assert (match["tasks"], match["terms"]) == ("6", "1"), last
    figures = (match["lost"], match["dup"], match["sib"], match["split"], match["wrong"])
    assert figures == ("0",) * 5, last
