"""The serial driver: runs the DAG in-process when xdist does not distribute.

pytest runs ``session.items`` in order, so the plan's stable topological
order is the schedule; this driver only settles outcomes in the core and
skips a test before its fixtures are set up when the core decided so.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

from ..core import wording
from ..glue.dag_fixture import LocalResults, write_published
from ..glue.internals import skip_here
from ..glue.loading import Later
from ..glue.planning import Plan, Planner
from ..glue.resources import unused_limits
from ..glue.settings import settings_of

if TYPE_CHECKING:
    from ..core import graph
    from ..glue import dag_run, sharding, stall
    from ..glue.dag_run import DagRun
    from ..glue.stall import SerialStall
else:
    graph = Later("pytest_dagorder.core.graph")
    dag_run = Later("pytest_dagorder.glue.dag_run")
    sharding = Later("pytest_dagorder.glue.sharding")
    stall = Later("pytest_dagorder.glue.stall")

WORKER = "serial"


class SerialRunner(Planner):
    """Runs the DAG in-process: stable topological order, skips before fixtures."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.run: DagRun | None = None
        self.pulled_back = 0
        self.results = LocalResults()
        self.warnings: list[str] = []  # header lines, with or without a run
        self.stall: SerialStall | None = None  # --dag-stall-report, for a run it schedules

    def planned(self, config: pytest.Config, plan: Plan, items: list[pytest.Item]) -> None:
        # A suite that declares nothing, unsharded, needs neither the core's run
        # nor the shards: those modules load only for a run that does (see plugin.py).
        settings = settings_of(config)
        if settings.cuts_or_records:  # else apply changes nothing
            sharding.apply(config, plan, items)
        if plan.graph is None and settings.on_failure == "stop" and not plan.problems:
            # Only the core can withhold what follows a failure: a suite that
            # declares nothing gets a run with no edges (as under -n).
            plan.graph = graph.Graph.of_positions([()] * len(items))
        self.results.planned(plan, items)
        # Limits do nothing serially (one test at a time), but a name no test uses is
        # the same typo here as under -n: the same warning.
        unused = unused_limits(settings.limits,
                               [needs.resources for needs in plan.needs.values()])
        if unused:
            self.warnings.append(wording.unused_limits_warning(unused))
        if plan.errors:
            # --continue-on-collection-errors: reported, and the rest runs.
            dag_run.report_problems(config, plan.errors)
        if plan.problems:
            dag_run.report_problems(config, plan.problems)
            items[:] = []  # even --continue-on-collection-errors must run nothing
        elif plan.graph is not None:
            self.run = dag_run.DagRun(plan.graph, plan.nodeids, n_run=len(plan.items),
                                      on_failure=settings.on_failure)
            self.run.machine.add_worker(WORKER)
            self.run.whole = plan.whole
            self.pulled_back = len(plan.pulled_back)

    def pytest_report_collectionfinish(self, config: pytest.Config) -> list[str]:
        if self.run is None:
            return self.warnings
        g = self.run.graph
        lines = [wording.serial_header(self.run.n_run, g.edge_count, g.longest_chain())]
        if self.plan is not None:
            lines += self.plan.notes
        if self.pulled_back:
            # pytest's "collected N items" counted before they were pulled back.
            lines.append(wording.pulled_back_line(self.pulled_back, self.run.n_run))
        if settings_of(config).explain:
            lines.append(wording.EXPLAIN_SERIAL)
        return lines + self.warnings

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        seconds = settings_of(session.config).stall_report
        if self.run is None or seconds <= 0 or session.config.option.collectonly:
            return  # a suite that declares nothing runs as without the plugin
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
        result = yield
        if self.run is not None:
            self.run.finish(session.config)
        return result

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.run is not None:
            dag_run.write_summary(terminalreporter, self.run)
        write_published(terminalreporter, self.results.published_keys())
