"""Handing out ahead: WAITING tasks a worker may hold behind the tasks it runs now.

Part of the state machine (:mod:`.state_machine`), not a placement policy: it
reads the machine's own record of what runs where (``where``,
``running_on``) and picks tasks that have not become READY, which no
placement ever sees.  The machine then moves each pick straight to
RUNNING on that worker (see the speculative hand-out in the scheduler's
docstring).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import final

from .graph import Graph
from .module_runs import ModuleRuns
from .placement import Group, Rank
from .states import TERMINAL, State, Worker


@final
class HandOutAhead:
    """Picks WAITING tasks a worker may hold behind the tasks it runs now.

    Only a task that could not start anywhere before the worker's running
    tasks end qualifies: every open prerequisite of it runs on that worker.
    Tasks that need a resource never qualify (a hold bypasses the limits).
    """

    def __init__(
        self,
        graph: Graph,
        rank: Sequence[Rank],
        state: Sequence[State],
        where: Mapping[int, Worker],
        running_on: Mapping[Worker, set[int]],
        group_of: Sequence[Group | None] | None,
        constrained: Callable[[int], bool] | None,
        runs: ModuleRuns | None = None,
    ) -> None:
        self._graph = graph
        self._rank = rank
        self._state = state
        self._where = where
        self._running_on = running_on
        self._group_of = group_of
        self._constrained = constrained
        self._runs = runs
        self._spans: set[int] | None = None

    def successor(self, worker: Worker) -> int | None:
        """The most urgent free WAITING task whose open prerequisites all run on ``worker``."""
        g, state, rank = self._graph, self._state, self._rank
        of, constrained = self._group_of, self._constrained
        runs = self._runs
        best: int | None = None
        for r in self._running_on[worker]:
            for d in (*g.dependents[r], *g.followers[r]):
                if (state[d] is not State.WAITING
                        or (of is not None and of[d] is not None)
                        or (constrained is not None and constrained(d))
                        or (runs is not None and not runs.allowed(d, worker))
                        or (best is not None and rank[best] <= rank[d])):
                    continue
                if self._waits_only_on(d, worker):
                    best = d
        return best

    def group_tasks(self, worker: Worker, gid: int, limit: int,
                    hold: Callable[[int], None], *, same_module: bool = False) -> list[int]:
        """Up to ``limit`` tasks of group ``gid`` whose open prerequisites all run on
        ``worker``, most urgent first, each passed to ``hold`` as it is found (a
        held task's own dependents then qualify in turn).  ``same_module``: only
        tasks of the module ``worker`` is in (a group of several modules)."""
        g, state, rank = self._graph, self._state, self._rank
        of, constrained = self._group_of, self._constrained
        assert of is not None  # a worker is bound to a group only where groups exist
        if self._runs is not None and self._runs_across(gid):
            return self._by_module(worker, gid, limit, hold, same_module)
        # Only a running task with a WAITING successor can lead anywhere, and
        # holding tasks never makes another WAITING: the others are dropped
        # before sorting (a worker may run a batch of a thousand, nearly all
        # of them with their successors held already, and this runs per batch).
        waiting = State.WAITING
        seeds: list[int] = []
        for r in self._running_on[worker]:
            for d in g.dependents[r]:
                if state[d] is waiting:
                    seeds.append(r)
                    break
            else:
                for d in g.followers[r]:
                    if state[d] is waiting:
                        seeds.append(r)
                        break
        frontier = sorted(seeds, key=rank.__getitem__)
        out: list[int] = []
        k = 0
        while k < len(frontier) and len(out) < limit:
            r = frontier[k]
            k += 1
            for d in sorted((*g.dependents[r], *g.followers[r]), key=rank.__getitem__):
                group = of[d]
                if (len(out) >= limit or state[d] is not State.WAITING
                        or group is None or group.gid != gid
                        or (constrained is not None and constrained(d))
                        or not self._waits_only_on(d, worker)):
                    continue
                hold(d)
                out.append(d)
                frontier.append(d)
        return out

    def waits_here(self, worker: Worker, module: int) -> bool:
        """Whether a WAITING task of ``module`` waits only on tasks running on
        ``worker`` (it will become ready there: the worker should not leave
        the module before)."""
        runs = self._runs
        assert runs is not None
        g, state, of = self._graph, self._state, runs.module
        for r in self._running_on[worker]:
            for d in (*g.dependents[r], *g.followers[r]):
                if (of[d] == module and state[d] is State.WAITING
                        and self._waits_only_on(d, worker)):
                    return True
        return False

    def _runs_across(self, gid: int) -> bool:
        """Whether group ``gid`` spans modules (found once per run)."""
        if self._spans is None:
            of = self._group_of
            assert of is not None
            self._spans = {group.gid for group in of if group is not None and group.spans}
        return gid in self._spans

    def _by_module(self, worker: Worker, gid: int, limit: int,
                   hold: Callable[[int], None], same_module: bool) -> list[int]:
        """:meth:`group_tasks` for a group of several modules: module by module,
        the worker's current module first while any of it qualifies."""
        g, state, rank = self._graph, self._state, self._rank
        of, constrained, runs = self._group_of, self._constrained, self._runs
        assert of is not None and runs is not None
        waiting = State.WAITING

        def qualifies(d: int) -> bool:
            group = of[d]
            return (state[d] is waiting and group is not None and group.gid == gid
                    and not (constrained is not None and constrained(d))
                    and self._waits_only_on(d, worker))

        found = {d for r in self._running_on[worker]
                 for d in (*g.dependents[r], *g.followers[r]) if qualifies(d)}
        out: list[int] = []
        here = runs.current(worker)
        if same_module:
            found = {d for d in found if runs.module[d] == here}
        while found and len(out) < limit:
            here = runs.current(worker)
            d = min(found, key=lambda t: (runs.module[t] != here, rank[t]))
            if same_module and runs.module[d] != here:
                break
            found.discard(d)
            if not qualifies(d):
                continue
            hold(d)
            out.append(d)
            found.update(e for e in (*g.dependents[d], *g.followers[d]) if qualifies(e))
        return out

    def _waits_only_on(self, d: int, worker: Worker) -> bool:
        """Whether every open prerequisite of ``d`` is running on ``worker``.

        Requires-pass prerequisites must have passed or be running there;
        ordering-only ones must have ended or be running there.
        """
        state, where = self._state, self._where
        # Plain loops: this runs for every task a batch holds ahead.
        for p in self._graph.requires[d]:
            s = state[p]
            if s is not State.PASSED and (s is not State.RUNNING or where.get(p) != worker):
                return False
        for p in self._graph.after[d]:
            s = state[p]
            if s not in TERMINAL and (s is not State.RUNNING or where.get(p) != worker):
                return False
        return True
