"""xdist worker side: ship the graph to the controller, host the barrier item.

Why barriers.  An xdist worker runs the test it holds only once it has
received the *next* index (pytest needs ``nextitem`` to know which fixtures
to tear down).  A controller that sends a test only when it is ready would
deadlock on a chain a -> b: a waits for a successor, b waits for a's outcome.
So every dispatch ends with one hidden no-op *barrier* item: the last real
test sent runs at once, and the barrier, when its own successor arrives,
tears down exactly what pytest would have torn down between the two real
tests.

Why a gate on the protocol hook.  Barriers must be invisible: no
``pytest_runtest_*`` hook, no wrapper of another plugin, no report.  xdist
starts every item with ``config.hook.pytest_runtest_protocol(...)``; the gate
replaces that one hook caller on this worker's hook relay and answers for
barriers itself.  A real test whose successor is the barrier is given, as
``nextitem``, a real test sharing its deepest scope instead: its teardown
then ends its own scopes only, keeping module/class fixtures for whatever
comes next.

When neither is installed.  A suite that declares nothing the controller
must order, limit or withhold (see :func:`declares_nothing`) needs no
barrier: every test is ready from the start, so the controller always
sends a worker its next test ahead, as xdist's own load scheduling does.
Every worker decides that after its collection (all collect the same) and
then leaves xdist's worker as it is.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
from collections.abc import Callable, Collection, Generator
from typing import Any

import pytest

from ..core.affinity import DocumentKind, kept_whole
from ..core.state_machine import Skip, blocked_skip
from ..glue import sharding
from ..glue.dag_fixture import LocalResults, uses_dag
from ..glue.dag_run import short_names
from ..glue.internals import (
    as_in_teardown,
    can_stop,
    index_past_end,
    replace_hook_caller,
    report_phase,
    skip_here,
    stop_after_this_test,
    teardown_towards,
    teardown_view,
    wide_fixtures,
)
from ..glue.markers import SHARES_NOTHING
from ..glue.memory import UntilTestsBegin, collector_paused
from ..glue.outcome_tracker import OutcomeTracker
from ..glue.planning import Plan, Planner, state_scopes
from ..glue.resources import NONE
from ..glue.settings import DAG_MODES, settings_of
from ..glue.sharding import xdist_group
from ..glue.stall import WorkerDumps
from ..migration import fail_checks, ordering_failed
from ..migration.runtime import RuntimeUsers
from . import wire

BARRIER_NAME = "<dagorder-barrier>"


class Barrier(pytest.Item):
    """A hidden no-op item; never passed to any hook (see module docstring)."""

    #: The test whose failed teardown this barrier reports (see run_barrier).
    speaks_for: pytest.Item | None = None

    @property
    def nodeid(self) -> str:
        # xdist checks that a report's node id is the running item's.  Overriding
        # pytest's property: checked up front by barriers_blocker.
        return self.speaks_for.nodeid if self.speaks_for is not None else super().nodeid

    def runtest(self) -> None:  # pragma: no cover - the gate never runs it
        raise AssertionError("a barrier is never run as a test")

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, ""


class _ProtocolGate:
    """Stands in for the ``pytest_runtest_protocol`` hook caller.

    Attribute access (adding hook implementations, history, ...) goes to the
    real caller, so plugins registered later still attach to it.
    """

    def __init__(self, inner: Any, worker: DagWorker) -> None:
        self._inner = inner
        self._worker = worker

    def __call__(self, **kwargs: Any) -> object:
        item = kwargs["item"]
        try:
            if isinstance(item, Barrier):
                return self._worker.run_barrier(item, kwargs.get("nextitem"))
            if isinstance(kwargs.get("nextitem"), Barrier):
                # Hooks must not see the barrier even as `nextitem`: a real test
                # that shares the deepest possible scope with this one tears down
                # exactly as much (only this test's own scopes, and those the
                # controller said no later test shares), and the barrier does
                # the rest once the real successor is known.
                worker = self._worker
                kwargs["nextitem"] = worker.stand_in(item, worker.closing.pop(item.nodeid, ()))
                worker.last_view = teardown_view(item)
            try:
                return self._inner(**kwargs)
            finally:
                self._worker.last_real = item
        except pytest.exit.Exception as exc:
            if not self._worker.pass_on_exit(exc):
                raise
            return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class DagWorker(Planner):
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.channel: Any = config.workerinput.get(wire.CHANNEL_KEY)  # type: ignore[attr-defined]
        self.last_real: pytest.Item | None = None
        #: The last real test followed by a barrier, as its teardown saw it.
        self.last_view: dict[str, object] = {}
        self._below: dict[int, list[tuple[int, pytest.Item]]] = {}
        #: By node id: the scopes the test's own teardown may end (wire.closing).
        self.closing: dict[str, list[str]] = {}
        # Gating of speculatively sent tests (see StateMachine.take): outcomes
        # of the tests this worker ran, in the order they ended.
        self.gating = settings_of(config).on_failure == "skip"
        self.stop_policy = settings_of(config).on_failure == "stop"
        self.tracker = OutcomeTracker()
        self.outcome: dict[int, str] = {}
        self.ended: dict[int, int] = {}
        self.local_skips: dict[int, Skip] = {}
        self.index: dict[str, int] = {}
        self._names: list[str] | None = None  # see names
        self.dag_mode = False  # the controller runs the DAG scheduler (known at collection)
        # The suite declares nothing the controller must order or limit (known
        # at collection): then this worker runs as under plain xdist.
        self.plain = False
        #: Per planned test, what document it is an item of (see documents()).
        self.documents: list[DocumentKind | None] = []
        self.session: pytest.Session | None = None
        self.results = LocalResults(self._send_published, remote=self.channel is not None)
        self.dumps: WorkerDumps | None = None  # the stall report's stack dumps (stall.py)
        # The plan is shipped on request only (see wire.hello; the controller
        # asks the first worker whose collection came in): until then, how to make it.
        self._plan_lock = threading.Lock()
        self._unshipped: Callable[[], wire.Payload] | None = None
        self._plan_asked = False
        self._before_tests = UntilTestsBegin()
        if self.channel is not None:
            # Deliveries are handled in execnet's receiver thread, in the order
            # they were sent: one sent ahead of a dispatch is stored before
            # xdist's own callback queues that dispatch's tests.
            self.channel.setcallback(self._on_delivery)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self) -> None:
        # Once, before the first test: nothing per test (see stall.py); not
        # in a run left to plain xdist.
        if self.dag_mode and not self.plain:
            self.dumps = WorkerDumps(self.config, settings_of(self.config).stall_report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self) -> None:
        # Before the test's setup: a ship still under way in the receiver
        # thread ends first, and none after it pauses the collector.
        self._before_tests.begin()

    @pytest.hookimpl(trylast=True)
    def pytest_exception_interact(self) -> None:
        # pytest's faulthandler plugin cancels the timer at every failed test.
        if self.dumps is not None:
            self.dumps.rearm()

    def pytest_sessionfinish(self) -> None:
        if self.dumps is not None:
            self.dumps.close()

    def _send_published(self, nodeid: str, values: dict[str, object]) -> None:
        if self.channel is not None:
            self.channel.send(wire.published(nodeid, values))

    def _on_delivery(self, raw: object) -> None:
        ending = wire.read_closing(raw)
        if ending is not None:
            self.closing[ending[0]] = ending[1]
            return
        if raw == wire.PLAN_REQUEST:
            with self._plan_lock:
                self._plan_asked = True
            self._ship_if_asked()
            return
        try:
            ready, values = wire.read_deliveries(raw)
        except wire.WireError:
            return  # nothing else is sent this way; a reader's wait then ends in its error
        self.results.store.deliver(ready, values)

    def planned(self, config: pytest.Config, plan: Plan, items: list[pytest.Item]) -> None:
        sharding.apply(config, plan, items)
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
        with collector_paused():  # see memory.py
            self._after_collection(session, planned, ids)
        return result

    def _after_collection(self, session: pytest.Session, planned: list[pytest.Item],
                          ids: list[str]) -> None:
        final = list(session.items)
        # Every worker collects the same tests, so every one decides alike, and
        # the controller follows the flag in the plan it reads.
        # --dag-on-failure=stop starts nothing new after a failure: the
        # controller must be able to withhold tests, so it needs barriers.
        # Files kept whole (--dist loadfile/loadscope, documents) are chains
        # the controller hands out one test after another: barriers again.
        dist = self.config.workerinput.get(wire.DIST_KEY, "load")  # type: ignore[attr-defined]
        self.documents = documents(planned)
        self.plain = (not self.stop_policy and declares_nothing(self.plan, planned)
                      and not kept_whole(dist, settings_of(self.config).affinity, ids,
                                         _scopes(planned, pytest.Module),
                                         _scopes(planned, pytest.Class), self.documents))
        if self.channel is not None:
            # The controller's indices are positions in the list this worker
            # runs from: ship the plan in that order.  The controller asks
            # for it as soon as it has this collection, if it is the first.
            self.channel.send(wire.hello(self.plain))
            with self._plan_lock:
                self._unshipped = functools.partial(self._payload, planned, final, ids)
            self._ship_if_asked()  # a request may have come first
        # Workers do not see the controller's --dist; it comes in workerinput.
        # Only the DAG scheduler ("load") sends barriers; other modes (each
        # runs every index it has) must not find one.
        self.dag_mode = dist in DAG_MODES
        self.session = session
        if self.dag_mode and not self.plain:
            # The controller withholds tests that are not ready, so the worker
            # needs its barrier and the gate that hides it (module docstring).
            # A suite that declares nothing gets neither: the controller then
            # always sends the next test ahead, as xdist's load scheduling does.
            replace_hook_caller(self.config, "pytest_runtest_protocol",
                                lambda caller: _ProtocolGate(caller, self))
            self._index_scopes(final)
            # After xdist sent the ids: the barrier's index is past every real test.
            index_past_end(session, Barrier.from_parent(session, name=BARRIER_NAME))

    def _ship_if_asked(self) -> None:
        """Send the plan once both the request and the collection are in.

        Runs in execnet's receiver thread (the request) or the main thread
        (the collection), whichever comes second; the lock lets exactly one
        send it.  The main thread then waits for its first tests, which come
        only after the controller has the plan: nothing changes the items
        while the receiver thread reads them.
        """
        with self._plan_lock:
            make = self._unshipped if self._plan_asked else None
            if make is None:
                return
            self._unshipped = None
        # See memory.py: the pause is process-wide, so it is taken only while
        # no test has begun (the main thread is at most finishing the
        # collection's bookkeeping, itself paused, or waiting for its first
        # tests, which come after the plan).
        with self._before_tests.paused():
            self.channel.send(wire.encode(make()))

    def name(self, i: int) -> str:
        """Test ``i`` of the plan's graph as the controller names it (made on first use:
        only a skip this worker words itself needs names)."""
        if self._names is None:
            self._names = short_names(self.plan.nodeids if self.plan is not None else [])
        return self._names[i]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Skip, before its fixtures, a test sent ahead whose prerequisite failed here.

        The controller hands a group's chain out ahead only to the worker that
        runs the open prerequisites, so this worker knows their outcomes first;
        the wording is the core's (:func:`blocked_skip`), and the controller,
        which made the same decision, leaves the report to this worker.
        Likewise a test sent after its prerequisite passed here, when a
        barrier then tore down a module/class fixture of that prerequisite
        and the teardown failed (see :meth:`pytest_runtest_logreport`).
        """
        graph = self.plan.graph if self.plan is not None else None
        if not self.gating or graph is None:
            return
        i = self.index.get(item.nodeid)
        if i is None:
            return
        failed = [p for p in graph.requires[i] if self.outcome.get(p, "passed") != "passed"]
        if not failed:
            return
        p = min(failed, key=self.ended.__getitem__)
        skip = blocked_skip(i, p, self.outcome[p], self.local_skips.get(p), self.name)
        self.local_skips[i] = skip
        skip_here(skip.reason)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Before xdist's own hook sends the report: a passed test's values
        # reach the controller ahead of the report that lets dependents start.
        self.results.on_report(report)
        if not self.gating:
            return  # outcomes are kept only for gating tests sent ahead
        if self.tracker.inert(report):
            return  # most reports: nothing to fold
        i = self.index.get(report.nodeid)
        if i is None:
            return
        word = self.tracker.feed(report, i)
        if word is None:
            return
        if i not in self.outcome:
            self.outcome[i] = word
            self.ended[i] = len(self.ended)
        elif self.outcome[i] == "passed" and word != "passed":
            # A barrier's teardown of a module/class fixture failed after the
            # test had passed; it is reported on that test, as serially.  The
            # controller has settled the test already, so only the dependents
            # that start on this worker from now on can still be skipped for
            # it (serially every dependent would be).
            self.outcome[i] = word

    def _index_scopes(self, items: list[pytest.Item]) -> None:
        """Remember, below every collector, the first item of up to two of its
        children (with the id of that child), for :meth:`stand_in`."""
        below = self._below
        # The first item below any child is the first of its own parent, and
        # the parent's own bucket wants its first two: later siblings can be
        # passed over.
        seen: dict[int, int] = {}  # by id of the parent: items met so far
        for it in items:
            key = id(it.parent)
            k = seen.get(key, 0)
            if k == 2:
                continue
            seen[key] = k + 1
            chain = it.listchain()
            for node, child in itertools.pairwise(chain):
                bucket = below.setdefault(id(node), [])
                if len(bucket) < 2 and all(c != id(child) for c, _ in bucket):
                    bucket.append((id(child), it))

    def stand_in(self, item: pytest.Item, ending: Collection[str] = ()) -> pytest.Item | None:
        """A real item sharing the deepest scope with ``item`` but none of ``ending``
        (node ids of its class and module that no later test shares; if nothing
        outside them is known, they are kept).  None: nothing shares one."""
        chain = item.listchain()
        for closed in ((ending, ()) if ending else ((),)):
            for depth in range(len(chain) - 2, -1, -1):
                node, child = chain[depth], chain[depth + 1]
                if closed and node.nodeid in closed:
                    continue
                for under, other in self._below.get(id(node), ()):
                    if under != id(child):
                        return other
        return None

    def _payload(self, planned: list[pytest.Item], final: list[pytest.Item],
                 ids: list[str]) -> wire.Payload:
        """The plan, indexed like ``final`` (what this worker runs from); ``ids``
        are the node ids of ``planned``."""
        plan = self.plan
        graph: wire.GraphData | None = None
        problems: list[tuple[str, str]] = []
        if plan is not None:
            problems = [(p.nodeid, p.message) for p in plan.problems]
            if plan.graph is not None and not plan.problems:
                g = plan.graph
                nodeids = ([*ids, *(it.nodeid for it in plan.deselected)]
                           if plan.items == planned else plan.nodeids)
                graph = wire.GraphData(nodeids, [list(r) for r in g.requires],
                                       [list(a) for a in g.after])
        grouped = plan is None or "xdist_group" in plan.marker_names
        payload = wire.Payload(
            ids=ids,
            barrier=len(planned),
            # Computed in bulk by the planner (internals.fill_locations).
            locations=[_location(it) for it in planned],
            module_scopes=_scopes(planned, pytest.Module),
            class_scopes=_scopes(planned, pytest.Class),
            xdist_groups=([xdist_group(it) for it in planned] if grouped
                          else [None] * len(planned)),
            graph=graph,
            problems=problems,
            plain=self.plain,
        )
        if plan is not None and (plan.notes or plan.whole or plan.dropped):
            payload = dataclasses.replace(payload, header=list(plan.notes), whole=plan.whole,
                                          deselected=plan.dropped, empty_part=plan.empty_part)
        if plan is not None and plan.errors:
            payload = dataclasses.replace(
                payload, errors=[(p.nodeid, p.message) for p in plan.errors])
        if usage := ordering_failed(self.config):
            payload = dataclasses.replace(payload, usage_error=usage)
        if checks := fail_checks(self.config):
            payload = dataclasses.replace(payload, fail_checks=list(checks.items()))
        if (graph is not None and plan is not None and plan.graph is not None
                and settings_of(self.config).affinity == "state"):
            labels = state_scopes(plan.items, plan.graph,
                                  stated=SHARES_NOTHING in plan.marker_names,
                                  stateless=settings_of(self.config).stateless_fixtures)
            if any(labels):
                # Graph positions are plan.items'; the payload's, planned's.
                where = dict(zip(map(id, plan.items), labels, strict=True))
                payload = dataclasses.replace(
                    payload, state_scopes=[where.get(id(it)) for it in planned])
        if any(self.documents):
            payload = dataclasses.replace(payload, documents=self.documents)
        if any(keeps := _module_fixture_users(planned)):
            payload = dataclasses.replace(payload, module_fixtures=keeps)
        if any(users := [uses_dag(it) for it in planned]):
            payload = dataclasses.replace(payload, dag_users=users)
        uses = RuntimeUsers()
        runtime = [uses(it) for it in planned]
        if any(runtime):
            payload = dataclasses.replace(payload, runtime_depends=runtime)
        if plan is not None and plan.needs:
            needs = [plan.needs.get(id(it), NONE) for it in planned]
            payload = dataclasses.replace(
                payload, resources=[list(n.resources) for n in needs],
                exclusive=[n.exclusive for n in needs])
        try:
            return payload.in_order(ids if final == planned else [it.nodeid for it in final])
        except ValueError:
            return wire.Payload([], 0, [], [], [], [], None, [("", (
                "a pytest_collection_finish hook added or removed tests after "
                "pytest-dagorder made its plan; select tests in "
                "pytest_collection_modifyitems instead"))])

    def pass_on_exit(self, exc: BaseException) -> bool:
        """Hand a test's ``pytest.exit()`` to the controller; False: let it end this worker.

        Left to itself, the exception ends this worker's session and xdist
        takes the worker for crashed (exit status 2, the default) or fails
        an internal assertion (any other status).  Instead the controller is
        told on the side channel, ahead of xdist's "test complete" event for
        the same test, and ends the whole session with the same exception;
        this worker stops taking tests (``shouldstop``) and tears down as at
        any session end.
        """
        if (self.channel is None or not self.dag_mode or self.session is None
                or not can_stop(self.session)):
            return False
        # pytest.exit.Exception has no name mypy accepts as a type; its fields:
        message, code = str(getattr(exc, "msg", exc)), getattr(exc, "returncode", None)
        self.channel.send(wire.encode_exit(wire.ExitRequest(message, code)))
        stop_after_this_test(self.session, message)
        return True

    def run_barrier(self, barrier: Barrier, nextitem: pytest.Item | None) -> bool:
        """Tear down what the next item does not share, as pytest would have."""
        call = pytest.CallInfo.from_call(
            lambda: teardown_towards(barrier.session, nextitem),
            when="teardown",
            reraise=(pytest.exit.Exception, KeyboardInterrupt),
        )
        last = self.last_real
        if call.excinfo is not None and last is not None:
            # pytest reports a failing module/class fixture teardown on the last
            # test that used it; xdist checks that a report's node id matches
            # the item being run, so the barrier takes that test's id.
            barrier.speaks_for = last
            try:
                # Report hooks see the test as during its own teardown, where
                # serially this error comes up.
                with as_in_teardown(last, self.last_view):
                    report_phase(last, call)
            finally:
                barrier.speaks_for = None
        return True


def declares_nothing(plan: Plan | None, items: list[pytest.Item]) -> bool:
    """Whether the run needs nothing of the DAG scheduler but its order by durations.

    No edge (``depends_on``, ``run_after``, the foreign markers that become
    edges), no problem to report, no resource or exclusive test, no
    ``xdist_group``, no test using the ``dag`` fixture or pytest-dependency's
    runtime ``depends()``: every test is ready from the start, so the
    controller never withholds one and the worker needs no barrier.
    """
    if plan is None or plan.graph is not None or plan.problems or plan.needs:
        return False
    if "xdist_group" in plan.marker_names:
        return False
    uses = RuntimeUsers()
    return not any(uses_dag(it) or uses(it) for it in items)


def documents(items: list[pytest.Item]) -> list[DocumentKind | None]:
    """Per item, None for a test function, else what document it is an item of.

    ``"module"``: the collector above it stands for a Python module
    (``--doctest-modules``' items, Sybil's on any file: ``getparent(pytest.Module)``
    finds one), whose docstrings it runs; ``"file"``: any other item a plugin
    collects from a file (YAML tests, a lint check).
    """
    out: list[DocumentKind | None] = []
    by_parent: dict[int, DocumentKind] = {}
    for item in items:
        if isinstance(item, pytest.Function):
            out.append(None)
            continue
        key = id(item.parent)
        kind = by_parent.get(key)
        if kind is None:
            kind = by_parent[key] = "file" if item.getparent(pytest.Module) is None else "module"
        out.append(kind)
    return out


def _location(item: pytest.Item) -> tuple[str, int | None, str]:
    path, line, domain = item.location
    return str(path), line, str(domain)


#: Fixture scopes a move to another module tears down (a session's stays).
_MODULE_WIDE = frozenset({"module", "package"})


def _module_fixture_users(items: list[pytest.Item]) -> list[bool]:
    """Per item, whether it uses a fixture of module or package scope (its own
    or an autouse one; unknown: assumed so)."""
    out: list[bool] = []
    for item in items:
        wide = wide_fixtures(item)
        out.append(wide is None or any(scope in _MODULE_WIDE for _, scope, _ in wide))
    return out


def _scopes(items: list[pytest.Item], kind: type[pytest.Collector]) -> list[str | None]:
    """Per item, the node id of its closest ``kind`` collector (looked up once per parent)."""
    by_parent: dict[int, str | None] = {}
    out: list[str | None] = []
    for item in items:
        key = id(item.parent)
        if key not in by_parent:
            node = item.getparent(kind)
            by_parent[key] = None if node is None else node.nodeid
        out.append(by_parent[key])
    return out
