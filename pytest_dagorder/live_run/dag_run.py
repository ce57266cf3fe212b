"""State of one test run, shared by the serial runner and the xdist controller.

Wraps the scheduler core with what pytest needs around it: node ids for
names, outcome folding from reports, the deselected-prerequisite hint, and the
end-of-run summary.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import pytest

from ..core import wording
from ..core.bounds import bounds
from ..core.graph import Graph
from ..core.state_machine import FailurePolicy, Skip, StateMachine, Transition, as_outcome
from ..core.states import State
from ..declaring.declarations import Problem
from ..features import durations
from ..options import wording as options_wording
from ..shims.late_loading import Later
from ..shims.pytest_internals import keep_in_lastfailed
from .outcome_tracker import OutcomeTracker
from .resume import remember_blocked

if TYPE_CHECKING:
    import pytest_dagorder.declaring.foreign_wording as foreign_wording
else:
    # Only pytest-depends' fail action checks edges: its reader is loaded.
    foreign_wording = Later("pytest_dagorder.declaring.foreign_wording")


def short_names(nodeids: Sequence[str]) -> list[str]:
    """How skip reasons name each test: the shortest name unambiguous among ``nodeids``.

    The node id without its file part (``test_base``, ``TestA::test_x``: what
    users write in @depends_on) when no other test of the run has it; else
    with the file's base name (``test_same.py::test_base``); else the whole
    node id.  Computed once per run over every node id of the graph, so the
    serial runner, the controller and a worker gating a test word alike.
    """
    def within_file(nid: str) -> str:
        return nid.split("::", 1)[1] if "::" in nid else nid

    def with_base(nid: str) -> str:
        path, sep, rest = nid.partition("::")
        return path.rsplit("/", 1)[-1] + sep + rest

    names = list(nodeids)
    for form in (with_base, within_file):  # the longer form first: the shortest unique wins
        counts = Counter(form(nid) for nid in nodeids)
        names = [form(nid) if counts[form(nid)] == 1 else name
                 for nid, name in zip(nodeids, names, strict=True)]
    return names


class SkipToReport(NamedTuple):
    """A skip decision as a driver reports it: the test, the wording, who reports it."""

    task: int
    reason: str
    #: The worker holding the test (handed out ahead) reports it, not the driver.
    ahead: bool
    #: The direct prerequisite that did not pass (None: a stop).
    prerequisite: int | None
    #: Not a skip: the test fails without running (a failed checked prerequisite).
    fail: bool = False


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
        resources: Sequence[Sequence[str]] | None = None,
        limits: Mapping[str, int] | None = None,
        exclusive: Sequence[bool] | None = None,
        checks: Mapping[str, Sequence[str]] | None = None,
        modules: Sequence[str | None] | None = None,
        module_fixtures: Sequence[bool] | None = None,
        history: bool = False,
        names: Callable[[], Sequence[str]] | None = None,
        fences: Sequence[int] = (),
    ) -> None:
        """``checks``: by node id, prerequisites that must have passed, else the
        test fails without running; ``modules``, ``module_fixtures``: per test,
        its module and whether it uses a fixture a module switch tears down
        (see :class:`~..core.state_machine.StateMachine`); ``history``: keep
        each test's moves, for the summary to explain them (``--dag-explain``);
        ``names``: :func:`short_names` of ``nodeids``, where this process has
        them already (asked for on first use); ``fences``: positions serial
        order is kept across in hand-out (see the state machine)."""
        self.nodeids = list(nodeids)
        self.index = {nid: i for i, nid in enumerate(self.nodeids)}
        if checks:
            graph = graph.checking(self._by_index(checks))
        self.graph = graph
        #: Whether every node id names one test (not so with --keep-duplicates).
        self.unique = len(self.index) == len(self.nodeids)
        self._names: Sequence[str] | None = None  # see name()
        self._named = names
        self.n_run = n_run
        self.machine = StateMachine(
            graph,
            on_failure=on_failure,
            groups=groups,
            name=self.name,
            locality=locality,
            resources=resources,
            limits=limits,
            exclusive=exclusive,
            modules=modules,
            module_fixtures=module_fixtures,
            history=history,
            fences=fences,
        )
        self.tracker = OutcomeTracker()
        #: The run collected its whole suite (see ``Plan.whole``): a durations
        #: file may forget the tests it did not see.
        self.whole = False
        #: Per group of ``machine.groups``, how users named it (an xdist_group,
        #: a document); None: by its first test.
        self.group_names: list[str | None] | None = None
        #: The fixture instances that hold tests of a group together (then
        #: ``--dag-affinity=none`` is never advised: it would split them).
        self.held_by: tuple[str, ...] = ()
        # Seconds per test (all phases), recorded for the next run's priorities.
        self.elapsed: dict[int, float] = {}
        # The run's wall time, from here to the last time a test's time came
        # in (the summary weighs what affinity groups cost against it).
        self.began = self.last_end = time.monotonic()
        # Skips actually reported: a run cut short (-x) decides more than it shows.
        self.reported: set[int] = set()
        # Prerequisites outside the run never run: settle them first.
        for i in range(n_run, len(graph)):
            self.machine.finished(i, "deselected")

    def name(self, i: int) -> str:
        """How skip reasons name test ``i`` (made on first use: a run with no
        skip never needs them, and a big run starts sooner without)."""
        if self._names is None:
            self._names = short_names(self.nodeids) if self._named is None else self._named()
        return self._names[i]

    def _by_index(self, checks: Mapping[str, Sequence[str]]) -> dict[int, list[int]]:
        index = self.index
        return {index[nid]: [index[p] for p in ps if p in index]
                for nid, ps in checks.items() if nid in index}

    def reason(self, skip: Skip) -> str:
        if skip.failed:
            return foreign_wording.foreign_failed(
                self.nodeids[skip.task], [self.nodeids[p] for p in skip.failed])
        if skip.root_outcome == "deselected":
            return skip.reason + options_wording.DESELECTED_HINT
        return skip.reason

    def pop_skips(self) -> list[SkipToReport]:
        """New skip decisions for tests of the run, in the order they were made.

        The caller reports each of them (and adds it to :attr:`reported`),
        except ``ahead`` ones, which the worker holding the test reports
        itself (they count once that report arrived).
        """
        return [SkipToReport(s.task, self.reason(s), s.ahead, s.prerequisite, bool(s.failed))
                for s in self.machine.pop_skipped() if s.task < self.n_run]

    def record(self, report: pytest.TestReport, index: int | None = None, *,
               timed: bool = True) -> int | None:
        """Feed a report; the test's index once its last report arrived, else None.

        ``index`` says which test it is about where the node id alone cannot
        (repeated node ids); by default the node id decides.  The core learns
        the outcome then (a test it had already settled, as a skip, keeps that).
        ``timed``: the report's duration counts towards the test's (False: the
        driver tells :meth:`took` instead).
        """
        i = self.index.get(report.nodeid) if index is None else index
        if i is None:
            return None
        if timed:
            self.took(i, report.duration)
        word = self.tracker.feed(report, i)
        if word is None:
            return None
        self.machine.finished(i, as_outcome(word), self.tracker.cause)
        return i

    def took(self, i: int, seconds: float) -> None:
        """Test ``i`` spent ``seconds`` more (its phases, or its whole protocol)."""
        self.elapsed[i] = self.elapsed.get(i, 0.0) + seconds
        self.last_end = time.monotonic()

    def measured(self) -> dict[str, float]:
        """Seconds per node id of the tests that ran (not those skipped for a prerequisite)."""
        skipped = self.machine.skips
        return {self.nodeids[i]: secs for i, secs in self.elapsed.items()
                if i not in skipped and self.machine.outcome[i] != "crashed"}

    def blocked(self) -> list[str]:
        """Node ids of the tests of the run skipped because a prerequisite did not pass."""
        return [self.nodeids[i] for i, skip in self.machine.skips.items()
                if skip.root is not None and i < self.n_run and i in self.reported]

    def finish(self, config: pytest.Config) -> None:
        """At session end, after every other plugin's own: what the next run needs.

        Durations rank the next run; tests skipped for a prerequisite stay in
        the set ``--lf`` re-runs (pytest's cache would drop them as skipped).
        """
        suite = durations.suite_of(config, self.nodeids) if self.whole else None
        durations.save(config, self.measured(), suite)
        blocked = self.blocked()
        keep_in_lastfailed(config, blocked)
        remember_blocked(config, blocked, self.settled())

    def settled(self) -> set[str]:
        """Node ids of the tests of the run that ended (a skip decided but never
        reported, as after ``-x``, is not an end)."""
        skips, outcome, reported = self.machine.skips, self.machine.outcome, self.reported
        return {self.nodeids[i] for i in range(self.n_run)
                if outcome[i] is not None and (i not in skips or i in reported)}

    def summary_lines(self, verbose: bool = False) -> list[str]:
        """One line per root cause: what it was and how many tests it blocked.

        ``verbose`` (pytest's ``-v``) lists the blocked tests under each line,
        in collection order.
        """
        blocked: dict[int, list[int]] = {}
        stops: dict[str, list[int]] = {}
        for skip in self.machine.skips.values():
            if skip.task not in self.reported:
                continue
            if skip.root is None:
                stops.setdefault(skip.cause or skip.reason, []).append(skip.task)
            else:
                blocked.setdefault(skip.root, []).append(skip.task)
        sections = [
            *((wording.blocked_line(self.nodeids[root], str(self.machine.outcome[root]),
                                    len(tasks)), tasks) for root, tasks in sorted(blocked.items())),
            *((wording.not_started_line(reason, len(tasks)), tasks)
              for reason, tasks in sorted(stops.items())),
        ]
        lines: list[str] = []
        for head, tasks in sections:
            lines.append(head)
            if verbose:
                lines += [wording.listed(self.nodeids[i]) for i in sorted(tasks)]
        return lines

    def explained(self, verbose: bool = False, *, workers: bool = True) -> list[str]:
        """``--dag-explain``: the moves of each test the core had to decide about,
        one line per test, in the run's order (collection order, but where
        an edge moves a test later: a cause comes before its effects).

        By default the tests that did not run (skipped, or failed for a
        checked prerequisite) and why, those put back when their worker
        left, and those kept ready for their affinity group's worker while
        other workers started other tests; ``verbose`` (pytest's ``-v``):
        every test of the run.  A test held on a worker for its
        prerequisite and then run is left out by default: it started the
        moment that prerequisite passed, the soonest it could.
        ``workers``: name the workers (False: one process ran everything).
        """
        machine = self.machine
        grouped = {i for members in machine.groups for i in members}
        lines: list[str] = []
        for i in range(self.n_run):
            moves = machine.history(i)
            if machine.state[i] is State.SKIPPED and i not in self.reported:
                continue  # decided, never reported: the run was cut short (-x)
            if not verbose and not any(_worth_saying(m, i in grouped) for m in moves):
                continue
            lines.append(wording.history_line(self.nodeids[i], [
                _in_group(m.describe(self.name, _worker_name if workers else None), m,
                          i in grouped)
                for m in moves]))
        return lines


def _worker_name(worker: Hashable) -> str:
    """A worker as users know it: xdist's ``gw0`` (its node's gateway id)."""
    gateway = getattr(worker, "gateway", None)
    return str(worker) if gateway is None else str(gateway.id)


def _worth_saying(move: Transition, grouped: bool) -> bool:
    """Whether ``move`` makes its test one the short explanation lists."""
    return (move.cause in ("skipped", "failed check", "put back")
            or (grouped and move.waited > 0))


def _in_group(text: str, move: Transition, grouped: bool) -> str:
    """A grouped test kept waiting: say for what."""
    return text + options_wording.FOR_ITS_GROUP if grouped and move.waited else text


def write_explained(terminalreporter: pytest.TerminalReporter, run: DagRun,
                    workers: int) -> None:
    """The section ``--dag-explain`` adds to the summary (see :meth:`DagRun.explained`)."""
    terminalreporter.write_sep("=", options_wording.EXPLAINED_TITLE)
    lines = run.explained(terminalreporter.verbosity > 0, workers=workers > 1)
    for line in lines or [wording.NOTHING_TO_EXPLAIN]:
        terminalreporter.write_line(line)


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
    return options_wording.collection_errors(len(problems))


#: The share of the run that affinity groups must cost before the summary says so.
GROUP_COST_SHARE = 0.10


def group_cost_line(run: DagRun, workers: int) -> str | None:
    """What affinity groups cost this run at least, if over :data:`GROUP_COST_SHARE` of it.

    The cost is how much the groups raise the lower bound on the makespan
    (:mod:`.bounds`, from the tests' measured times): no scheduler could
    have avoided it without ungrouping them.
    """
    groups = run.machine.groups
    wall = run.last_end - run.began
    if not groups or workers < 2 or wall <= 0:
        return None
    label = {i: k for k, members in enumerate(groups) for i in members}
    g = run.graph
    took = {i: s for i, s in run.elapsed.items() if i < run.n_run}
    edges = [(p, i) for i in took for p in (*g.requires[i], *g.after[i])]
    b = bounds(took, edges, {i: label[i] for i in took if i in label}, workers)
    if b.cost <= GROUP_COST_SHARE * wall:
        return None
    names = run.group_names
    named = [(wording.group_name(run.nodeids[groups[k][0]], names[k] if names else None),
              size, secs)
             for k, size, secs in b.groups_on_path if isinstance(k, int)]
    return options_wording.group_cost(b.cost, wall, b.grouped_bound, b.bound, named,
                                   run.held_by)


def write_summary(terminalreporter: pytest.TerminalReporter, run: DagRun,
                  workers: int = 1) -> None:
    lines = run.summary_lines(verbose=terminalreporter.verbosity > 0)
    if lines:
        terminalreporter.write_sep("=", options_wording.SUMMARY_TITLE)
        for line in lines:
            terminalreporter.write_line(line)
    cost = group_cost_line(run, workers)
    if cost is not None:
        terminalreporter.write_line(cost)
    runs = run.machine.runs
    if runs is not None and runs.returns:
        names = dict.fromkeys(str(runs.names[m]) for m in runs.returns)
        terminalreporter.write_line(wording.module_returns(list(names)))
    if run.machine.keeps_history:
        write_explained(terminalreporter, run, workers)
