"""xdist worker side: the plugin that wires the worker's parts to pytest's hooks.

Each part holds one job: :mod:`.worker_facts` makes the plan the worker ships,
:mod:`.shipping` ships it when the controller asks, :mod:`.barrier` hosts
the hidden barrier item and the gate that hides it (why both: that
module's docstring), :mod:`.exit_forwarding` hands a test's
``pytest.exit()`` to the controller, :mod:`.sent_ahead` skips a test
handed out ahead whose prerequisite failed here.  This plugin reads the
side channel and passes each message to its part by a table of the kinds
the controller sends (:func:`~.wire.route`); it sends a passed test's
published values (the ``dag`` fixture) on it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Generator
from typing import Any

import pytest

from ...features.stall import WorkerDumps
from ...live_run.dag_fixture import LocalResults
from ...options.settings import DAG_MODES, settings_of
from ...planning.plan import Plan, Planner
from ...shims.collector_pause import UntilTestsBegin, collector_paused
from ...shims.pytest_internals import testmon_batch_ends
from ...shims.xdist_internals import queued_indices
from . import wire, worker_facts
from .barrier import BarrierHost
from .exit_forwarding import ExitForwarder
from .facts_shipping import PlanShipper
from .sent_ahead import SentAhead


class DagWorker(Planner):
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.channel: Any = config.workerinput.get(wire.CHANNEL_KEY)  # type: ignore[attr-defined]
        # Gating of tests sent ahead (see StateMachine.take), under "skip".
        self.gating = settings_of(config).on_failure == "skip"
        self.sent_ahead: SentAhead | None = None  # once collected, when gating
        self.index: dict[str, int] = {}
        self.dag_mode = False  # the controller runs the DAG scheduler (known at collection)
        # This worker runs as under plain xdist until the controller, which
        # decides from the facts, says the run needs the barrier (wire.BARRIERS).
        self.plain = True
        self.session: pytest.Session | None = None
        #: The items this worker runs from, once collected (the barrier goes past them).
        self.final: list[pytest.Item] = []
        self._install_lock = threading.Lock()
        self.results = LocalResults(self._send_published, remote=self.channel is not None)
        self.dumps: WorkerDumps | None = None  # the stall report's stack dumps (stall.py)
        # Before the collection is in: the controller's closing messages come
        # only ahead of dispatches, but the host must be there to take them.
        self.host = BarrierHost()
        self._before_tests = UntilTestsBegin()
        # The plan is shipped on request only (see wire.hello; the controller
        # asks the first worker whose collection came in).
        self.shipper = (None if self.channel is None
                        else PlanShipper(self.channel, self._before_tests))
        #: The controller's messages by kind (see :meth:`_on_delivery`).
        self._handlers: dict[str, Callable[[object], None]] = {
            wire.CLOSING: self._closing, wire.PLAN_REQUEST: self._plan_asked,
            wire.BARRIERS: self._install, wire.DELIVERY: self._delivered}
        if self.channel is not None:
            # Deliveries are handled in execnet's receiver thread, in the order
            # they were sent: one sent ahead of a dispatch is stored before
            # xdist's own callback queues that dispatch's tests.
            self.channel.setcallback(self._on_delivery)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self) -> None:
        # Before the test's setup: a ship still under way in the receiver
        # thread ends first, and none after it pauses the collector.
        self._before_tests.begin()

    def pytest_sessionfinish(self) -> None:
        if self.dumps is not None:
            self.dumps.close()
            self.config.pluginmanager.unregister(self.dumps)
            self.dumps = None

    def _send_published(self, nodeid: str, values: dict[str, object]) -> None:
        if self.channel is not None:
            self.channel.send(wire.published(nodeid, values))

    def _on_delivery(self, raw: object) -> None:
        """Hand a message of the controller to its handler in :attr:`_handlers`.

        One it cannot read is said back on the channel (:func:`~.wire.refused`):
        the controller ends the session with it, where dropping it would leave
        a reader waiting for values that never come.
        """
        try:
            handle, data = wire.route(raw, self._handlers)
            handle(data)
        except wire.WireError as exc:
            self.channel.send(wire.refused(exc))

    def _closing(self, data: object) -> None:
        ending = wire.read_closing(data)
        self.host.closing[ending.nodeid] = ending.scopes

    def _plan_asked(self, data: object) -> None:
        if self.shipper is not None:
            self.shipper.asked()

    def _delivered(self, data: object) -> None:
        delivery = wire.read_deliveries(data)
        self.results.store.deliver(delivery.ready, delivery.values)

    def planned(self, config: pytest.Config, plan: Plan, items: list[pytest.Item]) -> None:
        self.results.planned(plan, items)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> Generator[None, None, None]:
        # The plan's indices follow the order the planner left; the outermost
        # wrapper sees that order before, and the order the worker will run
        # after, every other hook (a conftest may still reorder session.items
        # here, and xdist sends its ids from here, before or after that).
        planned = list(session.items)
        ids = [it.nodeid for it in planned]  # pytest makes the string on every read
        self.index = {nid: k for k, nid in enumerate(ids)}
        result = yield
        with collector_paused():  # see collector_pause.py
            self._after_collection(session, planned, ids)
        return result

    def _after_collection(self, session: pytest.Session, planned: list[pytest.Item],
                          ids: list[str]) -> None:
        final = list(session.items)
        if self.gating:
            self.sent_ahead = SentAhead(self.plan, self.index)
        # Workers do not see the controller's --dist; it comes in workerinput.
        # Only the DAG scheduler ("load") sends barriers; other modes (each
        # runs every index it has) must not find one.
        dist = self.config.workerinput.get(wire.DIST_KEY, "load")  # type: ignore[attr-defined]
        self.dag_mode = dist in DAG_MODES
        self.session = session
        self.final = final
        if self.shipper is not None:
            # Last: the controller answers the hello with wire.BARRIERS (in
            # execnet's receiver thread, see _install), which needs the above.
            # The controller's indices are positions in the list this worker
            # runs from: the facts follow that order.  The controller asks
            # for them as soon as it has this collection, if it is the first.
            self.shipper.collected(
                worker_facts.make_census(self.plan, planned, ids),
                functools.partial(worker_facts.make_facts, self.config, self.plan, planned,
                                  final, ids))

    def _install(self, data: object) -> None:
        """The controller decided the run needs the barrier: install it and its gate.

        Runs in execnet's receiver thread, which handles the side channel's
        messages in the order they arrived: the controller sends this before
        the worker's first tests, so it is done before xdist's own callback
        queues them, and the barrier's index lies past the ids xdist sent.
        """
        with self._install_lock:
            session = self.session
            if not self.plain or session is None or not self.dag_mode:
                return
            self.plain = False
        self.host.install(self.config, session, self.final,
                          ExitForwarder(self.channel, session))
        # Before the first test; not in a run left to plain xdist.
        self.dumps = WorkerDumps.for_worker(self.config, settings_of(self.config).stall_report)
        if self.dumps is not None:
            self.config.pluginmanager.register(self.dumps, "dagorder-stall-dumps")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Skip, before its fixtures, a test sent ahead whose prerequisite failed here
        (:meth:`.SentAhead.setup`)."""
        if self.sent_ahead is not None:
            self.sent_ahead.setup(item)

    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        if item is self.host.ends_dispatch:
            # With no real test queued behind the barrier it may be this
            # worker's last test: a plugin that sends what it gathered in
            # batches ends its batch here, as it would at a last test (nextitem
            # None), so that nothing stays behind at the end.  Not at every
            # dispatch: each batch sent costs pytest-testmon a save.
            queued = queued_indices(self.config) or ()
            if not any(i < len(self.final) for i in queued):
                testmon_batch_ends(self.config)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Before xdist's own hook sends the report: a passed test's values
        # reach the controller ahead of the report that lets dependents start.
        self.results.on_report(report)
        if self.sent_ahead is not None:
            # Outcomes are kept only for gating tests sent ahead.
            self.sent_ahead.record(report)
