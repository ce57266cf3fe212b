"""xdist's scheduler protocol, translated into calls on the parts that do the work.

xdist's DSession calls the methods of :class:`DependencyScheduling` (xdist's
``Scheduling`` protocol, ``xdist/scheduler/protocol.py``); outcomes never
reach a scheduler there, so the controller plugin feeds the test reports in
through :meth:`~DependencyScheduling.on_report`.  This class only
translates: every decision about the run is
:func:`~pytest_dagorder.deciding.decide.decide`'s, reports become core events in
:class:`~.reports.ReportFeed`, skips are reported by
:class:`~.skips.SkipEmitter`, and tests are handed out by
:class:`~.dispatch.Dispatcher`; the decisions come from the scheduler core.

Its start-up (:class:`Launcher`) is a phase machine: :class:`Collecting`
(the workers collect; the first whose collection comes in is asked for its
plan), :class:`PlansRead` (the run is built from that plan, not yet
announced), :class:`Announced` (xdist's first ``schedule()`` wrote the
header; the workers are admitted), :class:`Running` (tests are handed out)
and :class:`Aborted` (the session ends before the run could).  The phase is
one attribute of :class:`Phases`; every move goes through
:meth:`Phases.enter` (the allowed ones are :data:`NEXT`); what a phase
knows is in its object.

Relies on xdist's ``WorkerController``'s ``send_runtest_some`` /
``shutting_down`` / ``shutdown`` / ``workerinput`` / ``gateway`` (pinned in
pyproject.toml); xdist's private helpers are reached through
:mod:`.xdist_internals` only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from ...core import wording as core_wording
from ...core.pacing import Pacing
from ...core.published import Relay
from ...deciding.decide import Decisions, decide_xdist
from ...declaring.declarations import Problem
from ...features import durations, sharding
from ...live_run.dag_run import DagRun, report_problems
from ...options import wording as options_wording
from ...options.settings import settings_of
from ...planning.facts import Facts
from ...shims.collector_pause import collector_paused
from ...shims.xdist_internals import xdist_collection_diff, xdist_node_count
from .abort import WorkerGone, abort
from .closing import OpenScopes
from .dispatch import BATCH_SECONDS, FAST_PIPELINE, FAST_TEST, Dispatcher
from .ledger import Ledger
from .reports import ReportFeed
from .skips import SkipEmitter
from .wording import past_time_limit

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.workermanage import WorkerController


class Channels(Protocol):
    """What the scheduler needs of the controller plugin: the workers' side channels."""

    @property
    def channels(self) -> dict[WorkerController, Any]: ...

    @property
    def policy(self) -> str: ...

    def receive_payload(self, node: WorkerController, nodes: Sequence[WorkerController], *,
                        passable: bool = False) -> Facts: ...

    def admit(self, node: WorkerController, nodes: Sequence[WorkerController]) -> None: ...


@dataclass
class Launch:
    """The run built from the plan of the worker it follows, and what drives it
    beside the core (made once, when the plan is read)."""

    #: The worker whose plan was read; its collection, which every worker's must equal.
    followed: WorkerController
    collection: list[str]
    run: DagRun
    #: What announcing the run writes, and the tests the worker left out
    #: (``--continue-on-collection-errors``), reported then.
    header: Sequence[str]
    errors: Sequence[Problem]
    #: Published values (``dag`` fixture), when some test requests it.
    relay: Relay | None
    skips: SkipEmitter
    dispatcher: Dispatcher
    feed: ReportFeed
    #: Workers the core knows, by identity.
    core_workers: set[WorkerController] = field(default_factory=set)
    #: Workers that collected other tests: never given work.
    unusable: set[WorkerController] = field(default_factory=set)
    #: Per test, its pytest-timeout limit where the timer ends the process
    #: (``Facts.time_limits``; empty: no test has one).
    time_limits: list[float | None] = field(default_factory=list)

    @property
    def barrier(self) -> int:
        """Index of the workers' barrier item; real tests are below it (the
        dispatcher, which sends it, holds it)."""
        return self.dispatcher.barrier

    def eligible(self, node: WorkerController) -> bool:
        return node in self.core_workers and node not in self.unusable


#: How much sooner than the crash the controller may have marked a test's
#: start: it learns of the previous test's end a little after the worker
#: went on to the next.
TIME_LIMIT_SLACK = 0.25


def crash_cause(launch: Launch, crashed: int, since: float | None) -> str:
    """Why test ``crashed`` ended its worker, if known: it had a pytest-timeout
    limit whose timer ends the process, and ran that long (``since``: when
    its worker got to it, see :attr:`.Ledger.head_since`)."""
    limits = launch.time_limits
    limit = limits[crashed] if crashed < len(limits) else None
    if limit is None or since is None or time.time() - since + TIME_LIMIT_SLACK < limit:
        return ""
    return past_time_limit(limit)


@dataclass(frozen=True)
class Collecting:
    """No plan read yet: the workers' collections come in."""


@dataclass(frozen=True)
class PlansRead:
    """A worker's plan was read and the run built from it; not announced yet
    (other workers may still be collecting)."""

    launch: Launch


@dataclass(frozen=True)
class Announced:
    """xdist's first ``schedule()`` announced the run (its header, the
    collection errors it reports, the first skips); workers are being admitted."""

    launch: Launch


@dataclass(frozen=True)
class Running:
    """The workers are admitted; tests are handed out until every one is terminal."""

    launch: Launch


@dataclass(frozen=True)
class Aborted:
    """The session ends before the run could: nothing more is scheduled.

    ``collection``: the followed worker's, if its plan was read; ``launch``:
    the run, if it had been announced (its summary is still written).
    """

    collection: list[str] | None = None
    launch: Launch | None = None


Phase = Collecting | PlansRead | Announced | Running | Aborted

#: The moves between phases; any other is a bug.
NEXT: dict[type[Phase], tuple[type[Phase], ...]] = {
    Collecting: (PlansRead, Aborted),
    PlansRead: (Announced, Aborted),
    Announced: (Running, Aborted),
    Running: (Aborted,),
    Aborted: (),
}


class Phases:
    """The start-up's phase and what each phase knows (see the module docstring).

    :meth:`enter` is the one place the phase changes (the moves of
    :data:`NEXT`); the rest reads the run as far as the phase has it, for
    the scheduler, the controller plugin and the tests.
    """

    def __init__(self) -> None:
        self.phase: Phase = Collecting()

    def enter(self, phase: Phase) -> None:
        """Move to ``phase``: the one place the phase changes."""
        if type(phase) not in NEXT[type(self.phase)]:
            raise RuntimeError(f"pytest-dagorder: no move from {type(self.phase).__name__} "
                               f"to {type(phase).__name__}")
        self.phase = phase

    @contextmanager
    def ending_on_refusal(self) -> Iterator[None]:
        """A call of the controller's that may end the session (a usage error, an
        abort): the phase is then :class:`Aborted`."""
        try:
            yield
        except (pytest.UsageError, pytest.Session.Interrupted):
            if not isinstance(self.phase, Aborted):
                self.enter(Aborted(self.collection, self.announced()))
            raise

    def launch(self) -> Launch | None:
        """The run once built (from :class:`PlansRead` on)."""
        phase = self.phase
        return None if isinstance(phase, Collecting) else phase.launch

    def announced(self) -> Launch | None:
        """The run once announced (still there after an abort)."""
        phase = self.phase
        return None if isinstance(phase, (Collecting, PlansRead)) else phase.launch

    def live(self) -> Launch | None:
        """The run while it may hand out tests (announced, not aborted)."""
        phase = self.phase
        return phase.launch if isinstance(phase, (Announced, Running)) else None

    @property
    def aborted(self) -> bool:
        """Whether the session ends before the run could (see :class:`Aborted`)."""
        return isinstance(self.phase, Aborted)

    @property
    def run(self) -> DagRun | None:
        """The run, once announced (see :meth:`Launcher.announce`)."""
        launch = self.announced()
        return None if launch is None else launch.run

    @property
    def built(self) -> DagRun | None:
        """The run, once built (see :meth:`Launcher.plan_early`)."""
        launch = self.launch()
        return None if launch is None else launch.run

    @property
    def followed(self) -> WorkerController | None:
        """The worker whose collection and plan the run follows."""
        launch = self.launch()
        return None if launch is None else launch.followed

    @property
    def collection(self) -> list[str] | None:
        """The followed worker's collection, once its plan is read."""
        phase = self.phase
        if isinstance(phase, Aborted):
            return phase.collection
        launch = self.launch()
        return None if launch is None else launch.collection

    @property
    def relay(self) -> Relay | None:
        launch = self.launch()
        return None if launch is None else launch.relay

    @property
    def skips(self) -> SkipEmitter | None:
        launch = self.launch()
        return None if launch is None else launch.skips

    @property
    def plain(self) -> bool:
        """Whether the workers run as under plain xdist (see ``deciding/decide.plain_run``)."""
        launch = self.launch()
        return launch is not None and launch.dispatcher.plain


class Launcher:
    """The run's start: the plan read from a worker, the run built and checked,
    announced at xdist's first ``schedule()``, the workers admitted.

    ``collections``: every worker's collection as it came in; ``gone``:
    workers whose side channel closed before the run could use them (see
    :class:`WorkerGone`), never asked again, never given work.
    """

    def __init__(self, config: pytest.Config, log: Callable[..., None], controller: Channels,
                 ledger: Ledger, phases: Phases, pace: Pacing) -> None:
        self.config = config
        self.log = log
        self.controller = controller
        self.ledger = ledger
        self.phases = phases
        self.pace = pace
        self.numnodes = xdist_node_count(config)
        self.collections: dict[WorkerController, list[str]] = {}
        self.gone: set[WorkerController] = set()

    def collected(self, node: WorkerController, collection: list[str]) -> None:
        """``node``'s collection is in: kept, and the run built from it if it is the first."""
        launch = self.phases.announced()
        if launch is not None and collection != launch.collection:
            self.refuse(launch, node, collection)  # a worker joining a started run
            return
        self.collections[node] = collection
        if launch is None:
            self.plan_early(node)

    def refuse(self, launch: Launch, node: WorkerController, collection: list[str]) -> None:
        """A worker that collected other tests than the first: indices would not match.

        Shown as a collection error (as xdist does); the worker gets no work.
        """
        msg = xdist_collection_diff(launch.collection, collection,
                                    launch.followed.gateway.id, node.gateway.id)
        self.log(msg)
        launch.unusable.add(node)
        self.config.hook.pytest_collectreport(report=pytest.CollectReport(
            node.gateway.id, "failed", msg, []))

    def admit(self, launch: Launch) -> None:
        """Give the core every worker that collected the run's tests and is not gone."""
        sent = self.ledger.sent
        machine = launch.run.machine
        for node in sent:
            # A gone worker gets no work: xdist removes it soon.
            if (node not in launch.core_workers and node in self.collections
                    and node not in launch.unusable and node not in self.gone):
                if node is not launch.followed:
                    try:
                        with self.phases.ending_on_refusal():
                            self.controller.admit(node, list(sent))
                    except WorkerGone:
                        self.gone.add(node)
                        continue
                machine.add_worker(node)
                launch.core_workers.add(node)
        if not machine.done and sent and all(n in launch.unusable for n in sent):
            # No worker can run what is left, and none is on its way (xdist
            # calls schedule() once a worker's collection is in): end the
            # session rather than wait for ever.
            self.phases.enter(Aborted(launch.collection, launch))
            abort(self.config, list(sent), [Problem(next(iter(sent)).gateway.id, (
                "no worker left that collected the same tests; "
                "the tests not yet run cannot be scheduled"))])

    def plan_early(self, node: WorkerController) -> None:
        """Build the run from ``node``'s plan as soon as its collection is in.

        Every worker makes the same plan, so the first whose collection
        arrives is asked for it, and the controller decodes it and builds
        its core while the other workers are still collecting (at start the
        controller is otherwise idle and every worker waits for its first
        tests).  The run is announced, and its first tests sent, only when
        xdist calls :meth:`~DependencyScheduling.schedule` once every
        collection is in.  A worker that cannot ship (it died since) is
        passed over: the next one to collect is asked, or at the latest the
        start asks a live one.
        """
        if not isinstance(self.phases.phase, Collecting) or node not in self.ledger.sent:
            return
        with collector_paused():  # the graph and the core: see shims/collector_pause.py
            self._build(node, early=True)

    def announce(self) -> Launch:
        """Announce the run (built from the first plan read, or now): xdist's first schedule()."""
        phases = self.phases
        if isinstance(phases.phase, Collecting):
            # A worker that died since its collection came in ships nothing more.
            alive = [n for n in self.collections
                     if n in self.ledger.sent and n not in self.gone]
            with collector_paused():
                # The first to collect, as the plan asked for early would be.
                self._build((alive or list(self.collections))[0], early=False)
        phase = phases.phase
        # Not early, a worker that cannot ship ends the session: the plan was read.
        assert isinstance(phase, PlansRead)
        launch = phase.launch
        for node, collection in self.collections.items():
            if node is not launch.followed and collection != launch.collection:
                self.refuse(launch, node, collection)
        phases.enter(Announced(launch))
        if launch.errors:
            report_problems(self.config, launch.errors)
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            for line in launch.header:
                terminal.write_line(line)
        launch.skips.emit(launch.run)
        return launch

    def _build(self, first: WorkerController, *, early: bool) -> None:
        """Read ``first``'s plan and build the run from it (then :class:`PlansRead`).

        Early (see :meth:`plan_early`), a worker that cannot ship is only
        passed over; at the start it ends the session, as does a plan with
        problems either way.
        """
        nodes = list(self.ledger.sent)
        try:
            facts = self._read_plan(first, nodes, early=early)
        except WorkerGone:
            self.gone.add(first)
            return
        collection = self.collections[first]
        decided = self._decide(facts)
        self._check_plan(first, collection, facts, decided, nodes)
        for note in decided.notes:
            self.log(note)
        sharding.from_workers(self.config, deselected=facts.deselected,
                              empty_part=decided.empty_part)
        self.phases.enter(PlansRead(self._launch_from(first, collection, facts, decided)))

    def _read_plan(self, first: WorkerController, nodes: list[WorkerController], *,
                   early: bool) -> Facts:
        """``first``'s facts, off its side channel (:class:`WorkerGone` if early and gone)."""
        with self.phases.ending_on_refusal():
            return self.controller.receive_payload(first, nodes, passable=early)

    def _decide(self, facts: Facts) -> Decisions:
        """Every decision about the run, from the facts read, this session's settings
        and recorded durations (see ``deciding/decide.py``)."""
        return decide_xdist(facts, settings_of(self.config), durations.load(self.config),
                            dist=self.config.getvalue("dist"), workers=self.numnodes)

    def _check_plan(self, first: WorkerController, collection: list[str], facts: Facts,
                    decided: Decisions, nodes: list[WorkerController]) -> None:
        """End the session if the run cannot be run (then :class:`Aborted`)."""
        if decided.usage_error:
            # As serially (pytest-order's --fail-all-on-failed-ordering): exit status 4.
            self.phases.enter(Aborted(collection))
            for node in nodes:
                node.shutdown()
            raise pytest.UsageError(decided.usage_error)
        if decided.problems:
            self.phases.enter(Aborted(collection))
            abort(self.config, nodes, decided.problems)
        if facts.ids != collection and sorted(facts.ids) != sorted(collection):
            self.phases.enter(Aborted(collection))
            abort(self.config, nodes, [Problem(first.gateway.id, (
                "the worker's plan names other tests than it collected; "
                "select tests in pytest_collection_modifyitems, not later"))])

    def _launch_from(self, first: WorkerController, collection: list[str], facts: Facts,
                     decided: Decisions) -> Launch:
        """Everything that drives the run beside the core, made from the decisions."""
        run = decided.run
        assert run is not None  # no problem, no usage error: decide made the run
        if decided.mean_duration is not None:
            # Pipeline depth from the first dispatch, not only once tests ran.
            self.pace.average = decided.mean_duration
        skips = SkipEmitter(self.config, self.ledger, facts.locations)
        # The workers' barrier item follows their real tests.
        dispatcher = Dispatcher(
            self.ledger, self.controller.channels, self.log, self.pace,
            ahead=self.controller.policy == "skip", barrier=len(facts.ids),
            plain=decided.plain, relay=decided.relay, dag_users=decided.dag_users,
            scopes=None if decided.plain else OpenScopes(
                facts.module_scopes, facts.class_scopes, len(facts.ids)))
        feed = ReportFeed(run, self.ledger, skips,
                          self.controller.channels, decided.relay, self.log)
        # --continue-on-collection-errors: tests the worker left out, reported
        # when the run is announced (the terminal shows the collection until then).
        return Launch(first, collection, run, decided.header, decided.errors,
                      decided.relay, skips, dispatcher, feed, time_limits=facts.time_limits)


class DependencyScheduling:
    """xdist's scheduler protocol, driven by the pure core (see module docstring).

    The protocol's members and the report feed only: the start-up is the
    :class:`Launcher`'s, what each phase knows the :class:`Phases`'.
    """

    def __init__(self, config: pytest.Config, log: Producer, controller: Channels) -> None:
        self.config = config
        self.log: Callable[..., None] = log.dagsched
        self.ledger = Ledger()
        # How many tests go out at once, from the durations seen (and, once
        # the run is built, those recorded by earlier runs).  Unknown yet:
        # start with the careful depth (one test in flight).
        self.pace = Pacing(fast=FAST_TEST, seconds=BATCH_SECONDS, cap=FAST_PIPELINE,
                           initial=FAST_TEST)
        self.phases = Phases()
        self.start = Launcher(config, self.log, controller, self.ledger, self.phases,
                              self.pace)
        self.numnodes = self.start.numnodes

    # -- xdist's protocol ---------------------------------------------------

    @property
    def nodes(self) -> list[WorkerController]:
        return list(self.ledger.sent)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.start.collections) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        # Asked on every turn of xdist's event loop: the run exists only once
        # every collection was in (see schedule), so it decides alone.
        phase = self.phases.phase
        if isinstance(phase, (Announced, Running)):
            return phase.launch.run.machine.done
        if isinstance(phase, Aborted):
            return phase.launch is not None or (
                phase.collection is not None and self.collection_is_completed)
        return False

    @property
    def has_pending(self) -> bool:
        run = self.phases.run
        if run is None:
            return False
        return not run.machine.done or any(self.ledger.sent.values())

    def add_node(self, node: WorkerController) -> None:
        self.ledger.add(node)

    def add_node_collection(self, node: WorkerController, collection: Sequence[str]) -> None:
        self.start.collected(node, list(collection))

    def mark_test_complete(self, node: WorkerController, item_index: int,
                           duration: float = 0) -> None:
        self.ledger.completed(node, item_index)
        launch = self.phases.announced()
        if launch is None:
            return  # nothing was sent yet
        barrier = launch.barrier
        if item_index == barrier or (
                0 <= item_index < barrier
                and not launch.run.machine.state[item_index].terminal):
            # A test ends without its last report only if pytest.exit() cut it
            # short (the worker then said so first, see exit_forwarding.py);
            # a barrier's teardown may call it too.  Other tests never look.
            self._exit_if_asked(launch, node)
        if 0 <= item_index < barrier:
            # The worker's time for the whole protocol (setup, call and
            # teardown with their hooks): what the next run ranks by.
            launch.run.took(item_index, duration)
            if self.pace.record(duration):
                # The pipeline depth changed.  Otherwise there is nothing to do:
                # the test's last report, which came first, dispatched.
                self._dispatch()

    def _exit_if_asked(self, launch: Launch, node: WorkerController) -> None:
        """End the session as pytest ends it if a test on ``node`` called ``pytest.exit()``.

        Raised from inside xdist's loop, the exception reaches pytest's
        session wrapper as it would serially: its "!!! _pytest.outcomes.Exit:
        ... !!!" line and exit status (2 unless the test gave one).  The
        workers are told to shut down first, so that tearing them down does
        not wait.
        """
        launch.feed.read_side_channel(node)
        request = launch.feed.exit_requests.pop(node, None)
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

    def remove_pending_tests_from_node(self, node: WorkerController,
                                       indices: Sequence[int]) -> None:
        # Only a scheduler that sends xdist's "steal" command is told of tests
        # taken back; this one never does (as xdist's own load scheduling).
        raise NotImplementedError

    def remove_node(self, node: WorkerController) -> str | None:
        since = self.ledger.head_since.get(node)
        pending = self.ledger.remove(node)
        launch = self.phases.announced()
        if launch is None:
            return None
        launch.dispatcher.dead.discard(node)
        run = launch.run
        machine = run.machine
        crashed = self._crashed(launch, pending, since)
        if launch.relay is not None:
            launch.relay.forget(node)
        if node in launch.core_workers:
            launch.core_workers.discard(node)
            running_at = self.ledger.running_at
            for i in machine.remove_worker(node):
                running_at.pop(i, None)
            if crashed is not None:
                machine.lost(node, core_wording.worker_crashed(
                    str(node.gateway.id), run.nodeids[crashed]))
        # A crashed test: xdist reports it as soon as this returns, and the
        # skips it caused follow that report (our logreport hook emits them),
        # so the prerequisite's line comes first.  Otherwise emit them now.
        self._dispatch(emit=crashed is None)
        self.ledger.forget_tasks_of(node)
        return None if crashed is None else run.nodeids[crashed]

    def _crashed(self, launch: Launch, pending: Sequence[int],
                 since: float | None) -> int | None:
        """The test a removed worker died in, settled as crashed; None if it died
        between tests (``pending``: what it held, ``since``: when it got to the first)."""
        if not pending or pending[0] >= launch.barrier:
            return None
        machine = launch.run.machine
        awaiting = launch.skips.awaiting
        # The worker died in the first test it had not finished reporting:
        # one still open, or one it held to skip itself (sent ahead).
        crashed = next((i for i in pending if i < launch.barrier
                        and (not machine.state[i].terminal or i in awaiting)), None)
        if crashed is not None:
            # xdist reports it as crashed; a skip it was to report is dropped.
            awaiting.pop(crashed, None)
            machine.finished(crashed, "crashed", crash_cause(launch, crashed, since))
        return crashed

    def schedule(self) -> None:
        phases = self.phases
        phase = phases.phase
        if isinstance(phase, Aborted):
            return  # the session is ending (see abort)
        launch = (phase.launch if isinstance(phase, (Announced, Running))
                  else self.start.announce())
        self.start.admit(launch)
        if isinstance(phases.phase, Announced):
            phases.enter(Running(launch))
        self._dispatch()

    # -- reports, from the controller plugin's hooks ---------------------------

    def on_report(self, report: pytest.TestReport, *, emit: bool = True) -> None:
        launch = self.phases.announced()
        if launch is None:
            return
        feed = launch.feed
        if report.failed:
            found = feed.elsewhere(report)
            if found is not None:
                # A section of the report: printed with the failure, kept by
                # whatever stores the report.
                report.sections.append((options_wording.ELSEWHERE_TITLE,
                                         options_wording.ran_elsewhere(
                                             *found, settings_of(self.config).affinity)))
        if feed.feed(report) is not None:
            self._dispatch(emit=emit)

    def emit_skips(self) -> None:
        """Report the skips decided so far, each after the line of what caused it."""
        launch = self.phases.announced()
        if launch is not None:
            launch.skips.emit(launch.run)

    def _dispatch(self, *, emit: bool = True) -> None:
        launch = self.phases.live()
        if launch is None:
            return
        launch.dispatcher.dispatch(launch.run, launch.eligible)
        if emit:
            launch.skips.emit(launch.run)
