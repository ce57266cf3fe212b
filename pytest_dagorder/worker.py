"""xdist worker side: ship the graph to the controller, host the barrier items.

Why barriers.  An xdist worker runs the test it holds only once it has
received the *next* index (pytest needs ``nextitem`` to know which fixtures
to tear down).  A controller that sends a test only when it is ready would
deadlock on a chain a -> b: a waits for a successor, b waits for a's outcome.
So every dispatch ends with a hidden no-op *barrier* item whose parent is
the module or class of the last real test sent: the real test runs at once
(its teardown keeps the module/class fixtures alive, as the barrier sits in
the same scope), and the barrier, when its own successor arrives, tears down
exactly what pytest would have torn down between the two real tests.

Why a gate on the protocol hook.  Barriers must be invisible: no
``pytest_runtest_*`` hook, no wrapper of another plugin, no report.  xdist
starts every item with ``config.hook.pytest_runtest_protocol(...)``; the gate
replaces that one hook caller on this worker's hook relay and answers for
barriers itself, passing every real test through untouched.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from .declarations import Problem
from .planning import Plan
from .plugin import collect_plan
from .run import report_problems

CHANNEL_KEY = "dagorder_channel"
DIST_KEY = "dagorder_dist"
BARRIER_NAME = "<dagorder-barrier>"


class Barrier(pytest.Item):
    """A hidden no-op item; never passed to any hook (see module docstring)."""

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
        if isinstance(item, Barrier):
            return self._worker.run_barrier(item, kwargs.get("nextitem"))
        try:
            return self._inner(**kwargs)
        finally:
            self._worker.last_real = item

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class DagWorker:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.channel: Any = config.workerinput.get(CHANNEL_KEY)  # type: ignore[attr-defined]
        self.plan: Plan | None = None
        self.last_real: pytest.Item | None = None
        relay = config.pluginmanager.hook
        # The one pluggy detail we depend on: HookRelay holds hook callers as
        # plain attributes, which is how xdist's worker loop looks them up.
        hook_name = "pytest_runtest_protocol"
        setattr(relay, hook_name, _ProtocolGate(getattr(relay, hook_name), self))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> Generator[None, object, object]:
        collected = list(items)
        result = yield
        plan = self.plan = collect_plan(config, items, collected)
        # Workers do not see the controller's --dist; it comes in workerinput.
        dist = config.workerinput.get(DIST_KEY, "load")  # type: ignore[attr-defined]
        if plan.declared and dist != "load":
            # The controller runs xdist's own scheduler for this mode, which
            # cannot honour the graph: refuse on every worker alike (xdist
            # shows identical collection errors once) and run nothing.
            first = next((p.nodeid for p in plan.problems), items[0].nodeid if items else "")
            report_problems(config, [Problem(first, (
                f"--dist {dist} cannot honour depends_on/run_after declarations; "
                "drop --dist (or use --dist load) to schedule the dependency graph, "
                "or run with -p no:dagorder for plain xdist"))])
            items[:] = []
            self.plan = None
        return result

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> Generator[None, None, None]:
        # Runs before xdist's own hook sends "collectionfinish" on the same
        # connection, so the controller has the graph when it needs it.
        items = list(session.items)
        parents = _barrier_parents(items)
        if self.channel is not None:
            self.channel.send(self._payload(items, parents))
        result = yield
        # After xdist sent the ids: barriers get indices past every real test.
        barrier_of: dict[int, Barrier] = {}
        for parent in dict.fromkeys(parents.values(), None):
            barrier_of[id(parent)] = Barrier.from_parent(parent, name=BARRIER_NAME)
        session.items.extend(barrier_of.values())
        return result

    def _payload(
        self, items: list[pytest.Item], parents: dict[int, pytest.Collector]
    ) -> dict[str, Any]:
        plan = self.plan
        order = list(dict.fromkeys(id(p) for p in parents.values()))
        slot = {pid: len(items) + k for k, pid in enumerate(order)}
        payload: dict[str, Any] = {
            "ids": [it.nodeid for it in items],
            "barrier": [slot[id(parents[id(it)])] for it in items],
            "locations": [list(_location(it)) for it in items],
            "module": [_scope(it, pytest.Module) for it in items],
            "class": [_scope(it, pytest.Class) for it in items],
            "xdist_group": [_xdist_group(it) for it in items],
            "graph": None,
            "problems": [],
        }
        if plan is None:
            return payload
        payload["problems"] = [[p.nodeid, p.message] for p in plan.problems]
        if plan.graph is not None and not plan.problems:
            g = plan.graph
            payload["graph"] = {
                "ids": [str(x) for x in g.ids],
                "requires": [list(r) for r in g.requires],
                "after": [list(a) for a in g.after],
            }
        return payload

    def run_barrier(self, barrier: Barrier, nextitem: pytest.Item | None) -> bool:
        """Tear down what the next item does not share, as pytest would have."""
        setupstate = barrier.session._setupstate  # pytest's fixture stack; no public API
        call = pytest.CallInfo.from_call(
            lambda: setupstate.teardown_exact(nextitem),
            when="teardown",
            reraise=(pytest.exit.Exception, KeyboardInterrupt),
        )
        last = self.last_real
        if call.excinfo is not None and last is not None:
            # pytest reports a failing module/class fixture teardown on the last
            # test that used it; xdist checks that a report's node id matches
            # the item being run, so the barrier takes that test's id.
            _take_nodeid(barrier, last)
            report = last.ihook.pytest_runtest_makereport(item=last, call=call)
            last.ihook.pytest_runtest_logreport(report=report)
        return True


def _take_nodeid(barrier: Barrier, item: pytest.Item) -> None:
    """Give the barrier ``item``'s node id (pytest keeps it in ``_id`` since 9.2)."""
    attr = "_id" if hasattr(item, "_id") else "_nodeid"
    setattr(barrier, attr, getattr(item, attr))


def _barrier_parents(items: list[pytest.Item]) -> dict[int, pytest.Collector]:
    """For each item (by id), the node its barrier hangs under: its class or module."""
    out: dict[int, pytest.Collector] = {}
    for it in items:
        parent = it.getparent(pytest.Class) or it.getparent(pytest.Module) or it.parent
        if not isinstance(parent, pytest.Collector):  # pragma: no cover - items have parents
            raise TypeError(f"{it.nodeid} has no collector parent")
        out[id(it)] = parent
    return out


def _location(item: pytest.Item) -> tuple[str, int | None, str]:
    path, line, domain = item.location
    return str(path), line, str(domain)


def _scope(item: pytest.Item, kind: type[pytest.Collector]) -> str | None:
    node = item.getparent(kind)
    return None if node is None else node.nodeid


def _xdist_group(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
