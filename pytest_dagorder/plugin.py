"""The pytest plugin: options, markers, and the serial DAG runner.

Which part is active is decided once in :func:`pytest_configure`:

* an xdist worker gets :class:`~pytest_dagorder.worker.DagWorker` (ships the
  graph, hosts the hidden barrier items);
* an xdist controller gets :class:`~pytest_dagorder.xdist.DagController`
  (schedules through the core);
* anything else gets :class:`SerialRunner` (reorders and skips in-process).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import cast

import pytest

from . import compat, durations, visual
from .declarations import ForeignReader
from .markers import DEPENDS_ON, RUN_AFTER
from .planning import Plan, make_plan
from .run import DagRun, report_problems
from .scheduler import FailurePolicy

AFFINITY_MODES = ("module", "class", "none")
FAILURE_POLICIES = ("skip", "stop", "run")
PLUGIN_NAME = "dagorder-run"
#: Readers of other plugins' markers (pytest-dependency, ...), set up in
#: pytest_configure by the migration layer; read by every plan.
READERS = pytest.StashKey[Sequence[ForeignReader]]()


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """With plugin autoload disabled, ``-p dagorder -n 8`` must still bring xdist.

    Registered here, after the entry points and ``-p`` options were handled
    and before the command line is parsed for good, xdist's options (``-n``)
    are known in time.  ``pytest_plugins = ["xdist"]`` would not do: on
    pytest 8 it registers xdist's package (no hooks) under the name its
    entry point needs, so ``-n`` would be lost even with autoload on.
    """
    pm = early_config.pluginmanager
    if pm.has_plugin("xdist") or pm.is_blocked("xdist"):
        return
    try:
        import xdist.plugin
    except ImportError:  # pragma: no cover - a declared dependency
        return
    if not pm.is_registered(xdist.plugin):
        pm.register(xdist.plugin, "xdist")


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    group = parser.getgroup("dagorder", "dependency DAG scheduling (pytest-dagorder)")
    group.addoption(
        "--dag-with-prerequisites",
        action="store_true",
        default=False,
        help="Also run every (transitive) prerequisite of the selected tests",
    )
    group.addoption(
        "--dag-affinity",
        choices=AFFINITY_MODES,
        default=None,
        help="Keep dependency chains inside a module or class on one worker "
        "(default: ini dag_affinity, else module)",
    )
    group.addoption(
        "--dag-on-failure",
        choices=FAILURE_POLICIES,
        default=None,
        help="What a failed prerequisite does: skip its dependents, stop the run, "
        "or run them anyway (default: ini dag_on_failure, else skip)",
    )
    group.addoption(
        "--dag-ignore-durations",
        action="store_true",
        default=False,
        help="Rank ready tests by the number of tests left on their longest path, "
        "not by the durations recorded in pytest's cache (they are still recorded)",
    )
    visual.addoption(group)
    parser.addini("dag_affinity", "Default for --dag-affinity", default="module")
    parser.addini("dag_on_failure", "Default for --dag-on-failure", default="skip")
    compat.addoption(parser, pluginmanager)


def setting(config: pytest.Config, name: str, choices: tuple[str, ...]) -> str:
    """A setting from the command line, else the ini file, checked against ``choices``."""
    value = config.getoption(f"dag_{name}") or config.getini(f"dag_{name}")
    if value not in choices:
        raise pytest.UsageError(
            f"dag_{name} = {value!r} is not valid; choose one of {', '.join(choices)}"
        )
    return str(value)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{DEPENDS_ON}(*targets): run only after the targets passed; "
        "otherwise skip (pytest-dagorder)",
    )
    config.addinivalue_line(
        "markers",
        f"{RUN_AFTER}(*targets): run after the targets ended, whatever their "
        "outcome (pytest-dagorder)",
    )
    compat.configure(config)
    setting(config, "affinity", AFFINITY_MODES)
    policy = cast(FailurePolicy, setting(config, "on_failure", FAILURE_POLICIES))
    if hasattr(config, "workerinput"):
        from .worker import DagWorker

        config.pluginmanager.register(DagWorker(config), PLUGIN_NAME)
    elif _xdist_controller(config):
        from .xdist import DagController

        config.pluginmanager.register(DagController(config, policy), PLUGIN_NAME)
    else:
        config.pluginmanager.register(SerialRunner(config, policy), PLUGIN_NAME)
    visual.configure(config)


def _xdist_controller(config: pytest.Config) -> bool:
    """Whether xdist's DSession will run this session (same test as xdist's own)."""
    if not config.pluginmanager.has_plugin("dsession"):
        # DSession registers itself under that name in xdist's pytest_configure,
        # which may run after ours: fall back to the options it looks at.
        return bool(
            config.pluginmanager.has_plugin("xdist")
            and getattr(config.option, "dist", "no") != "no"
            and getattr(config.option, "tx", None)
            and not config.getvalue("collectonly")
        )
    return True


def collect_plan(config: pytest.Config, items: list[pytest.Item],
                 collected: list[pytest.Item]) -> Plan:
    """The plan for this session; pulled-back prerequisites are put into ``items``."""
    items[:] = compat.apply_ordinals(items)  # pytest-order ordinals: hints, edges win
    plan = make_plan(
        items,
        collected,
        with_prerequisites=bool(config.getoption("dag_with_prerequisites")),
        narrowed=any("::" in str(a) for a in config.args) or bool(config.getoption("lf", False)),
        readers=config.stash.get(READERS, ()),
    )
    if plan.pulled_back:
        pulled = {id(it) for it in plan.pulled_back}
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None and "deselected" in terminal.stats:
            terminal.stats["deselected"] = [
                it for it in terminal.stats["deselected"] if id(it) not in pulled
            ]
    if plan.graph is not None and not plan.problems:
        items[:] = plan.items
    return plan


class Planner:
    """Makes the plan once collection is final (base of the serial runner and the worker).

    The wrapper is the outermost one: it sees the items before any plugin
    deselects (``-k``, ``-m``, ``--lf``) and plans after all of them did.
    """

    plan: Plan | None = None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> Generator[None, object, object]:
        collected = list(items)
        result = yield
        self.plan = collect_plan(config, items, collected)
        self.planned(config, self.plan, items)
        return result

    def planned(self, config: pytest.Config, plan: Plan, items: list[pytest.Item]) -> None:
        """What the subclass does with the plan (nothing here)."""


class SerialRunner(Planner):
    """Runs the DAG in-process: stable topological order, skips before fixtures."""

    def __init__(self, config: pytest.Config, policy: FailurePolicy) -> None:
        self.config = config
        self.policy = policy
        self.run: DagRun | None = None

    def planned(self, config: pytest.Config, plan: Plan, items: list[pytest.Item]) -> None:
        if plan.problems:
            report_problems(config, plan.problems)
            items[:] = []  # even --continue-on-collection-errors must run nothing
        elif plan.graph is not None:
            self.run = DagRun(plan.graph, plan.nodeids, n_run=len(plan.items),
                              on_failure=self.policy)
            self.run.sched.add_worker("serial")

    def pytest_report_collectionfinish(self, config: pytest.Config) -> list[str]:
        if self.run is None:
            return []
        g = self.run.graph
        return [
            f"dagorder: {self.run.n_run} tests, {g.edge_count} dependencies, "
            f"longest chain {g.longest_chain()} (serial)"
        ]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        run = self.run
        if run is None:
            return
        i = run.index.get(item.nodeid)
        if i is None:
            return
        sched = run.sched
        skip = sched.skips.get(i)
        if skip is not None:
            run.reported.add(i)
            skip_here(run.reason(skip))
        state = sched.state[i]
        if state.value == "ready":
            sched.claim(i, "serial")
            return
        if state.value == "waiting":
            # Another plugin moved this test before its prerequisites: do not run blind.
            missing = [run.nodeids[p] for p in (*run.graph.requires[i], *run.graph.after[i])
                       if not sched.state[p].terminal]
            sched.finished(i, "not run")
            skip_here(f"prerequisite {missing[0]} has not run yet (tests were reordered)")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.run is not None:
            self.run.record(report)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.run is not None:
            durations.save(session.config, self.run.measured())

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.run is not None:
            write_summary(terminalreporter, self.run)


def skip_here(reason: str) -> None:
    """Skip the current test, reported at the test's own location.

    ``_use_item_location`` is pytest's private switch for exactly this (the
    skip marker uses it); without it the report would point into this file.
    """
    raise pytest.skip.Exception(reason, _use_item_location=True)


def write_summary(terminalreporter: pytest.TerminalReporter, run: DagRun) -> None:
    lines = run.summary_lines()
    if lines:
        terminalreporter.write_sep("=", "blocked by prerequisites (pytest-dagorder)")
        for line in lines:
            terminalreporter.write_line(line)
