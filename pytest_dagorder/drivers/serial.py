"""The serial driver: runs the DAG in-process when xdist does not distribute.

pytest runs ``session.items`` in order, so the plan's stable topological
order is the schedule; this driver only settles outcomes in the core and
skips a test before its fixtures are set up when the core decided so.  What
the run is (the core's graph, the header, the problems to report) is
decided from the collection's facts by ``deciding/decide.py``, as under xdist.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

from ..core import wording
from ..deciding.decide import decide_serial
from ..live_run.dag_fixture import LocalResults, write_published
from ..options.settings import settings_of
from ..planning.facts import collect_facts
from ..planning.plan import Plan, Planner
from ..shims.late_loading import Later
from ..shims.pytest_internals import skip_here

if TYPE_CHECKING:
    from ..features import stall
    from ..features.stall import SerialStall
    from ..live_run import dag_run
    from ..live_run.dag_run import DagRun
else:
    dag_run = Later("pytest_dagorder.live_run.dag_run")
    stall = Later("pytest_dagorder.features.stall")

WORKER = "serial"


class SerialRunner(Planner):
    """Runs the DAG in-process: stable topological order, skips before fixtures."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.run: DagRun | None = None
        self.results = LocalResults()
        self.header: list[str] = []  # with or without a run
        self.stall: SerialStall | None = None  # ini dag_stall_report, for a run it schedules

    def planned(self, config: pytest.Config, plan: Plan, items: list[pytest.Item]) -> None:
        settings = settings_of(config)
        self.results.planned(plan, items)
        facts = collect_facts(config, plan, items, [it.nodeid for it in items],
                              affinity=settings.affinity, full=False)
        # The run names the plan's tests, in the plan's order: the plan's names.
        decided = decide_serial(facts, settings, names=lambda: plan.short_names)
        self.header = list(decided.header)
        if decided.usage_error:
            raise pytest.UsageError(decided.usage_error)
        if decided.errors:
            # --continue-on-collection-errors: reported, and the rest runs.
            dag_run.report_problems(config, decided.errors)
        if decided.problems:
            dag_run.report_problems(config, decided.problems)
            items[:] = []  # even --continue-on-collection-errors must run nothing
            return
        self.run = decided.run
        if self.run is not None:
            self.run.machine.add_worker(WORKER)

    def pytest_report_collectionfinish(self, config: pytest.Config) -> list[str]:
        return self.header

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        found = settings_of(session.config)
        seconds = found.stall_report
        if (self.run is None or seconds <= 0 or session.config.option.collectonly
                or found.find_missing is not None):
            # A suite that declares nothing runs as without the plugin; the
            # finder runs no test here (its probes are bounded by it).
            return
        self.stall = stall.SerialStall(seconds, WORKER)
        session.config.pluginmanager.register(self.stall, "dagorder-stall")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.stall is not None:
            self.stall.close()
            config.pluginmanager.unregister(self.stall)
            self.stall = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        run = self.run
        if run is None:
            return
        i = run.index.get(item.nodeid)
        if i is None:
            return
        machine = run.machine
        skip = machine.skips.get(i)
        if skip is not None:
            run.reported.add(i)
            skip_here(run.reason(skip))
        state = machine.state[i]
        if state.value == "ready":
            machine.claim(i, WORKER)
            return
        if state.value == "waiting":
            # Another plugin moved this test before its prerequisites: do not run blind.
            missing = [run.nodeids[p] for p in (*run.graph.requires[i], *run.graph.after[i])
                       if not machine.state[p].terminal]
            machine.finished(i, "not run")
            skip_here(wording.not_run_yet(missing[0]))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.results.on_report(report)
        if self.run is not None:
            self.run.record(report)

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        if self.stall is not None:
            # The tests are over: a quiet spell from here on is the session's
            # end, not a stuck test (the controller's watch stops here too).
            self.stall.watch.stop()
        result = yield
        if self.run is not None:
            self.run.finish(session.config)
        return result

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.run is not None:
            dag_run.write_summary(terminalreporter, self.run)
        write_published(terminalreporter, self.results.published_keys())
