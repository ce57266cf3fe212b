"""Tests handed out ahead of their prerequisites' end, skipped on the worker.

The controller hands a group's chain out ahead only to the worker that runs
the open prerequisites (see ``StateMachine.take``), so that worker knows
their outcomes first: it keeps the outcomes of the tests it ran, in the
order they ended, and skips a test whose prerequisite did not pass before
its fixtures, with the core's wording (:func:`blocked_skip`).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from ...core.state_machine import Skip, blocked_skip
from ...live_run.outcome_tracker import OutcomeTracker
from ...planning.plan import Plan
from ...shims.pytest_internals import skip_here


class SentAhead:
    """Outcomes of the tests this worker ran, and the skips they cause here.

    ``plan``: this worker's (no graph: nothing declared, nothing to skip);
    ``index``: the position of each collected node id in the plan.
    """

    def __init__(self, plan: Plan | None, index: Mapping[str, int]) -> None:
        self.plan = plan
        self.index = index
        self.tracker = OutcomeTracker()
        self.outcome: dict[int, str] = {}
        self.causes: dict[int, str] = {}
        self.ended: dict[int, int] = {}
        self.local_skips: dict[int, Skip] = {}

    def name(self, i: int) -> str:
        """Test ``i`` of the plan's graph as the controller names it (the plan
        makes the names on first use: only a skip this worker words itself needs them)."""
        assert self.plan is not None  # a skip needs the plan's graph
        return self.plan.short_names[i]

    def setup(self, item: pytest.Item) -> None:
        """Skip, before its fixtures, a test sent ahead whose prerequisite failed here.

        The controller, which made the same decision, leaves the report to
        this worker.  Likewise a test sent after its prerequisite passed
        here, when a barrier then tore down a module/class fixture of that
        prerequisite and the teardown failed (see :meth:`record`).
        """
        graph = self.plan.graph if self.plan is not None else None
        if graph is None:
            return
        i = self.index.get(item.nodeid)
        if i is None:
            return
        failed = [p for p in graph.requires[i] if self.outcome.get(p, "passed") != "passed"]
        if not failed:
            return
        p = min(failed, key=self.ended.__getitem__)
        skip = blocked_skip(i, p, self.outcome[p], self.local_skips.get(p), self.name,
                            self.causes.get(p, ""))
        self.local_skips[i] = skip
        skip_here(skip.reason)

    def record(self, report: pytest.TestReport) -> None:
        """Fold ``report`` into its test's outcome."""
        if self.tracker.inert(report):
            return  # most reports: nothing to fold
        i = self.index.get(report.nodeid)
        if i is None:
            return
        word = self.tracker.feed(report, i)
        if word is None:
            return
        if self.tracker.cause:
            self.causes[i] = self.tracker.cause
        if i not in self.outcome:
            self.outcome[i] = word
            self.ended[i] = len(self.ended)
        elif self.outcome[i] == "passed" and word != "passed":
            # A barrier's teardown of a module/class fixture failed after the
            # test had passed; it is reported on that test, as serially.  The
            # controller has settled the test already, so only the dependents
            # that start on this worker from now on can still be skipped for
            # it (serially every dependent would be).
            self.outcome[i] = word
