"""Module runs: a worker keeps each module's tests together, as serial pytest does.

pytest tears a module's fixtures down when the next test is of another
module.  Serially every module's tests run in one stretch, so a fixture of
module scope is set up once; a worker handed a module's tests interleaved
with other modules' sets it up again each time the module comes back,
which no suite was written for (a connection bound to one event loop, a
counter, a server started per module).

:class:`ModuleRuns` follows what each worker runs and answers one
question for placement (:mod:`.placement`): may this worker start this
task now?  A worker *holds* its current module once it ran a test of it
that uses a fixture of module scope or wider (a *keeping* test); when it
starts a test of another module it *leaves* the module it held.  A keeping
test of a module a worker left is not started there again while the worker
has anything else to run, nor while another worker that has not left that
module is idle (that one takes it, with its own single setup).  Otherwise
the worker comes back rather than idle while the others are busy: the
return is counted in :attr:`ModuleRuns.returns` (the run's summary names
the modules).  Placement also prefers, for a worker holding a module, the
ready tests of that module (see ``ReadyQueues.next_for``), so a worker
leaves a module only when nothing of it is ready, and a module's test
becomes ready after that only when it waits on a test of another module.

:func:`forced_returns` names the modules the declarations themselves
force apart: a path of edges from a keeping test of the module through a
test of another module back to a keeping test of it.  No order keeps such
a module in one stretch, serially either.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import final

from .graph import Graph
from .states import Worker


@final
class ModuleRuns:
    """Which module each worker is in and which it left (see the module docstring)."""

    def __init__(self, modules: Sequence[Hashable | None], keeps: Sequence[bool],
                 busy: Callable[[Worker], bool]) -> None:
        """``busy(worker)``: whether ``worker`` runs or holds a task now."""
        if len(modules) != len(keeps):
            raise ValueError(f"{len(modules)} modules for {len(keeps)} tasks")
        numbers: dict[Hashable, int] = {}
        #: Per task, its module's number (-1: none, e.g. a deselected prerequisite).
        self.module: list[int] = [
            -1 if m is None else numbers.setdefault(m, len(numbers)) for m in modules]
        #: Per task, whether it uses a fixture of module scope or wider.
        self.keeps: list[bool] = [bool(k) and self.module[i] >= 0 for i, k in enumerate(keeps)]
        #: The modules as given, by number.
        self.names: list[Hashable] = list(numbers)
        #: Modules with an edge between two of their tests (see ``StateMachine``).
        self.chained: set[int] = set()
        self._busy = busy
        self._current: dict[Worker, int] = {}
        self._holding: dict[Worker, bool] = {}
        self._left: dict[Worker, set[int]] = {}
        # Per module: how many live workers left it (it is in their _left).
        self._left_by: dict[int, int] = {}
        #: Modules a worker came back to after leaving them, in the order it
        #: happened (a module may appear once per return).
        self.returns: list[int] = []

    def worker_added(self, worker: Worker) -> None:
        self._current[worker] = -1
        self._holding[worker] = False
        self._left[worker] = set()

    def worker_removed(self, worker: Worker) -> None:
        self._current.pop(worker, None)
        self._holding.pop(worker, None)
        for m in self._left.pop(worker, ()):
            self._left_by[m] -= 1

    def started(self, task: int, worker: Worker) -> None:
        """``task`` runs next on ``worker`` (after what it was handed before)."""
        m = self.module[task]
        keeps = self.keeps[task]
        if m != self._current[worker]:
            self._leave(worker)
            self._current[worker] = m
            self._holding[worker] = False
        if keeps and not self._holding[worker]:
            self._holding[worker] = True
            left = self._left[worker]
            if m in left:
                # Back to a module it left: its fixtures are set up again.
                left.discard(m)
                self._left_by[m] -= 1
                self.returns.append(m)

    def allowed(self, task: int, worker: Worker) -> bool:
        """Whether ``worker`` may start ``task`` without coming back to a
        module it left (or must: every live worker left that module)."""
        if not self.keeps[task]:
            return True
        m = self.module[task]
        if m not in self._left[worker]:
            return True
        return self._left_by[m] >= len(self._left)

    def allowed_idle(self, task: int, worker: Worker) -> bool:
        """Whether ``worker``, idle with nothing else to run, may start ``task``:
        also a return, unless a worker that has not left its module is idle too."""
        if self.allowed(task, worker):
            return True
        m = self.module[task]
        busy = self._busy
        return not busy(worker) and all(
            busy(w) for w, left in self._left.items() if w != worker and m not in left)

    def holding(self, worker: Worker) -> int:
        """The module whose fixtures ``worker`` holds now (-1: none)."""
        return self._current[worker] if self._holding.get(worker) else -1

    def current(self, worker: Worker) -> int:
        """The module of the last task started on ``worker`` (-1: none yet)."""
        return self._current.get(worker, -1)

    def _leave(self, worker: Worker) -> None:
        if self._holding[worker]:
            m = self._current[worker]
            left = self._left[worker]
            if m not in left:
                left.add(m)
                self._left_by[m] = self._left_by.get(m, 0) + 1


def forced_returns(graph: Graph, modules: Sequence[int], keeps: Sequence[bool]) -> list[int]:
    """Modules (their numbers in ``modules``) that no order keeps in one stretch.

    A module is forced apart when a path of edges (either kind) leads from a
    keeping test of it, through a test of another module, to a keeping test
    of it.  One pass in topological order with a bit set of modules per
    task: ``out[t]`` holds the modules M that some path from a keeping test
    of M reaches ``t`` on, after leaving M.
    """
    n = len(modules)
    # From a keeping test of t's module, a path stays inside that module up to t.
    inside = [False] * len(graph)
    out = [0] * len(graph)
    forced = 0
    for t in graph.topo:
        mt = modules[t] if t < n else -1
        kt = t < n and keeps[t]
        reach = 0
        stay = kt
        for p in (*graph.requires[t], *graph.after[t]):
            reach |= out[p]
            mp = modules[p] if p < n else -1
            if mp == mt and mt >= 0:
                stay = stay or inside[p]
            elif inside[p]:
                reach |= 1 << mp
        inside[t] = stay
        out[t] = reach
        if kt and reach >> mt & 1:
            forced |= 1 << mt
    return [m for m in range(forced.bit_length()) if forced >> m & 1]
