"""xdist's scheduler protocol, translated into calls on the parts that do the work.

xdist's DSession calls the methods of :class:`DependencyScheduling` (see xdist's
``scheduler/`` package); outcomes never reach a scheduler there, so the
controller plugin feeds the test reports in through :meth:`on_report`.
This class only translates: every decision about the run is
:func:`~pytest_dagorder.glue.decide.decide`'s,
reports become core events in :class:`~.reports.ReportFeed`, skips are
reported by :class:`~.skips.SkipEmitter`, and tests are handed out by
:class:`~.dispatch.Dispatcher`; the decisions come from the scheduler core.

Relies on xdist's Scheduling protocol and ``WorkerController``'s
``send_runtest_some`` / ``shutting_down`` / ``workerinput`` / ``gateway``
(pinned in pyproject.toml); xdist's private helpers are reached through
:mod:`.xdist_internals` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import pytest

from ..core import wording
from ..core.published import Relay
from ..glue import durations, sharding
from ..glue.dag_run import DagRun, report_problems
from ..glue.decide import decide
from ..glue.declarations import Problem
from ..glue.facts import Facts
from ..glue.memory import collector_paused
from ..glue.settings import settings_of
from .closing import OpenScopes
from .dispatch import Dispatcher
from .ledger import Ledger
from .reports import ReportFeed
from .session import WorkerGone, abort
from .skips import SkipEmitter
from .xdist_internals import xdist_collection_diff, xdist_node_count


class Channels(Protocol):
    """What the scheduler needs of the controller plugin: the workers' side channels."""

    @property
    def channels(self) -> dict[Any, Any]: ...

    @property
    def policy(self) -> str: ...

    def receive_payload(self, node: Any, nodes: Sequence[Any], *,
                        passable: bool = False) -> Facts: ...

    def admit(self, node: Any, nodes: Sequence[Any]) -> None: ...


class DependencyScheduling:
    """xdist's scheduler protocol, driven by the pure core (see module docstring)."""

    def __init__(self, config: pytest.Config, log: Any, controller: Channels) -> None:
        self.numnodes = xdist_node_count(config)
        self.config = config
        self.log = log.dagsched
        self.controller = controller
        self.node2collection: dict[Any, list[str]] = {}
        self.ledger = Ledger()
        self.unusable: set[Any] = set()
        self.collection: list[str] | None = None  # the followed worker's, once its plan is read
        self.followed: Any = None  # the worker whose collection and plan the run follows
        self.run: DagRun | None = None  # the run, once announced (see _start)
        self.built: DagRun | None = None  # the run, once built (see _plan_early)
        self.header: list[str] = []  # what announcing the run writes
        self.errors: list[Problem] = []  # reported when the run is announced
        # Workers whose side channel closed before the run could use them
        # (see WorkerGone): never asked again, never given work.
        self.gone: set[Any] = set()
        self.barrier = -1  # index of the workers' barrier item; real tests are below it
        # Workers whose plan was taken off the side channel (the one the run
        # follows, and the others' dropped unread once their version was checked).
        self.read_plans: set[Any] = set()
        self.aborted = False
        self.core_workers: set[Any] = set()  # nodes the core knows, by identity
        self.skips = SkipEmitter(config, self.ledger)
        self.dispatcher = Dispatcher(self.ledger, controller.channels, self.log,
                                     speculate=controller.policy == "skip")
        self.feed: ReportFeed | None = None  # once the run is built
        # Published values (dag fixture), when some test requests it.
        self.relay: Relay | None = None

    # -- xdist's protocol ---------------------------------------------------

    @property
    def nodes(self) -> list[Any]:
        return list(self.ledger.sent)

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
        return self.aborted or run.machine.done

    @property
    def has_pending(self) -> bool:
        if self.run is None:
            return False
        return not self.run.machine.done or any(self.ledger.sent.values())

    def add_node(self, node: Any) -> None:
        self.ledger.add(node)

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
        self.ledger.completed(node, item_index)
        if self.run is not None and (item_index == self.barrier or (
                0 <= item_index < self.barrier
                and not self.run.machine.state[item_index].terminal)):
            # A test ends without its last report only if pytest.exit() cut it
            # short (the worker then said so first, see exit_forwarding.py);
            # a barrier's teardown may call it too.  Other tests never look.
            self._exit_if_asked(node)
        if 0 <= item_index < self.barrier:
            if self.run is not None:
                # The worker's time for the whole protocol (setup, call and
                # teardown with their hooks): what the next run ranks by.
                self.run.took(item_index, duration)
            if self.dispatcher.pace.record(duration):
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
        assert self.feed is not None
        self.feed.read_side_channel(node)
        request = self.feed.exit_requests.pop(node, None)
        if request is None:
            return
        for other in self.ledger.sent:
            other.shutdown()
        raise pytest.exit.Exception(request.message, request.returncode)

    def mark_test_pending(self, item: str) -> None:
        # Called by pytest_handlecrashitem implementations that want a crashed
        # test re-run; the core settled it as crashed (its dependents are
        # already skipped), so it is not run again.
        self.log(f"not re-running crashed test {item}: its outcome is final")

    def remove_node(self, node: Any) -> str | None:
        self.dispatcher.dead.discard(node)
        pending = self.ledger.remove(node)
        run = self.run
        if run is None:
            return None
        machine = run.machine
        awaiting = self.skips.awaiting
        crashed: int | None = None
        if pending and pending[0] < self.barrier:
            # The worker died in the first test it had not finished reporting:
            # one still open, or one it held to skip itself (sent ahead).
            crashed = next((i for i in pending if i < self.barrier
                            and (not machine.state[i].terminal or i in awaiting)), None)
        if crashed is not None:
            # xdist reports it as crashed; a skip it was to report is dropped.
            awaiting.pop(crashed, None)
            machine.finished(crashed, "crashed")
        if self.relay is not None:
            self.relay.forget(node)
        if node in self.core_workers:
            self.core_workers.discard(node)
            running_at = self.ledger.running_at
            for i in machine.remove_worker(node):
                running_at.pop(i, None)
        # A crashed test: xdist reports it as soon as this returns, and the
        # skips it caused follow that report (our logreport hook emits them),
        # so the prerequisite's line comes first.  Otherwise emit them now.
        self._dispatch(emit=crashed is None)
        self.ledger.forget_tasks_of(node)
        return None if crashed is None else run.nodeids[crashed]

    def schedule(self) -> None:
        if self.aborted and self.run is None:
            return  # the session is ending (see abort)
        run = self.run if self.run is not None else self._start()
        sent = self.ledger.sent
        for node in sent:
            # A gone worker gets no work: xdist removes it soon.
            if (node not in self.core_workers and node in self.node2collection
                    and node not in self.unusable and node not in self.gone):
                if node not in self.read_plans:
                    try:
                        self.controller.admit(node, list(sent))
                    except WorkerGone:
                        self.gone.add(node)
                        continue
                run.machine.add_worker(node)
                self.core_workers.add(node)
        if not run.machine.done and sent and all(n in self.unusable for n in sent):
            # No worker can run what is left, and none is on its way (xdist
            # calls schedule() once a worker's collection is in): end the
            # session rather than wait for ever.
            self.aborted = True
            abort(self.config, list(sent), [Problem(next(iter(sent)).gateway.id, (
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
        if self.built is not None or self.aborted or node not in self.ledger.sent:
            return
        with collector_paused():  # the graph and the core: see memory.py
            self._build(node, early=True)

    def _start(self) -> DagRun:
        """Announce the run (built from the first plan read, or now): xdist's first schedule()."""
        if self.built is None:
            # A worker that died since its collection came in ships nothing more.
            alive = [n for n in self.node2collection
                     if n in self.ledger.sent and n not in self.gone]
            with collector_paused():
                # The first to collect, as the plan asked for early would be.
                self._build((alive or list(self.node2collection))[0], early=False)
        run = self.built
        assert run is not None and self.collection is not None
        for node in self.node2collection:
            if node is not self.followed and self.node2collection[node] != self.collection:
                self._refuse(node, self.node2collection[node])
        self.run = run
        if self.errors:
            report_problems(self.config, self.errors)
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            for line in self.header:
                terminal.write_line(line)
        self.emit_skips()
        return run

    def _build(self, first: Any, *, early: bool) -> None:
        """Read ``first``'s plan and build the run from it (into :attr:`built`).

        Early (see :meth:`_plan_early`), a worker that cannot ship is only
        passed over; at the start it ends the session, as does a plan with
        problems either way.
        """
        nodes = list(self.ledger.sent)
        try:
            facts = self.controller.receive_payload(first, nodes, passable=early)
        except WorkerGone:
            self.gone.add(first)
            return
        self.followed = first
        self.read_plans.add(first)
        self.collection = self.node2collection[first]
        decided = decide(facts, settings_of(self.config), durations.load(self.config),
                         dist=self.config.getvalue("dist"), workers=self.numnodes)
        if decided.usage_error:
            # As serially (pytest-order's --fail-all-on-failed-ordering): exit status 4.
            self.aborted = True
            for node in nodes:
                node.shutdown()
            raise pytest.UsageError(decided.usage_error)
        if decided.problems:
            self.aborted = True
            abort(self.config, nodes, decided.problems)
        # --continue-on-collection-errors: tests the worker left out, reported
        # when the run is announced (the terminal shows the collection until then).
        self.errors = decided.errors
        if facts.ids != self.collection and sorted(facts.ids) != sorted(self.collection):
            self.aborted = True
            abort(self.config, nodes, [Problem(first.gateway.id, (
                "the worker's plan names other tests than it collected; "
                "select tests in pytest_collection_modifyitems, not later"))])
        for note in decided.notes:
            self.log(note)
        run = decided.run
        assert run is not None  # no problem, no usage error: decide made the run
        self.built = run
        # The workers' barrier item follows their real tests.
        barrier = len(facts.ids)
        self.barrier = barrier
        self.relay = decided.relay
        # Written when the run is announced (see _start): the terminal still
        # shows the workers' collection until then.
        self.header = decided.header
        sharding.from_workers(self.config, deselected=facts.deselected,
                              empty_part=decided.empty_part)
        self.skips.locations = facts.locations
        dispatcher = self.dispatcher
        dispatcher.barrier = barrier
        dispatcher.plain = decided.plain
        if not decided.plain:
            dispatcher.scopes = OpenScopes(facts.module_scopes, facts.class_scopes,
                                           len(facts.ids))
        dispatcher.relay = decided.relay
        dispatcher.dag_users = decided.dag_users
        if decided.mean_duration is not None:
            # Pipeline depth from the first dispatch, not only once tests ran.
            dispatcher.pace.average = decided.mean_duration
        self.feed = ReportFeed(run, barrier, self.ledger, self.skips,
                               self.controller.channels, decided.relay, self.log)

    # -- reports, from the controller plugin's hooks ---------------------------

    def on_report(self, report: pytest.TestReport, *, emit: bool = True) -> None:
        if self.run is None or self.feed is None:
            return
        if report.failed:
            found = self.feed.elsewhere(report)
            if found is not None:
                # A section of the report: printed with the failure, kept by
                # whatever stores the report.
                report.sections.append((wording.ELSEWHERE_TITLE, wording.ran_elsewhere(
                    *found, settings_of(self.config).affinity)))
        if self.feed.feed(report) is not None:
            self._dispatch(emit=emit)

    def emit_skips(self) -> None:
        """Report the skips decided so far, each after the line of what caused it."""
        if self.run is not None:
            self.skips.emit(self.run)

    def _dispatch(self, *, emit: bool = True) -> None:
        run = self.run
        if run is None or self.aborted:
            return
        self.dispatcher.dispatch(run, self._eligible)
        if emit:
            self.skips.emit(run)

    def _eligible(self, node: Any) -> bool:
        return node in self.core_workers and node not in self.unusable
