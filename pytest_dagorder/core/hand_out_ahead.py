"""Handing out ahead: WAITING tasks a worker may hold behind the tasks it runs now.

Part of the state machine (:mod:`.state_machine`), not a placement policy: it
reads the machine's own record of what runs where (``where``,
``running_on``) and picks tasks that have not become READY, which no
placement ever sees.  The machine then moves each pick straight to
RUNNING on that worker (see the hand-out ahead in the scheduler's
docstring).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import final

from .graph import Graph
from .module_runs import ModuleRuns
from .placement import Fences, Group, Rank
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
        groups: Sequence[Group] = (),
    ) -> None:
        self._graph = graph
        self._rank = rank
        self._state = state
        self._where = where
        self._running_on = running_on
        self._group_of = group_of
        self._constrained = constrained
        self._runs = runs
        self._groups = groups
        #: Set where some test is fenced (see ``placement.Fences``).
        self.fences: Fences | None = None

    def successor(self, worker: Worker) -> int | None:
        """The most urgent free WAITING task whose open prerequisites all run on ``worker``."""
        g, state, rank = self._graph, self._state, self._rank
        of, constrained = self._group_of, self._constrained
        runs, fences = self._runs, self.fences
        best: int | None = None
        for r in self._running_on[worker]:
            for d in (*g.dependents[r], *g.followers[r]):
                if (state[d] is not State.WAITING
                        or (of is not None and of[d] is not None)
                        or (constrained is not None and constrained(d))
                        or (fences is not None and not fences.open(d))
                        or (runs is not None and not runs.allowed(d, worker))
                        or (best is not None and rank[best] <= rank[d])):
                    continue
                if self._waits_only_on(d, worker):
                    best = d
        return best

    def group_tasks(self, worker: Worker, gid: int, limit: int,
                    hold: Callable[[int], None], *, same_module: bool = False) -> list[int]:
        """Up to ``limit`` tasks of group ``gid`` to hold behind what ``worker`` runs,
        in the group's serial order: from its first member not yet handed
        out, each passed to ``hold`` as it is found, up to the first that
        is READY (the placement's to hand out, in turn) or does not wait
        only on tasks running on ``worker``.  ``same_module``: only while
        they are of the module ``worker`` is in (a group of several modules)."""
        of, constrained, state = self._group_of, self._constrained, self._state
        assert of is not None  # a worker is bound to a group only where groups exist
        group = self._groups[gid]
        members = group.serial
        runs = self._runs
        here = runs.current(worker) if same_module and runs is not None else None
        out: list[int] = []
        waiting, ready = State.WAITING, State.READY
        # Past what was handed out already; kept, so that a long group held
        # batch after batch is walked once, not from its start every time.
        k = group.cursor
        while k < len(members) and state[members[k]] is not waiting and (
                state[members[k]] is not ready):
            k += 1
        group.cursor = k
        while k < len(members) and len(out) < limit:
            d = members[k]
            k += 1
            s = state[d]
            if s is not waiting:
                if s is ready:
                    break
                continue  # running or terminal: handed out already
            if ((constrained is not None and constrained(d))
                    or (here is not None and runs is not None and runs.module[d] != here)
                    or not self._waits_only_on(d, worker)):
                break
            hold(d)
            out.append(d)
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
