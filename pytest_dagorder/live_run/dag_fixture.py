"""The ``dag`` fixture: ``dag.publish(key, value)`` and ``dag.result(target)``.

Glue between a test and :mod:`~pytest_dagorder.core.published` (the checks and the
stores).  Each process that runs tests (a serial run, an xdist worker) has
one :class:`LocalResults`, owned by its driver: it opens a
:class:`~pytest_dagorder.core.published.Publication` per test attempt, keeps it
once the test passed (a worker also sends it to the controller then), and
answers reads from what it holds.  Under xdist the controller sends a
worker the values a test may read ahead of the test itself
(:mod:`~pytest_dagorder.drivers.distributed.controller`); :meth:`LocalResults.read`
waits, bounded, until that delivery is in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from ..core.published import (
    Publication,
    Published,
    ReadError,
    ResultError,
    ResultStore,
    UnpublishedKeyError,
    Values,
    ordered_before,
    requires_closure,
)
from ..declaring.declarations import Index
from ..options import wording
from ..options.settings import DRIVER_NAME
from .outcome_tracker import OutcomeTracker

if TYPE_CHECKING:
    from ..core.graph import Edges

#: Seconds a reader waits for the controller's delivery.  It is sent ahead of
#: the test on the same connection, so it is normally there already; the
#: bound only turns a lost message into an error instead of a hang.
DELIVERY_TIMEOUT = 60.0
FIXTURE = "dag"


class Planned(Protocol):
    """What the fixture reads of the run's plan (:class:`~pytest_dagorder.planning.plan.Plan`,
    made in a room after this one, which therefore is not imported here)."""

    @property
    def items(self) -> list[pytest.Item]: ...
    @property
    def deselected(self) -> list[pytest.Item]: ...
    @property
    def graph(self) -> Edges | None: ...
    @property
    def short_names(self) -> list[str]: ...


def uses_dag(item: pytest.Item) -> bool:
    """Whether ``item`` requests the fixture (itself or through another fixture)."""
    return FIXTURE in getattr(item, "fixturenames", ())


class LocalResults:
    """Published values in one test process (see module docstring).

    ``send``: where a passed test's values go besides this process (the
    worker's channel to the controller); ``remote``: reads wait for the
    controller's delivery.
    """

    def __init__(self, send: Callable[[str, Values], None] | None = None, *,
                 remote: bool = False) -> None:
        self.send = send
        self.remote = remote
        self.store = ResultStore()
        self._tracker = OutcomeTracker()
        self._open: dict[str, Publication] = {}
        self._plan: Planned | None = None
        self._index: Index | None = None
        self._pos: dict[int, int] = {}
        self._names: list[str] = []
        self._users: set[int] = set()

    def planned(self, plan: Planned, items: Sequence[pytest.Item]) -> None:
        self._plan = plan
        self._index = None
        self._users = {id(it) for it in items if uses_dag(it)}

    def _lookup(self) -> tuple[Index, list[str]]:
        """The index targets resolve in: the plan's tests, as the declarations saw them."""
        if self._index is None:
            plan = self._plan
            universe = [] if plan is None else [*plan.items, *plan.deselected]
            self._index = Index(universe)
            self._pos = {id(it): k for k, it in enumerate(universe)}
            self._names = [] if plan is None else plan.short_names
        return self._index, self._names

    def name(self, item: pytest.Item) -> str:
        _, names = self._lookup()
        k = self._pos.get(id(item))
        return item.nodeid if k is None else names[k]

    def open(self, item: pytest.Item) -> Publication:
        if id(item) not in self._users:
            raise ReadError(wording.result_not_requested(self.name(item)), self.name(item), "")
        # A rerun starts afresh: what the discarded attempt published is dropped.
        pub = self._open[item.nodeid] = Publication(self.name(item))
        return pub

    def on_report(self, report: pytest.TestReport) -> None:
        """Keep a test's publication if all of its phases passed, else drop it."""
        if not self._open or report.nodeid not in self._open:
            return  # the common case: no test of this process published
        word = self._tracker.feed(report)
        if word is None:
            return
        pub = self._open.pop(report.nodeid)
        if word != "passed" or not pub.values:
            return
        self.store.commit(report.nodeid, pub.values)
        if self.send is not None:
            self.send(report.nodeid, pub.values)

    def read(self, item: pytest.Item, target: object) -> Mapping[str, object]:
        index, names = self._lookup()
        reader = self.name(item)
        shown = target if isinstance(target, str) else getattr(
            target, "__qualname__", repr(target))
        hits = index.find(item, target)
        if not hits:
            raise ReadError(wording.result_unknown(reader, str(shown)), reader, str(shown))
        if len(hits) > 1:
            raise ReadError(wording.result_ambiguous(reader, str(shown), [names[k] for k in hits]),
                            reader, str(shown))
        t = hits[0]
        me = self._pos.get(id(item))
        plan = self._plan
        graph = None if plan is None else plan.graph
        if me is None or graph is None or t not in requires_closure(me, graph.requires):
            word = (wording.result_ordering_only if me is not None and graph is not None
                    and t in ordered_before(me, graph.requires, graph.after)
                    else wording.result_not_prerequisite)
            raise ReadError(word(reader, names[t]), reader, names[t])
        if self.remote and not self.store.wait_ready(item.nodeid, DELIVERY_TIMEOUT):
            raise ReadError(wording.result_timeout(reader, DELIVERY_TIMEOUT), reader,
                            names[t])
        return Results(self.store.get(index.items[t].nodeid), reader, names[t])

    def published_keys(self) -> dict[str, list[str]]:
        return self.store.keys_by_test()


class Results(Published):
    """:class:`Published` as a test holds it: a missing key's traceback ends at the
    test's line, not inside this package."""

    __slots__ = ()

    def __getitem__(self, key: str) -> object:
        __tracebackhide__ = True
        try:
            return super().__getitem__(key)
        except UnpublishedKeyError as exc:
            raise exc.with_traceback(None) from None


class Dag:
    """What the ``dag`` fixture gives a test."""

    __slots__ = ("_item", "_local", "_pub")

    def __init__(self, local: LocalResults, item: pytest.Item) -> None:
        self._local = local
        self._item = item
        self._pub = local.open(item)

    def publish(self, key: str, value: object) -> None:
        """Make ``value`` readable as ``dag.result(<this test>)[key]`` once this test passed.

        Checked now: the key is a non-empty str not published before by this
        test, the value is made of str, bytes, int, float, complex, bool,
        None and lists, tuples, dicts and sets of those, and it fits the size
        limits.  A copy is kept: changing the object later changes nothing.
        """
        __tracebackhide__ = True
        try:
            self._pub.publish(key, value)
        except ResultError as exc:
            raise exc.with_traceback(None) from None

    def result(self, target: object) -> Mapping[str, Any]:
        """What ``target`` published: a read-only mapping (a fresh copy each call).

        ``target`` is named as in ``@depends_on`` (a test name, ``Class::test``,
        a node id, the test function, ``test_x[param]``) and must be one test
        this test depends on, directly or through other prerequisites.
        """
        __tracebackhide__ = True
        try:
            return self._local.read(self._item, target)
        except ResultError as exc:
            raise exc.with_traceback(None) from None

    def __repr__(self) -> str:
        return f"<dag of {self._pub.test}: published {self._pub.keys()!r}>"


def local_results(config: pytest.Config) -> LocalResults | None:
    driver = config.pluginmanager.get_plugin(DRIVER_NAME)
    found = getattr(driver, "results", None)
    return found if isinstance(found, LocalResults) else None


def dag_of(request: pytest.FixtureRequest) -> Dag:
    """The ``dag`` fixture's value (the fixture is the plugin's, so that this
    module loads only in a run that uses it)."""
    __tracebackhide__ = True
    local = local_results(request.config)
    if local is None:
        raise ReadError(wording.result_no_driver(request.node.nodeid), request.node.nodeid, "")
    try:
        return Dag(local, request.node)
    except ResultError as exc:
        raise exc.with_traceback(None) from None


def write_published(terminalreporter: pytest.TerminalReporter,
                    keys: Mapping[str, Sequence[str]]) -> None:
    """With -v: which keys each test published, never the values."""
    if not keys or terminalreporter.config.get_verbosity() < 1:
        return
    terminalreporter.write_sep("=", wording.PUBLISHED_TITLE)
    for test, names in keys.items():
        terminalreporter.write_line(wording.published_line(test, names))
