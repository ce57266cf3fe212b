"""State of one test run, shared by the serial runner and the xdist controller.

Wraps the scheduler core with what pytest needs around it: node ids for
names, outcome folding from reports, the wording of skip reasons, and the
end-of-run summary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

from .declarations import Problem
from .graph import Graph
from .outcomes import OutcomeTracker
from .scheduler import FailurePolicy, Scheduler, Skip, as_outcome

DESELECTED_HINT = "; add --dag-with-prerequisites to run it"


def short_name(nodeid: str) -> str:
    """A node id without its file part: what users write in @depends_on."""
    return nodeid.split("::", 1)[1] if "::" in nodeid else nodeid


class DagRun:
    def __init__(
        self,
        graph: Graph,
        nodeids: Sequence[str],
        *,
        n_run: int,
        on_failure: FailurePolicy,
        groups: Sequence[str | None] | None = None,
        locality: bool = True,
    ) -> None:
        self.graph = graph
        self.nodeids = list(nodeids)
        self.index = {nid: i for i, nid in enumerate(self.nodeids)}
        self.n_run = n_run
        self.sched = Scheduler(
            graph,
            on_failure=on_failure,
            groups=groups,
            name=lambda i: short_name(self.nodeids[i]),
            locality=locality,
        )
        self.tracker = OutcomeTracker()
        # Seconds per test (all phases), recorded for the next run's priorities.
        self.elapsed: dict[int, float] = {}
        # Skips actually reported: a run cut short (-x) decides more than it shows.
        self.reported: set[int] = set()
        # Prerequisites outside the run never run: settle them first.
        for i in range(n_run, len(graph)):
            self.sched.finished(i, "deselected")

    def reason(self, skip: Skip) -> str:
        if skip.root_outcome == "deselected":
            return skip.reason + DESELECTED_HINT
        return skip.reason

    def pop_skips(self) -> list[tuple[int, str, bool]]:
        """New skip decisions for tests of the run: (index, wording, remote).

        The caller reports each of them (and adds it to :attr:`reported`),
        except ``remote`` ones, which the worker holding the test reports
        itself (they count once that report arrived).
        """
        return [(s.task, self.reason(s), s.remote)
                for s in self.sched.pop_skipped() if s.task < self.n_run]

    def record(self, report: pytest.TestReport) -> int | None:
        """Feed a report; the test's index once its last report arrived, else None.

        The core learns the outcome then (a test it had already settled, as a
        skip, keeps that).
        """
        i = self.index.get(report.nodeid)
        if i is None:
            return None
        self.elapsed[i] = self.elapsed.get(i, 0.0) + report.duration
        word = self.tracker.feed(report)
        if word is None:
            return None
        self.sched.finished(i, as_outcome(word))
        return i

    def measured(self) -> dict[str, float]:
        """Seconds per node id of the tests that ran (not those skipped for a prerequisite)."""
        skipped = self.sched.skips
        return {self.nodeids[i]: secs for i, secs in self.elapsed.items()
                if i not in skipped and self.sched.outcome[i] != "crashed"}

    def summary_lines(self) -> list[str]:
        """One line per root cause: what it was and how many tests it blocked."""
        blocked: Counter[int] = Counter()
        stops: Counter[str] = Counter()
        for skip in self.sched.skips.values():
            if skip.task not in self.reported:
                continue
            if skip.root is None:
                stops[skip.reason.split(": ")[-1]] += 1
            else:
                blocked[skip.root] += 1
        lines = []
        for root in sorted(blocked):
            outcome = self.sched.outcome[root]
            n = blocked[root]
            lines.append(f"{self.nodeids[root]} {outcome}: blocked {n} test{'s' * (n != 1)}")
        for reason, n in sorted(stops.items()):
            lines.append(f"{reason}: {n} test{'s' * (n != 1)} not started")
        return lines


def report_problems(config: pytest.Config, problems: Sequence[Problem]) -> None:
    """Show declaration problems the way pytest shows a broken collection."""
    for problem in problems:
        report = pytest.CollectReport(
            nodeid=problem.nodeid,
            outcome="failed",
            longrepr=f"pytest-dagorder: {problem.message}",
            result=[],
        )
        config.hook.pytest_collectreport(report=report)


def interrupted_message(problems: Sequence[Problem]) -> str:
    n = len(problems)
    return f"{n} error{'s' * (n != 1)} during collection"
