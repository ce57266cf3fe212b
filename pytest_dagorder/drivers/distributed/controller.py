"""xdist controller side: the controller plugin, its side channel, the scheduler factory.

:class:`DagController` gives every worker a side channel, reads the plan a
worker ships on it, makes the scheduler for the DAG modes
(:class:`~.scheduling.DependencyScheduling`) and feeds it the test reports from
``pytest_runtest_logreport``; any other ``--dist`` mode runs xdist's own
scheduler behind :class:`GuardedScheduling`.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from ...deciding.decide import refused, worker_plain
from ...declaring.declarations import Problem
from ...features.stall import (
    STALL_KEY,
    ControllerDumps,
    StallWatch,
    WorkerState,
    dump_file,
    last_dump,
    report_lines,
)
from ...options import wording as options_wording
from ...options.settings import DAG_MODES, settings_of
from ...planning.facts import Facts
from ...shims.late_loading import Later
from ...shims.xdist_internals import hand_over_scheduler
from . import wire
from . import wording as xdist_wording
from .abort import WorkerGone, abort, refuse

if TYPE_CHECKING:
    from execnet import Channel
    from xdist.remote import Producer
    from xdist.scheduler.protocol import Scheduling
    from xdist.workermanage import WorkerController

    from ...live_run import dag_fixture, dag_run
    from . import scheduling
    from .scheduling import DependencyScheduling
else:
    dag_fixture = Later("pytest_dagorder.live_run.dag_fixture")
    dag_run = Later("pytest_dagorder.live_run.dag_run")
    scheduling = Later("pytest_dagorder.drivers.distributed.scheduling")

#: Seconds to wait for a worker's hello (sent before its collection ids on
#: the same connection, so normally there already) and for its plan, which
#: it encodes when asked.
RECEIVE_TIMEOUT = 60.0


class PlainXdist:
    """Registered instead of :class:`DagController` when the barriers cannot work
    (:func:`~pytest_dagorder.shims.pytest_internals.barriers_blocker`): xdist schedules as it
    would without this plugin, and the run ends with one line saying why."""

    def __init__(self, missing: str) -> None:
        self.missing = missing

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_line(xdist_wording.plain_xdist(self.missing), yellow=True)


class DagController:
    """Controller plugin: the side channel, the scheduler factory, report feed."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.policy = settings_of(config).on_failure
        self.sched: DependencyScheduling | None = None
        self.channels: dict[WorkerController, Channel] = {}
        #: Per worker whose hello was read: whether its run is plain (see
        #: ``deciding/decide.plain_run``), decided from the census it said.
        self.hellos: dict[WorkerController, bool] = {}
        self.stall = ControllerStall(config, settings_of(config).stall_report)

    def pytest_configure_node(self, node: WorkerController) -> None:
        channel = node.gateway.newchannel()
        node.workerinput[wire.CHANNEL_KEY] = channel
        node.workerinput[wire.DIST_KEY] = self.config.getvalue("dist")
        self.channels[node] = channel
        self.stall.configure_node(node)

    @pytest.hookimpl(wrapper=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Producer) -> Generator[
            None, Scheduling | None, Scheduling | None]:
        # A wrapper receives the scheduler xdist (or another plugin) made for
        # the chosen --dist mode: the DAG modes get ours instead; any other
        # mode runs xdist's behind a guard that refuses a suite declaring
        # dependencies.
        inner = yield
        dist = config.getvalue("dist")
        if dist in DAG_MODES:
            if inner is not None and not settings_of(config).asked:
                # Installed is not opted in: xdist's own scheduler, unless the
                # suite declares something (known once a worker collected).
                return XdistUnlessDeclared(inner, self, config, log)
            return self.dag_scheduler(config, log)
        return None if inner is None else GuardedScheduling(inner, self, dist)

    def dag_scheduler(self, config: pytest.Config, log: Producer) -> DependencyScheduling:
        """The DAG scheduler, fed the reports from now on."""
        self.sched = scheduling.DependencyScheduling(config, log, self)
        self.stall.watch(self.sched)
        return self.sched

    def declares_nothing(self, node: WorkerController,
                         nodes: Sequence[WorkerController]) -> bool:
        """Whether ``node``'s suite declares nothing, as its hello says (read once).

        :class:`WorkerGone` if it is gone since its collection.
        """
        if node not in self.hellos:
            self._receive(node, nodes, read=False, passable=True)
        return self.hellos[node]

    def receive_payload(self, node: WorkerController, nodes: Sequence[WorkerController], *,
                        passable: bool = False) -> Facts:
        """The facts ``node`` ships on the side channel when asked, after its version check.

        If it cannot be had, the session ends (every one of ``nodes`` is
        shut down); with ``passable``, a worker gone since (its channel
        closed) raises :class:`WorkerGone` instead: another can be asked.
        """
        raw = self._receive(node, nodes, read=True, passable=passable)
        try:
            return wire.decode(raw)
        except wire.WireError as exc:
            refuse(node, nodes, exc)

    def admit(self, node: WorkerController, nodes: Sequence[WorkerController]) -> None:
        """Check the version of a worker whose plan the run does not follow.

        The others, and any that joins after the start (a restart), are
        never asked for theirs: only the hello is read.  One gone since its
        collection raises :class:`WorkerGone` (it gets no work; xdist removes
        it soon).
        """
        self._receive(node, nodes, read=False, passable=True)

    def _receive(self, node: WorkerController, nodes: Sequence[WorkerController], *,
                 read: bool, passable: bool = False) -> object:
        channel = self.channels.get(node)
        if channel is None:
            abort(self.config, nodes, [Problem("", (
                "the dagorder plugin is not active on the workers; "
                "pass -p dagorder or install it where the workers run"))])
        try:
            if node not in self.hellos:
                first = channel.receive(timeout=RECEIVE_TIMEOUT)
                try:
                    census = wire.check_hello(first)
                except wire.WireError as exc:
                    refuse(node, nodes, exc)
                dist = self.config.getvalue("dist")
                found = settings_of(self.config)
                # Installed, not asked for, nothing declared: xdist's own
                # scheduler runs it (XdistUnlessDeclared), with no barrier.
                plain = self.hellos[node] = worker_plain(census, found, dist)
                if not plain and dist in DAG_MODES:
                    # Before any test of the worker: see DagWorker._install.
                    channel.send(wire.barriers())
            if not read:
                return None
            channel.send(wire.plan_request())
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

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        # Dispatch before any other plugin handles the report: a dependent
        # starts sooner.
        if self.sched is not None:
            self.sched.on_report(report, emit=False)
        self.stall.beat()
        result = yield
        # Report skips only after every other plugin handled the report: the
        # prerequisite's own line comes first in every output.
        if self.sched is not None:
            self.sched.emit_skips()
        return result

    def pytest_runtest_logstart(self) -> None:
        self.stall.test_started(self.sched is None or self.sched.phases.plain)

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        self.stall.stop()
        result = yield
        if self.sched is not None and self.sched.phases.run is not None:
            self.sched.phases.run.finish(session.config)
        return result

    def pytest_unconfigure(self) -> None:
        self.stall.stop()
        self.stall.dumps.remove()

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.sched is not None and self.sched.phases.run is not None:
            dag_run.write_summary(terminalreporter, self.sched.phases.run, self.sched.numnodes)
            if self.sched.phases.relay is not None:
                nodeids = self.sched.phases.run.nodeids
                dag_fixture.write_published(terminalreporter, {
                    nodeids[i]: keys for i, keys in self.sched.phases.relay.keys_by_test().items()})


class ControllerStall:
    """The controller's part of the stall report (ini ``dag_stall_report``, see
    ``features/stall.py``): where each worker dumps its stacks, the watch that
    notices no test ended for that long, and the report it then writes.

    ``seconds``: the setting (0: off).
    """

    def __init__(self, config: pytest.Config, seconds: float) -> None:
        self.config = config
        self.seconds = seconds
        self.dumps = ControllerDumps()
        self._watch: StallWatch | None = None
        self._sched: DependencyScheduling | None = None

    def configure_node(self, node: WorkerController) -> None:
        """Tell ``node`` where to dump its stacks (a local worker only)."""
        if self.seconds > 0 and (directory := self.dumps.for_node(node)) is not None:
            node.workerinput[STALL_KEY] = directory

    def watch(self, sched: DependencyScheduling) -> None:
        """Watch the run ``sched`` schedules (started at its first test)."""
        if self.seconds > 0:
            self._sched = sched
            self._watch = StallWatch(self.seconds, self._report, self._write)

    def beat(self) -> None:
        if self._watch is not None:
            self._watch.beat()

    def test_started(self, plain: bool) -> None:
        """A test started; ``plain``: the run is left to plain xdist."""
        # Counted from the first test on: collecting and starting the workers
        # may take long on a loaded machine, and no test can report before.
        watch = self._watch
        if watch is not None:
            watch.beat()
            if not watch.started:
                if plain:
                    self._watch = None  # a run left to plain xdist is not watched
                else:
                    watch.start()

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()

    def _report(self) -> list[str]:
        """Runs in the watch's thread, while the main thread waits for an event."""
        sched = self._sched
        if sched is None:
            return report_lines(self.seconds, [])
        ledger = sched.ledger
        # xdist indices are positions in the collection; a worker runs what it
        # was sent in order, so the first not completed is the one it runs.
        collection = sched.phases.collection or []
        workers = []
        for node in list(ledger.sent):
            name = str(node.gateway.id)
            pending = list(ledger.sent.get(node, ()))
            head = pending[0] if pending else None
            test = collection[head] if head is not None and 0 <= head < len(collection) else None
            since = ledger.head_since.get(node)
            stack = no_stack = None
            directory = node.workerinput.get(STALL_KEY)
            if test is None or since is None:
                pass  # between tests: no stack says where a test waits
            elif directory is None:
                no_stack = options_wording.STALL_NOT_LOCAL
            else:
                stack = last_dump(dump_file(directory, name), since)
                no_stack = None if stack else options_wording.STALL_NO_DUMP
            workers.append(WorkerState(name, test, since, stack, no_stack))
        return report_lines(self.seconds, workers)

    def _write(self, lines: list[str]) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is None:
            print("\n".join(lines), file=sys.stderr, flush=True)
            return
        terminal.write("\n")  # xdist's progress line may be open
        terminal.section("stall (pytest-dagorder)", sep="!", yellow=True)
        for line in lines:
            terminal.write_line(line)
        terminal.flush()


class ForwardingScheduling:
    """xdist's scheduling protocol, every call passed on to :attr:`_target`; the
    wrappers below override only what they change."""

    @property
    def _target(self) -> Scheduling:
        raise NotImplementedError

    @property
    def nodes(self) -> list[WorkerController]:
        return self._target.nodes

    @property
    def collection_is_completed(self) -> bool:
        return self._target.collection_is_completed

    @property
    def tests_finished(self) -> bool:
        return self._target.tests_finished

    @property
    def has_pending(self) -> bool:
        return self._target.has_pending

    def add_node(self, node: WorkerController) -> None:
        self._target.add_node(node)

    def add_node_collection(self, node: WorkerController, collection: Sequence[str]) -> None:
        self._target.add_node_collection(node, collection)

    def mark_test_complete(self, node: WorkerController, item_index: int,
                           duration: float = 0) -> None:
        self._target.mark_test_complete(node, item_index, duration)

    def mark_test_pending(self, item: str) -> None:
        self._target.mark_test_pending(item)

    def remove_pending_tests_from_node(self, node: WorkerController,
                                       indices: Sequence[int]) -> None:
        self._target.remove_pending_tests_from_node(node, indices)

    def remove_node(self, node: WorkerController) -> str | None:
        return self._target.remove_node(node)

    def schedule(self) -> None:
        self._target.schedule()


class GuardedScheduling(ForwardingScheduling):
    """xdist's own scheduler for ``--dist each``, refused with a DAG.

    Every call goes to the wrapped scheduler; only the first ``schedule()``
    first reads the plan the workers shipped, so a suite that declares
    dependencies is stopped with a usage message instead of running unordered.
    """

    def __init__(self, inner: Scheduling, controller: DagController, dist: str) -> None:
        self._inner = inner
        self._controller = controller
        self._dist = dist
        self._checked = False

    @property
    def _target(self) -> Scheduling:
        return self._inner

    def add_node_collection(self, node: WorkerController, collection: Sequence[str]) -> None:
        self._inner.add_node_collection(node, collection)
        if self._checked:
            return
        # Checked at the first collection, before xdist names the scheduler
        # (-v): a suite the guard lets through is xdist's own from then on.
        try:
            self._check(node, passable=True)
        except WorkerGone:
            return  # the next worker's collection is checked
        hand_over_scheduler(self._controller.config, self, self._inner)

    def schedule(self) -> None:
        if not self._checked:
            self._check(next(iter(self._inner.nodes)))
        self._inner.schedule()

    def _check(self, node: WorkerController, *, passable: bool = False) -> None:
        nodes = list(self._inner.nodes)
        payload = self._controller.receive_payload(node, nodes, passable=passable)
        self._checked = True
        declared = refused(payload)
        if declared is not None:
            abort(self._controller.config, nodes, [
                Problem(declared, xdist_wording.dist_refused(self._dist, declared)),
                *(Problem(n, m) for n, m in payload.problems)])

    def __getattr__(self, name: str) -> Any:
        # Anything else xdist's scheduler has (a pytest_handlecrashitem may look).
        return getattr(self._inner, name)


class XdistUnlessDeclared(ForwardingScheduling):
    """xdist's own scheduler for a run that did not ask for this plugin, unless
    its suite declares something; then the DAG scheduler.

    ``pytest_xdist_make_scheduler`` runs before any worker has collected, so
    the choice waits for the first collection: that worker's hello says
    whether the suite declares nothing (no edge, resource, exclusive test,
    group, ``dag`` user; every worker collects the same).  Until then xdist's
    scheduler takes every call (it only records the workers and their
    collections) and this one keeps the same record, to replay it to the DAG
    scheduler should that be chosen.  The chosen one then takes xdist's calls
    directly (:func:`~.xdist_internals.hand_over_scheduler`), or through
    this one where that is not possible.
    """

    def __init__(self, inner: Scheduling, controller: DagController, config: pytest.Config,
                 log: Producer) -> None:
        self._inner = inner
        self._controller = controller
        self._config = config
        self._log = log
        self._chosen: Scheduling | None = None
        self._added: list[WorkerController] = []
        self._collections: dict[WorkerController, list[str]] = {}

    @property
    def _target(self) -> Scheduling:
        return self._inner if self._chosen is None else self._chosen

    def add_node(self, node: WorkerController) -> None:
        if self._chosen is None:
            self._added.append(node)
        self._target.add_node(node)

    def remove_node(self, node: WorkerController) -> str | None:
        if self._chosen is None:
            if node in self._added:
                self._added.remove(node)
            self._collections.pop(node, None)
        return self._target.remove_node(node)

    def add_node_collection(self, node: WorkerController, collection: Sequence[str]) -> None:
        if self._chosen is not None:
            self._chosen.add_node_collection(node, collection)
            return
        self._collections[node] = list(collection)
        self._inner.add_node_collection(node, collection)
        try:
            plain = self._controller.declares_nothing(node, list(self._added))
        except WorkerGone:
            return  # the next worker's collection decides
        if plain:
            self._choose(self._inner)
        else:
            self._choose_dag()

    def schedule(self) -> None:
        if self._chosen is None:
            # No hello could be read: the DAG scheduler knows how to end such a run.
            self._choose_dag()
        self._target.schedule()

    def _choose_dag(self) -> None:
        dag = self._controller.dag_scheduler(self._config, self._log)
        self._choose(dag)
        for node in self._added:
            dag.add_node(node)
        for node, collection in self._collections.items():
            dag.add_node_collection(node, collection)

    def _choose(self, chosen: Scheduling) -> None:
        self._chosen = chosen
        hand_over_scheduler(self._config, self, chosen)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # never this object's own (not set yet, or a copy's)
            raise AttributeError(name)
        return getattr(self._target, name)
