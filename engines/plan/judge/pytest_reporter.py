"""A pytest plugin that sends each test's outcome out of the test process as it happens.

:func:`~veriloop.engines.plan.judge.testrun.run_tests` starts pytest through a bootstrap that imports this
module before the workspace is on ``sys.path`` and registers :class:`Reporter` as a plugin object
(``pytest.main(plugins=[...])``: no ``-p`` option, no environment variable). The shell opens the
write end of a FIFO on a descriptor for the process; :meth:`Reporter.attach` moves it to a new,
non-inheritable number and unlinks the FIFO, so the code under test is never told where it is and
cannot reopen it. Every collection error, test phase report and the session's exit status is one
JSON line, written as it happens: an exit handler that later rewrites the JUnit XML or exits 0 with
``os._exit`` cannot take back what was already sent, and the parent cross-checks the two.

Residual risk (documented in docs/plans.md): code that runs inside the test process can still find
the descriptor (``/proc/self/fd``) and write lines of its own or close it before the tests run; the
parent treats duplicate, unreadable or missing lines as tampering, and the tamper scan flags the
moves that need (exit handlers, patches of ``os``/``pytest``). Only a separate process (the
sandbox) is out of reach.
"""

from __future__ import annotations

import json
import os

import pytest

MAX_NODEID = 1000
"""A longer node id is cut (a line must stay below the pipe's atomic write size)."""


class Reporter:
    """The plugin: one JSON line per event on a private descriptor."""

    def __init__(self, fd: int) -> None:
        # Bound now, before any code under test is imported: patching os.write or json later
        # does not reach these references.
        write, dumps = os.write, json.dumps

        def send(record: dict) -> None:
            try:
                write(fd, (dumps(record, separators=(",", ":")) + "\n").encode())
            except OSError:
                pass  # a closed channel shows as missing lines on the other side

        self._send = send

    @classmethod
    def attach(cls, inherited: int) -> Reporter:
        """Take over the descriptor the shell opened: a new number, not inherited by subprocesses
        the tests start, and the FIFO's name removed."""
        fd = os.dup(inherited)
        os.set_inheritable(fd, False)
        try:
            path = os.readlink(f"/proc/self/fd/{inherited}")
            if os.path.isabs(path):
                os.unlink(path)
        except OSError:
            pass  # not Linux: the FIFO is removed with the run's temporary folder
        os.close(inherited)
        return cls(fd)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._send({"event": "start", "rootdir": str(session.config.rootpath)})

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._send({"event": "collect", "nodeid": report.nodeid[:MAX_NODEID]})

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # The tests that will run, after deselection: a named test missing here did not run.
        for item in session.items:
            self._send({"event": "item", "nodeid": item.nodeid[:MAX_NODEID]})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._send(
            {
                "event": "test",
                "nodeid": report.nodeid[:MAX_NODEID],
                "when": report.when,
                "outcome": report.outcome,
            }
        )

    @pytest.hookimpl(hookwrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int):
        yield
        self._send({"event": "finish", "exitstatus": int(session.exitstatus)})


__all__ = ["Reporter"]
