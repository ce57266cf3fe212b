"""The skips the controller reports itself, each after the line of what caused it.

A test skipped because a prerequisite did not pass never reaches a worker:
the controller reports it SKIPPED as a worker would have (logstart, a
skipped setup report, a passed teardown report, logfinish).  Its line must
come after its cause's: a skip decided while a worker still owes the
cause's own report waits for that report.  A test a worker holds (handed
out ahead) is skipped and reported by that worker itself.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest

from ...live_run.dag_run import DagRun, SkipToReport
from ...planning.facts import Location, location_of
from ...shims.xdist_internals import count_xdist_failure
from .ledger import Ledger

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController


class SkipEmitter:
    """Reports the skips the core decided, in an order the terminal can follow."""

    def __init__(self, config: pytest.Config, ledger: Ledger,
                 locations: Sequence[Location | None]) -> None:
        self.config = config
        self.hook = config.hook
        self.ledger = ledger
        self.locations = locations
        # Tests skipped while a worker held them: (that worker, reason) until
        # the worker's own SKIPPED report for them arrives.
        self.awaiting: dict[int, tuple[WorkerController, str]] = {}
        self.emitting: int | None = None  # the test report() reports right now
        # Skips decided here whose direct prerequisite's report has not been
        # shown yet (a worker still owes it, see awaiting): deferred until after it.
        self.deferred: list[SkipToReport] = []
        self._busy = False

    def emit(self, run: DagRun) -> None:
        """Report the skips decided so far, each after the line of what caused it.

        Reporting a skip runs the report hooks, which come back here: such a
        re-entry returns at once, and the loop below goes on with whatever
        the skip's report decided.
        """
        if self._busy:
            return
        if not (self.awaiting or self.deferred or run.machine.skips_pending):
            return  # the common case, after nearly every report: nothing to do
        self._busy = True
        try:
            self._emit(run)
        finally:
            self._busy = False

    def _emit(self, run: DagRun) -> None:
        sent = self.ledger.sent
        # Skips a worker was to report itself, but it is gone: nobody else will now.
        if self.awaiting:
            for i, (had, _) in list(self.awaiting.items()):
                if had not in sent and (gone := self.awaiting.pop(i, None)):
                    self.report(run, i, gone[1])
        todo = deque([*self.deferred, *run.pop_skips()])
        self.deferred = []
        deferred_tasks: set[int] = set()  # of self.deferred, for the membership test below
        running_at = self.ledger.running_at
        while todo:
            skip = todo.popleft()
            holder = running_at.get(skip.task) if skip.ahead else None
            if holder is not None and holder in sent:
                # Handed out ahead: its worker skips it and reports that.
                self.awaiting[skip.task] = (holder, skip.reason)
            elif skip.prerequisite in self.awaiting or skip.prerequisite in deferred_tasks:
                # Its cause's own SKIPPED line is still to come from a worker:
                # this one follows that (the report feed emits it then).
                self.deferred.append(skip)
                deferred_tasks.add(skip.task)
            else:
                self.report(run, skip.task, skip.reason, fail=skip.fail)
            todo.extend(run.pop_skips())

    def report(self, run: DagRun, i: int, reason: str, *, fail: bool = False) -> None:
        """Report test ``i`` SKIPPED from the controller, as a worker would have.

        ``fail``: FAILED instead, in its call (pytest-depends' ``fail`` action
        for a prerequisite that did not pass, decided by the core).
        """
        run.reported.add(i)
        hook = self.hook
        nodeid = run.nodeids[i]
        loc = self.locations[i] or location_of(nodeid)
        now = time.time()
        line = (loc[1] or 0) + 1
        self.emitting = i
        try:
            hook.pytest_runtest_logstart(nodeid=nodeid, location=loc)
            if fail:
                hook.pytest_runtest_logreport(report=pytest.TestReport(
                    nodeid=nodeid, location=loc, keywords={}, outcome="passed", longrepr=None,
                    when="setup", start=now, stop=now))
                failed = pytest.TestReport(
                    nodeid=nodeid, location=loc, keywords={}, outcome="failed",
                    longrepr=f"Failed: {reason}", when="call", start=now, stop=now)
                hook.pytest_runtest_logreport(report=failed)
                count_xdist_failure(self.config, failed)  # --maxfail counts it, as a worker's
            else:
                hook.pytest_runtest_logreport(report=pytest.TestReport(
                    nodeid=nodeid, location=loc, keywords={}, outcome="skipped",
                    longrepr=(loc[0], line, f"Skipped: {reason}"), when="setup",
                    start=now, stop=now))
            hook.pytest_runtest_logreport(report=pytest.TestReport(
                nodeid=nodeid, location=loc, keywords={}, outcome="passed", longrepr=None,
                when="teardown", start=now, stop=now))
            hook.pytest_runtest_logfinish(nodeid=nodeid, location=loc)
        finally:
            self.emitting = None
