"""The worker's barrier item and the gate that hides it from every hook.

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
must order, limit or withhold (see :func:`~.payload.declares_nothing`) needs no
barrier: every test is ready from the start, so the controller always
sends a worker its next test ahead, as xdist's own load scheduling does.
Every worker decides that after its collection (all collect the same) and
then leaves xdist's worker as it is.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection
from typing import Any

import pytest

from ...shims.pytest_internals import (
    as_in_teardown,
    index_past_end,
    replace_hook_caller,
    report_phase,
    teardown_towards,
    teardown_view,
)

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
    ``pass_on_exit`` is given a test's ``pytest.exit()``; False: it is re-raised.
    """

    def __init__(self, inner: Any, host: BarrierHost,
                 pass_on_exit: Callable[[BaseException], bool]) -> None:
        self._inner = inner
        self._host = host
        self._pass_on_exit = pass_on_exit

    def __call__(self, **kwargs: Any) -> object:
        item = kwargs["item"]
        try:
            if isinstance(item, Barrier):
                return self._host.run_barrier(item, kwargs.get("nextitem"))
            if isinstance(kwargs.get("nextitem"), Barrier):
                # Hooks must not see the barrier even as `nextitem`: a real test
                # that shares the deepest possible scope with this one tears down
                # exactly as much (only this test's own scopes, and those the
                # controller said no later test shares), and the barrier does
                # the rest once the real successor is known.
                host = self._host
                kwargs["nextitem"] = host.stand_in(item, host.closing.pop(item.nodeid, ()))
                host.last_view = teardown_view(item)
                host.ends_dispatch = item
            try:
                return self._inner(**kwargs)
            finally:
                self._host.last_real = item
        except pytest.exit.Exception as exc:
            if not self._pass_on_exit(exc):
                raise
            return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class BarrierHost:
    """What a worker keeps for its barrier: the scopes below each collector,
    the last real test run, the scopes the controller said may end."""

    def __init__(self) -> None:
        self.last_real: pytest.Item | None = None
        #: The last real test followed by a barrier, as its teardown saw it.
        self.last_view: dict[str, object] = {}
        self._below: dict[int, list[tuple[int, pytest.Item]]] = {}
        #: By node id: the scopes the test's own teardown may end (wire.closing).
        self.closing: dict[str, list[str]] = {}
        #: The last real test followed by a barrier: possibly the worker's last
        #: (see DagWorker.pytest_runtest_teardown).
        self.ends_dispatch: pytest.Item | None = None

    def install(self, config: pytest.Config, session: pytest.Session,
                items: list[pytest.Item], pass_on_exit: Callable[[BaseException], bool]) -> None:
        """The gate on ``config``'s protocol hook and the barrier past ``items``,
        the items this worker runs from (after xdist sent their ids)."""
        replace_hook_caller(config, "pytest_runtest_protocol",
                            lambda caller: _ProtocolGate(caller, self, pass_on_exit))
        self._index_scopes(items)
        # After xdist sent the ids: the barrier's index is past every real test.
        index_past_end(session, Barrier.from_parent(session, name=BARRIER_NAME))

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
