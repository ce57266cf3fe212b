"""xdist controller side: one Scheduling class on top of the scheduler core.

xdist calls the methods of :class:`DagScheduling` (its scheduler protocol,
see xdist's ``scheduler/`` package); outcomes never reach a scheduler there,
so :class:`DagController` feeds the test reports to it from
``pytest_runtest_logreport``.  Everything this module decides comes from
the core: it only translates xdist events into core events and core
decisions into ``send_runtest_some`` calls and SKIPPED reports.

Relies on xdist's Scheduling protocol and ``WorkerController``'s
``send_runtest_some`` / ``shutting_down`` / ``workerinput`` / ``gateway``
(pinned in pyproject.toml); xdist's private helpers are reached through
:mod:`~pytest_dagorder.glue.internals` only.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Generator, Sequence
from typing import Any, NoReturn

import pytest

from ..core import wording
from ..core.affinity import affinity_groups, kept_whole, serial_modules
from ..core.errors import DependencyError
from ..core.graph import Graph
from ..core.memory import collector_paused
from ..core.pacing import Pacing
from ..core.results import Relay
from ..glue import durations
from ..glue.dag_fixture import write_published
from ..glue.declarations import Problem
from ..glue.internals import count_xdist_failure, xdist_collection_diff, xdist_node_count
from ..glue.resources import resources_in_use, unused_limits
from ..glue.run import DagRun, SkipToReport, interrupted_message, report_problems, write_summary
from ..glue.settings import DAG_MODES, settings_of
from . import wire

#: Seconds to wait for a worker's hello (sent before its collection ids on
#: the same connection, so normally there already) and for its plan, which
#: it encodes when asked.
RECEIVE_TIMEOUT = 60.0
#: Most side-channel messages taken from one worker per report or barrier.
SIDE_CHANNEL_BATCH = 10_000
#: Real tests in flight per worker when tests take a while: one, so that no
#: test ever waits behind another on a busy worker while a worker is idle
#: (more in flight made random DAGs measurably slower: docs/performance.md).
MAX_PIPELINE = 1
#: Tests this fast (moving average, seconds) make the round trip of a dispatch
#: the main cost: then several are sent at once, as xdist's own load
#: scheduling batches more when tests are short.  How many: about
#: BATCH_SECONDS of tests at the average duration, at most FAST_PIPELINE.
#: Every dispatch costs a message each way and a barrier on the worker, and
#: the send itself holds up this process's main thread (on a busy host it
#: waits for the interpreter lock and a CPU, far longer than handling a
#: report), so fewer, larger batches save time; the time bound keeps a stop
#: (-x) prompt: what a worker holds when it is told to stop runs in about
#: BATCH_SECONDS.  The cap only guards against a wrong average: a low cap
#: brings back the many sends (figures for both in docs/performance.md).
FAST_TEST = 0.02
BATCH_SECONDS = 0.5
FAST_PIPELINE = 1000
#: Tests in flight per worker where the workers have no barrier item (a
#: suite that declares nothing): the one running, the next (a worker starts a
#: test only once it holds the next), and one more, so that a worker starts
#: its next test without waiting for this process to hear the last one ended.
PLAIN_DEPTH = 3
#: A worker is topped up when fewer real tests than this are in flight
#: (the current one and the next, as xdist's own MIN_PENDING) or, for fast
#: tests, fewer than half of what it is brought up to (see
#: DagScheduling._low_water).
LOW_WATER = 2


class PlainXdist:
    """Registered instead of :class:`DagController` when the barriers cannot work
    (:func:`~pytest_dagorder.glue.internals.barriers_blocker`): xdist schedules as it
    would without this plugin, and the run ends with one line saying why."""

    def __init__(self, missing: str) -> None:
        self.missing = missing

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_line(wording.plain_xdist(self.missing), yellow=True)


class WorkerGone(Exception):
    """A worker's side channel closed before the run could use it (the worker died)."""


class DagController:
    """Controller plugin: the side channel, the scheduler factory, report feed."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.policy = settings_of(config).on_failure
        self.sched: DagScheduling | None = None
        self.channels: dict[Any, Any] = {}

    def pytest_configure_node(self, node: Any) -> None:
        channel = node.gateway.newchannel()
        node.workerinput[wire.CHANNEL_KEY] = channel
        node.workerinput[wire.DIST_KEY] = self.config.getvalue("dist")
        self.channels[node] = channel

    @pytest.hookimpl(wrapper=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Generator[
            None, Any, Any]:
        # A wrapper receives the scheduler xdist (or another plugin) made for
        # the chosen --dist mode: the DAG modes get ours instead; any other
        # mode runs xdist's behind a guard that refuses a suite declaring
        # dependencies.
        inner = yield
        dist = config.getvalue("dist")
        if dist in DAG_MODES:
            self.sched = DagScheduling(config, log, self)
            return self.sched
        return None if inner is None else GuardedScheduling(inner, self, dist)

    def receive_payload(self, node: Any, nodes: Sequence[Any], *,
                        passable: bool = False) -> wire.Payload:
        """The plan ``node`` ships on the side channel when asked, after its version check.

        If it cannot be had, the session ends (every one of ``nodes`` is
        shut down); with ``passable``, a worker gone since (its channel
        closed) raises :class:`WorkerGone` instead: another can be asked.
        """
        raw = self._receive(node, nodes, read=True, passable=passable)
        try:
            return wire.decode(raw)
        except wire.WireError as exc:
            self._refuse_version(node, nodes, exc)

    def admit(self, node: Any, nodes: Sequence[Any]) -> None:
        """Check the version of a worker whose plan the run does not follow.

        The others, and any that joins after the start (a restart), are
        never asked for theirs: only the hello is read.  One gone since its
        collection raises :class:`WorkerGone` (it gets no work; xdist removes
        it soon).
        """
        self._receive(node, nodes, read=False, passable=True)

    def _receive(self, node: Any, nodes: Sequence[Any], *, read: bool,
                 passable: bool = False) -> object:
        channel = self.channels.get(node)
        if channel is None:
            abort(self.config, nodes, [Problem("", (
                "the dagorder plugin is not active on the workers; "
                "pass -p dagorder or install it where the workers run"))])
        try:
            first = channel.receive(timeout=RECEIVE_TIMEOUT)
            try:
                wire.check_hello(first)
            except wire.WireError as exc:
                self._refuse_version(node, nodes, exc)
            if not read:
                return None
            channel.send(wire.PLAN_REQUEST)
            return channel.receive(timeout=RECEIVE_TIMEOUT)
        except (pytest.UsageError, pytest.Session.Interrupted):
            raise
        except Exception as exc:
            # Passed over only if gone (closed channel): a worker that dies
            # right after its collection does so before xdist has told this
            # scheduler.  One that says nothing in time ends the session.
            timeout = getattr(channel, "TimeoutError", TimeoutError)
            if passable and not isinstance(exc, (TimeoutError, timeout)):
                raise WorkerGone(f"worker {node.gateway.id}: {exc}") from None
            abort(self.config, nodes, [Problem("", (
                f"no dependency graph from worker {node.gateway.id}: {exc}"))])

    def _refuse_version(self, node: Any, nodes: Sequence[Any], exc: Exception) -> NoReturn:
        # Not the suite's fault: a usage error (exit status 4), as for a bad option.
        for other in nodes:
            other.shutdown()
        raise pytest.UsageError(f"pytest-dagorder: worker {node.gateway.id}: {exc}") from None

    # Two hook implementations rather than one wrapper: this runs for every
    # report, and a plain call costs pluggy less than a wrapper's generator.
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Dispatch before any other plugin handles the report: a dependent
        # starts sooner.
        if self.sched is not None:
            self.sched.on_report(report, emit=False)

    # (pytest registers only methods named pytest_*: hence the name.)
    @pytest.hookimpl(trylast=True, specname="pytest_runtest_logreport")
    def pytest_runtest_logreport_then_skips(self, report: pytest.TestReport) -> None:
        # Report skips only after every other plugin handled the report: the
        # prerequisite's own line comes first in every output.
        if self.sched is not None:
            self.sched.emit_skips()

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        result = yield
        if self.sched is not None and self.sched.run is not None:
            self.sched.run.finish(session.config)
        return result

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.sched is not None and self.sched.run is not None:
            write_summary(terminalreporter, self.sched.run, self.sched.numnodes)
            if self.sched.relay is not None:
                nodeids = self.sched.run.nodeids
                write_published(terminalreporter, {
                    nodeids[i]: keys for i, keys in self.sched.relay.keys_by_test().items()})


class DagScheduling:
    """xdist's scheduler protocol, driven by the pure core (see module docstring)."""

    def __init__(self, config: pytest.Config, log: Any, controller: DagController) -> None:
        self.numnodes = xdist_node_count(config)
        self.config = config
        self.log = log.dagsched
        self.controller = controller
        self.node2collection: dict[Any, list[str]] = {}
        self.sent: dict[Any, deque[int]] = {}  # indices sent and not yet complete
        self.inflight: dict[Any, int] = {}  # real tests sent and not yet settled
        self.running_at: dict[int, Any] = {}
        self.unusable: set[Any] = set()
        self.dead: set[Any] = set()  # sending to them failed; xdist removes them soon
        self.collection: list[str] | None = None  # the followed worker's, once its plan is read
        self.followed: Any = None  # the worker whose collection and plan the run follows
        self.run: DagRun | None = None  # the run, once announced (see _start)
        self.built: DagRun | None = None  # the run, once built (see _plan_early)
        self.header: list[str] = []  # what announcing the run writes
        # Workers whose side channel closed before the run could use them
        # (see WorkerGone): never asked again, never given work.
        self.gone: set[Any] = set()
        self.barrier = -1  # index of the workers' barrier item; real tests are below it
        # The suite declares nothing (see wire.Payload.plain): the workers have
        # no barrier, so every worker always holds its next test or is told
        # to shut down (the lookahead rule in worker.py's docstring).
        self.plain = False
        self.locations: Sequence[wire.Location | None] = []
        # Workers whose plan was taken off the side channel (the one the run
        # follows, and the others' dropped unread once their version was checked).
        self.read_plans: set[Any] = set()
        self.aborted = False
        # Unknown yet: start with the careful depth (one test in flight).
        self.pace = Pacing(fast=FAST_TEST, seconds=BATCH_SECONDS, cap=FAST_PIPELINE,
                           initial=FAST_TEST)
        self.core_workers: set[Any] = set()  # nodes the core knows, by identity
        # Tests skipped while a worker held them: (that worker, reason) until
        # the worker's own SKIPPED report for them arrives.
        self.awaiting: dict[int, tuple[Any, str]] = {}
        self.emitting: int | None = None  # the test _report_skip reports right now
        # Skips decided here whose direct prerequisite's report has not been
        # shown yet (a worker still owes it, see awaiting): reported after it.
        self.held: list[SkipToReport] = []
        self._emitting_skips = False
        # Speculative hand-out needs workers to gate, which they do under "skip".
        self.speculate = controller.policy == "skip"
        # Published values (dag fixture), when some test requests it: per test,
        # whether it does, and what the controller holds for the workers.
        self.relay: Relay | None = None
        self.dag_users: Sequence[bool] = ()
        # pytest.exit() requests read from a worker's side channel, not yet acted on.
        self.exit_requests: dict[Any, wire.ExitRequest] = {}

    # -- xdist's protocol ---------------------------------------------------

    @property
    def nodes(self) -> list[Any]:
        return list(self.sent)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.node2collection) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        # Asked on every turn of xdist's event loop: the run exists only once
        # every collection was in (see schedule), so it decides alone.
        run = self.run
        if run is None:
            return self.aborted and self.collection is not None and self.collection_is_completed
        return self.aborted or run.sched.done

    @property
    def has_pending(self) -> bool:
        if self.run is None:
            return False
        return not self.run.sched.done or any(self.sent.values())

    def add_node(self, node: Any) -> None:
        if node in self.sent:
            raise ValueError(f"node {node} added twice")
        self.sent[node] = deque()
        self.inflight[node] = 0

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        if self.run is not None and list(collection) != self.collection:
            self._refuse(node, list(collection))  # a worker joining a started run
            return
        self.node2collection[node] = list(collection)
        if self.run is None:
            self._plan_early(node)

    def _refuse(self, node: Any, collection: list[str]) -> None:
        """A worker that collected other tests than the first: indices would not match.

        Shown as a collection error (as xdist does); the worker gets no work.
        """
        assert self.collection is not None
        msg = xdist_collection_diff(self.collection, collection,
                                    self.followed.gateway.id, node.gateway.id)
        self.log(msg)
        self.unusable.add(node)
        self.config.hook.pytest_collectreport(report=pytest.CollectReport(
            node.gateway.id, "failed", msg, []))

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        pending = self.sent.get(node)
        if pending is not None and item_index in pending:
            pending.remove(item_index)
        if self.run is not None and (item_index == self.barrier or (
                0 <= item_index < self.barrier
                and not self.run.sched.state[item_index].terminal)):
            # A test ends without its last report only if pytest.exit() cut it
            # short (the worker then said so first, see DagWorker.pass_on_exit);
            # a barrier's teardown may call it too.  Other tests never look.
            self._exit_if_asked(node)
        if 0 <= item_index < self.barrier:
            if self.run is not None:
                # The worker's time for the whole protocol (setup, call and
                # teardown with their hooks): what the next run ranks by.
                self.run.took(item_index, duration)
            if self.pace.record(duration):
                # The pipeline depth changed.  Otherwise there is nothing to do:
                # the test's last report, which came first, dispatched.
                self._dispatch()

    def _exit_if_asked(self, node: Any) -> None:
        """End the session as pytest ends it if a test on ``node`` called ``pytest.exit()``.

        Raised from inside xdist's loop, the exception reaches pytest's
        session wrapper as it would serially: its "!!! _pytest.outcomes.Exit:
        ... !!!" line and exit status (2 unless the test gave one).  The
        workers are told to shut down first, so that tearing them down does
        not wait.
        """
        self._read_side_channel(node)
        request = self.exit_requests.pop(node, None)
        if request is None:
            return
        for other in self.sent:
            other.shutdown()
        raise pytest.exit.Exception(request.message, request.returncode)

    def mark_test_pending(self, item: str) -> None:
        # Called by pytest_handlecrashitem implementations that want a crashed
        # test re-run; the core settled it as crashed (its dependents are
        # already skipped), so it is not run again.
        self.log(f"not re-running crashed test {item}: its outcome is final")

    def remove_node(self, node: Any) -> str | None:
        self.dead.discard(node)
        pending = self.sent.pop(node, deque())
        self.inflight.pop(node, None)
        run = self.run
        if run is None:
            return None
        sched = run.sched
        crashed: int | None = None
        if pending and pending[0] < self.barrier:
            # The worker died in the first test it had not finished reporting:
            # one still open, or one it held to skip itself (sent ahead).
            crashed = next((i for i in pending if i < self.barrier
                            and (not sched.state[i].terminal or i in self.awaiting)), None)
        if crashed is not None:
            # xdist reports it as crashed; a skip it was to report is dropped.
            self.awaiting.pop(crashed, None)
            sched.finished(crashed, "crashed")
        if self.relay is not None:
            self.relay.forget(node)
        if node in self.core_workers:
            self.core_workers.discard(node)
            for i in sched.remove_worker(node):
                self.running_at.pop(i, None)
        # A crashed test: xdist reports it as soon as this returns, and the
        # skips it caused follow that report (our logreport hook emits them),
        # so the prerequisite's line comes first.  Otherwise emit them now.
        self._dispatch(emit=crashed is None)
        for i in [i for i, n in self.running_at.items() if n is node]:
            del self.running_at[i]
        return None if crashed is None else run.nodeids[crashed]

    def schedule(self) -> None:
        if self.aborted and self.run is None:
            return  # the session is ending (see abort)
        run = self.run if self.run is not None else self._start()
        for node in self.sent:
            # A gone worker gets no work: xdist removes it soon.
            if (node not in self.core_workers and node in self.node2collection
                    and node not in self.unusable and node not in self.gone):
                if node not in self.read_plans:
                    try:
                        self.controller.admit(node, list(self.sent))
                    except WorkerGone:
                        self.gone.add(node)
                        continue
                run.sched.add_worker(node)
                self.core_workers.add(node)
        if not run.sched.done and self.sent and all(n in self.unusable for n in self.sent):
            # No worker can run what is left, and none is on its way (xdist
            # calls schedule() once a worker's collection is in): end the
            # session rather than wait for ever.
            self.aborted = True
            abort(self.config, list(self.sent), [Problem(next(iter(self.sent)).gateway.id, (
                "no worker left that collected the same tests; "
                "the tests not yet run cannot be scheduled"))])
        self._dispatch()

    # -- the run ---------------------------------------------------------------

    def _plan_early(self, node: Any) -> None:
        """Build the run from ``node``'s plan as soon as its collection is in.

        Every worker makes the same plan, so the first whose collection
        arrives is asked for it, and the controller decodes it and builds
        its core while the other workers are still collecting (at start the
        controller is otherwise idle and every worker waits for its first
        tests).  The run is announced, and its first tests sent, only when
        xdist calls :meth:`schedule` once every collection is in.  A worker
        that cannot ship (it died since) is passed over: the next one to
        collect is asked, or at the latest the start asks a live one.
        """
        if self.built is not None or self.aborted or node not in self.sent:
            return
        with collector_paused():  # the graph and the core: see memory.py
            self._build(node, early=True)

    def _start(self) -> DagRun:
        """Announce the run (built from the first plan read, or now): xdist's first schedule()."""
        if self.built is None:
            # A worker that died since its collection came in ships nothing more.
            alive = [n for n in self.node2collection
                     if n in self.sent and n not in self.gone]
            with collector_paused():
                # The first to collect, as the plan asked for early would be.
                self._build((alive or list(self.node2collection))[0], early=False)
        run = self.built
        assert run is not None and self.collection is not None
        for node in self.node2collection:
            if node is not self.followed and self.node2collection[node] != self.collection:
                self._refuse(node, self.node2collection[node])
        self.run = run
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            for line in self.header:
                terminal.write_line(line)
        self.emit_skips()
        return run

    def _build(self, first: Any, *, early: bool) -> None:
        """Read ``first``'s plan and build the core from it (into :attr:`built`).

        Early (see :meth:`_plan_early`), a worker that cannot ship is only
        passed over; at the start it ends the session, as does a plan with
        problems either way.
        """
        try:
            payload = self.controller.receive_payload(first, list(self.sent), passable=early)
        except WorkerGone:
            self.gone.add(first)
            return
        self.followed = first
        self.read_plans.add(first)
        self.collection = self.node2collection[first]
        if payload.usage_error:
            # As serially (pytest-order's --fail-all-on-failed-ordering): exit status 4.
            self.aborted = True
            for node in self.sent:
                node.shutdown()
            raise pytest.UsageError(payload.usage_error)
        if payload.problems:
            self.aborted = True
            abort(self.config, list(self.sent), [Problem(n, m) for n, m in payload.problems])
        if payload.ids != self.collection and sorted(payload.ids) != sorted(self.collection):
            self.aborted = True
            abort(self.config, list(self.sent), [Problem(first.gateway.id, (
                "the worker's plan names other tests than it collected; "
                "select tests in pytest_collection_modifyitems, not later"))])
        n = len(payload.ids)
        self.barrier = payload.barrier
        self.plain = payload.plain
        self.locations = payload.locations
        g = payload.graph
        nodeids = payload.ids if g is None else g.ids
        recorded = durations.load(self.config)
        # Graph ids are positions: node ids may repeat (--keep-duplicates).
        known: dict[int, float] = {
            k: recorded[nid] for k, nid in enumerate(nodeids) if nid in recorded}
        # Priorities: the longest remaining path in recorded seconds, declared
        # dependencies or not (tests with no record count as the mean of those
        # with one).
        settings = settings_of(self.config)
        mode = settings.affinity
        after: dict[int, list[int]] = {} if g is None else {
            k: list(a) for k, a in enumerate(g.after) if a}
        explicit = list(payload.xdist_groups)
        chains = ({} if mode == "none" else
                  serial_modules(payload.module_scopes, payload.runtime_depends))
        dist = self.config.getvalue("dist")
        whole = kept_whole(dist, mode, payload.ids, payload.module_scopes, payload.class_scopes)
        chained = {k: list(a) for k, a in after.items()}
        for label, members in itertools.chain(
                ((f"runtime depends() in {m}", ks) for m, ks in chains.items()),
                whole.items()):
            # A runtime depends() checks results in its own process, a
            # document's items share its namespace: the file runs as one group
            # (a label joins it), in collection order (edges).
            for prev, nxt in itertools.pairwise(members):
                chained.setdefault(nxt, []).append(prev)
            for k in members:
                explicit[k] = explicit[k] or label

        requires: Sequence[Sequence[int]] = [()] * len(nodeids) if g is None else g.requires

        def build(edges: dict[int, list[int]]) -> Graph:
            return Graph.of_positions(requires, after=edges, durations=known)

        try:
            graph = build(chained)
        except DependencyError:
            # The worker's order contradicts a declared edge (a hook reordered
            # the tests after the plan): the declared order wins.
            self.log("runtime depends() modules not chained: their order contradicts an edge")
            graph = build(after)
        if known:
            # Pipeline depth from the first dispatch, not only once tests ran.
            self.pace.average = sum(known.values()) / len(known)
        groups = affinity_groups(
            payload.scopes(mode), graph.requires[:n], graph.after[:n], explicit
        )
        groups += [None] * (len(graph) - n)
        # affinity none: tests share no process state, so a released test
        # need not prefer the worker that released it; priority alone decides.
        # Deselected prerequisites (past the run) never start: they hold nothing.
        resources = ([*payload.resources, *[()] * (len(graph) - n)]
                     if payload.resources else None)
        alone = ([*payload.exclusive, *[False] * (len(graph) - n)]
                 if any(payload.exclusive) else None)
        run = self.built = DagRun(graph, nodeids, n_run=n, on_failure=self.controller.policy,
                                  groups=groups, locality=mode != "none",
                                  resources=resources, limits=settings.limits, exclusive=alone,
                                  checks=dict(payload.fail_checks))
        if any(payload.dag_users):
            outcome = run.sched.outcome
            self.dag_users = payload.dag_users
            self.relay = Relay(graph.requires, lambda i: outcome[i] == "passed")
        # Written when the run is announced (see _start): the terminal still
        # shows the workers' collection until then.
        self.header = [wording.xdist_header(
            n, graph.edge_count, graph.longest_chain(), mode,
            len(run.sched.groups), len(known), len(nodeids))]
        self.header += payload.header
        run.whole = payload.whole
        if chains:
            self.header.append(wording.runtime_depends_header(len(chains)))
        if whole:
            self.header.append(wording.kept_whole_header(dist, len(whole)))
        used = resources_in_use(payload.resources)
        if used:
            self.header.append(wording.limits_header(settings.limits, used))
        unused = unused_limits(settings.limits, payload.resources)
        if unused:
            self.header.append(wording.unused_limits_warning(unused))
        if alone is not None:
            self.header.append(wording.exclusive_header(sum(alone)))

    def on_report(self, report: pytest.TestReport, *, emit: bool = True) -> None:
        run = self.run
        if run is None:
            return
        if self.relay is not None:
            self._read_side_channel(getattr(report, "node", None))
        elif run.tracker.inert(report):
            # Two reports of three: nothing to fold, nothing to dispatch, and
            # the time comes whole with the test's completion (see
            # mark_test_complete): which test it is about is not even looked up.
            return
        i = run.record(report, self._index_of(report), timed=False)
        if i is None:
            return
        if self.relay is not None:
            self.relay.settled(i)
        if self.awaiting.pop(i, None) is not None:
            run.reported.add(i)  # the worker's own report of a skip decided here
        node = self.running_at.pop(i, None)
        if node is not None and node in self.inflight:
            self.inflight[node] -= 1
        self._dispatch(emit=emit)

    def _read_side_channel(self, node: Any) -> None:
        """Take what ``node`` queued on the side channel after its plan (never waits).

        Two kinds come: a passed test's published values, sent before that
        test's reports on the same connection (so by the time its last report
        is handled here they are queued), and a ``pytest.exit()`` request
        (kept in :attr:`exit_requests`).  This is the one reader of both: a
        reader of one kind would drop a message of the other that happened to
        be queued first.
        """
        channel = self.controller.channels.get(node)
        if channel is None or self.run is None:
            return
        # Bounded even if a channel never ran empty: the rest waits for the next call.
        for _ in range(SIDE_CHANNEL_BATCH):
            try:
                raw = channel.receive(timeout=0)
            except Exception:  # empty (execnet's TimeoutError), closed, or gone
                return
            request = wire.decode_exit(raw)
            if request is not None:
                self.exit_requests.setdefault(node, request)
                continue
            try:
                nodeid, values = wire.read_published(raw)
            except wire.WireError as exc:
                self.log(f"ignored from {node.gateway.id}: {exc}")
                continue
            i = self._index_of_sent(node, nodeid)
            if i is not None and self.relay is not None:
                self.relay.received(node, i, values)

    def _index_of_sent(self, node: Any, nodeid: str) -> int | None:
        """The first test ``node`` holds with ``nodeid`` (node ids may repeat), else any."""
        assert self.run is not None
        if self.run.unique:
            return self.run.index.get(nodeid)  # nothing to tell apart
        for i in self.sent.get(node, ()):
            if i < self.barrier and self.run.nodeids[i] == nodeid:
                return i
        return self.run.index.get(nodeid)

    def _deliver(self, node: Any, tasks: list[int]) -> bool:
        """Send ``node`` what the readers among ``tasks`` may read, ahead of them.

        False if the worker is gone (as for a failed dispatch).
        """
        if self.relay is None or self.run is None:
            return True
        readers = [i for i in tasks if self.dag_users[i]] if self.dag_users else []
        if not readers:
            return True
        nodeids = self.run.nodeids
        values = {nodeids[p]: v for p, v in self.relay.missing(node, readers).items()}
        try:
            self.controller.channels[node].send(
                wire.deliveries([nodeids[i] for i in readers], values))
        except (OSError, ValueError, EOFError, KeyError) as exc:
            self.log(f"could not send results to {node.gateway.id}: {exc}")
            self.dead.add(node)
            return False
        return True

    def _index_of(self, report: pytest.TestReport) -> int | None:
        """Which test ``report`` is about: node ids may repeat (--keep-duplicates).

        A worker's reports are about the first test it was sent and has not
        completed with that node id (a worker runs what it holds in order);
        a skip this controller reports itself names its index in ``emitting``.
        """
        if self.emitting is not None:
            return self.emitting
        return self._index_of_sent(getattr(report, "node", None), report.nodeid)

    def emit_skips(self) -> None:
        """Report the skips decided so far, each after the line of what caused it.

        Reporting a skip runs the report hooks, which come back here: such a
        re-entry returns at once, and the loop below goes on with whatever
        the skip's report decided.
        """
        run = self.run
        if run is None or self._emitting_skips:
            return
        if not (self.awaiting or self.held or run.sched.skips_pending):
            return  # the common case, after nearly every report: nothing to do
        self._emitting_skips = True
        try:
            self._emit_skips(run)
        finally:
            self._emitting_skips = False

    def _emit_skips(self, run: DagRun) -> None:
        # Skips a worker was to report itself, but it is gone: nobody else will now.
        if self.awaiting:
            for i, (holder, _) in list(self.awaiting.items()):
                if holder not in self.sent and (gone := self.awaiting.pop(i, None)):
                    self._report_skip(i, gone[1])
        todo = deque([*self.held, *run.pop_skips()])
        self.held = []
        held_tasks: set[int] = set()  # of self.held, for the membership test below
        while todo:
            skip = todo.popleft()
            holder = self.running_at.get(skip.task) if skip.remote else None
            if holder is not None and holder in self.sent:
                # Handed out ahead: its worker skips it and reports that.
                self.awaiting[skip.task] = (holder, skip.reason)
            elif skip.prerequisite in self.awaiting or skip.prerequisite in held_tasks:
                # Its cause's own SKIPPED line is still to come from a worker:
                # this one follows that (on_report emits it then).
                self.held.append(skip)
                held_tasks.add(skip.task)
            else:
                self._report_skip(skip.task, skip.reason, fail=skip.fail)
            todo.extend(run.pop_skips())

    def _report_skip(self, i: int, reason: str, *, fail: bool = False) -> None:
        """Report test ``i`` SKIPPED from the controller, as a worker would have.

        ``fail``: FAILED instead, in its call (pytest-depends' ``fail`` action
        for a prerequisite that did not pass, decided by the core).
        """
        assert self.run is not None
        self.run.reported.add(i)
        hook = self.config.hook
        nodeid = self.run.nodeids[i]
        loc = self.locations[i] or wire.location_of(nodeid)
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

    def _dispatch(self, *, emit: bool = True) -> None:
        run = self.run
        if run is None or self.aborted:
            return
        sched = run.sched
        inflight = self.inflight
        if self.plain:
            self._dispatch_plain(sched)
            if emit:
                self.emit_skips()
            return
        # No worker is brought up to more than a batch (see _want).
        if inflight and min(inflight.values()) >= self._low_water(self.pace.batch()):
            # Every worker, usable or not, holds its next test: nothing to top
            # up (the common case with batches, checked after nearly every report).
            if emit:
                self.emit_skips()
            return
        nodes = [n for n in self.sent if n in self.core_workers and not n.shutting_down
                 and n not in self.dead
                 and n not in self.unusable]
        spec = self.speculate
        # First every idle worker gets work, then busy ones are topped up.
        for node in nodes:
            if inflight[node] == 0:
                self._send(node, sched.take(node, self._want(node, len(nodes)), speculate=spec))
        for node in nodes:
            have = inflight[node]
            want = self._want(node, len(nodes))
            if have >= self._low_water(want):
                continue
            if 0 < have < want:
                # Fast tests: a worker holding the rest of its group takes its
                # next group now, not a round trip after the group's end.
                self._send(node, sched.take(node, want - have, speculate=spec,
                                            next_group=self.pace.is_fast))
            elif spec and have == 1 and want == 1:
                # Slow tests, one in flight: add the test that can start only
                # once it ended (its dependent, its group's next).  The worker
                # starts that one without a round trip through this process;
                # no other worker could have started it sooner.
                self._send(node, sched.ahead(node, 1))
        if emit:
            self.emit_skips()

    def _dispatch_plain(self, sched: Any) -> None:
        """Dispatch without barriers: a worker runs a test only once it holds the next.

        Every test is ready from the start (nothing is declared), so nothing
        is ever held back: a worker is kept at :data:`PLAIN_DEPTH` tests in
        flight (short tests: at a batch, see :meth:`_want`), and once nothing
        is left to hand out it is told to shut down, which is the "next" its
        last test waits for (as xdist's own load scheduling does).  Tests
        that take a while go out one a round across the workers, so that the
        longest ones start on different workers.
        """
        inflight = self.inflight
        # Checked after nearly every report: every worker topped up (and some
        # test left to hand out, else the workers are told to shut down).
        if (inflight and sched.ready_count
                and min(inflight.values()) >= max(PLAIN_DEPTH, self._low_water(self.pace.batch()))):
            return
        nodes = [n for n in self.sent if n in self.core_workers and not n.shutting_down
                 and n not in self.dead and n not in self.unusable]
        if self.pace.is_fast:
            for node in sorted(nodes, key=inflight.__getitem__):  # idle ones first
                want = max(PLAIN_DEPTH, self._want(node, len(nodes)))
                have = inflight[node]
                if have < max(PLAIN_DEPTH, self._low_water(want)):
                    self._send(node, sched.take(node, want - have))
        else:
            short = [node for node in nodes if inflight[node] < PLAIN_DEPTH]
            while short and sched.ready_count:
                for node in list(short):
                    tasks = sched.take(node, 1)
                    self._send(node, tasks)
                    if not tasks or node in self.dead or inflight[node] >= PLAIN_DEPTH:
                        short.remove(node)
        if not sched.ready_count:
            for node in nodes:
                if not node.shutting_down:
                    node.shutdown()

    def _low_water(self, want: int) -> int:
        """Top a worker up once fewer real tests than this are in flight, ``want``
        being what it is brought up to (see :meth:`_want`).

        Fast tests: half of ``want``, a batch for a worker bound to a group.
        This process learns that a test ended only when it has handled the
        reports queued before that one, and a worker runs tests faster than
        this process takes their reports in: topped up at its last two, a
        worker ran dry before every batch arrived, idle far longer than under
        xdist's own load scheduling, which tops up at a quarter of the
        pending share.  The other half of the batch covers that lag.
        Free tests share what is ready, often far less than a batch: half of
        that share, so that one send carries several tests, not one per
        report, which costs CPU (figures for both in docs/performance.md).
        """
        if not self.pace.is_fast:
            return LOW_WATER
        return max(LOW_WATER, want // 2)

    def _want(self, node: Any, n_nodes: int) -> int:
        """How many real tests ``node`` should have in flight."""
        assert self.run is not None
        if not self.pace.is_fast:
            return MAX_PIPELINE
        batch = self.pace.batch()
        if self.speculate and self.run.sched.bound_group(node) is not None:
            # Its group's chain is the node's alone: hand it out ahead.
            return batch
        # Free tests: an equal share of what is ready, so no worker goes idle
        # while another holds a long queue.
        return max(1, min(batch, self.run.sched.ready_count // n_nodes))

    def _send(self, node: Any, tasks: list[int]) -> None:
        if not tasks:
            return
        indices = tasks if self.plain else [*tasks, self.barrier]
        if not self._deliver(node, tasks):
            return
        try:
            node.send_runtest_some(indices)
        except (OSError, ValueError, EOFError) as exc:
            # The worker died before xdist noticed (its channel is closed).
            # xdist's removal of the node follows and puts these tasks back;
            # they were never delivered, so none of them can be the one that
            # crashed it, and nothing more goes there.
            self.log(f"could not send to {node.gateway.id}: {exc}")
            self.dead.add(node)
            return
        for i in tasks:
            self.running_at[i] = node
        self.inflight[node] += len(tasks)
        self.sent[node].extend(indices)


def abort(config: pytest.Config, nodes: Sequence[Any], problems: Sequence[Problem]) -> NoReturn:
    """Report ``problems`` as collection errors and end the session before any test ran.

    Raised from inside xdist's loop, ``Interrupted`` ends the session the way
    pytest ends a broken collection (exit status 2); the workers are told to
    shut down first so that tearing them down does not wait.
    """
    report_problems(config, problems)
    for node in nodes:
        node.shutdown()
    raise pytest.Session.Interrupted(interrupted_message(problems))


class GuardedScheduling:
    """xdist's own scheduler for ``--dist each``, refused with a DAG.

    Every call goes to the wrapped scheduler; only the first ``schedule()``
    first reads the plan the workers shipped, so a suite that declares
    dependencies is stopped with a usage message instead of running unordered.
    """

    def __init__(self, inner: Any, controller: DagController, dist: str) -> None:
        self._inner = inner
        self._controller = controller
        self._dist = dist
        self._checked = False

    def schedule(self) -> None:
        if not self._checked:
            self._checked = True
            nodes = list(self._inner.nodes)
            payload = self._controller.receive_payload(nodes[0], nodes)
            problems = [Problem(n, m) for n, m in payload.problems]
            if payload.graph is not None or problems:
                declared = problems[0].nodeid if problems else _first_declaring(payload)
                problems.insert(0, Problem(declared, wording.dist_refused(self._dist, declared)))
                abort(self._controller.config, nodes, problems)
        self._inner.schedule()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _first_declaring(payload: wire.Payload) -> str:
    """The first test (in collection order) that declares a prerequisite: the one to name."""
    graph = payload.graph
    if graph is not None:
        for i, nid in enumerate(graph.ids):
            if graph.requires[i] or graph.after[i]:
                return nid
    return payload.ids[0]
