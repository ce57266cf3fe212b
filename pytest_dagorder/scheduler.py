"""The scheduler core: a synchronous state machine over a validated :class:`Graph`.

Pure: no pytest, no threads, no clocks.  A driver (the serial plugin, the
xdist controller, the thread-pool executor) feeds it events - a worker came or
went, tasks were taken by a worker, a task finished with an outcome, a stop
was requested - and reads its decisions: which tasks a worker should run
next (:meth:`Scheduler.take`) and which tasks became skipped, with why
(:meth:`Scheduler.pop_skipped`).

Invariants
----------

*Dispatch exactly once.*  Every task holds a counter of prerequisites that
have not yet released it.  The counter reaching zero is the one and only
claim that moves a task from WAITING to READY; completions are accepted only
for tasks that are not yet terminal, so a duplicate or stale event can
neither decrement twice nor drive a counter below zero.  A task leaves READY
only through :meth:`take` / :meth:`claim` (to RUNNING) or by being skipped;
queue entries are checked against the state when popped, so an entry left
behind in some queue is dropped, never run.  A task put back by
:meth:`remove_worker` returns to READY and is queued afresh.

The one exception is the speculative hand-out (``take(..., speculate=True)``
and :meth:`~Scheduler.ahead`): a WAITING task of a bound group, or a free
one, whose every open prerequisite is RUNNING on one worker goes straight
to RUNNING there.  It is still handed out
once (only a WAITING task qualifies, and it leaves WAITING), its counter
still counts down as the prerequisites pass (its release then finds it
RUNNING and does nothing), and if one of them fails it is skipped like any
dependent, marked ``remote`` because the worker holding it reports it.
Put back by :meth:`remove_worker`, it returns to WAITING.

*Terminal exactly once.*  PASSED, FAILED (any non-pass outcome) and SKIPPED
are terminal and never left.  Reaching a terminal state releases the task's
out-edges exactly once: a failure skips its requires-pass dependents (policy
``skip``), and every terminal state - skipped included - counts down the
ordering-only edges, so nothing downstream of a skip waits forever.

*The run is over* exactly when every task is terminal (:attr:`done`).  If
nothing is running and nothing is ready while tasks remain, the graph could
not progress; that cannot happen for a validated DAG, and :meth:`validate`
checks it.

Placement
---------

A task released by a completion on worker W joins W's local queue (its
fixtures are warm there); W pops its newest entry first (depth-first along a
chain) unless the global heap holds a task with a strictly longer remaining
path.  Tasks with no such origin (the roots) wait in a global heap ordered
by (longest remaining critical path first, then index).  A worker with an
empty local queue takes from the heap, else steals the oldest entry of the
longest local queue (ties: the worker added first).  With ``locality=False``
every task goes to the heap: pure priority order, which is what makespan
wants when tasks share no process state.  A task whose resource is
at its limit is parked until a holder finishes, so it never idles a worker
while other work is ready.

Affinity groups (optional) bind a set of tasks to one worker: the group is
startable once every prerequisite it has outside itself is terminal; the
worker that takes it runs only the group's tasks until all are terminal.
Groups whose outside prerequisites would form a cycle between groups are
dissolved into free tasks (the only way such a group could ever start).

A worker may also be handed, ahead of time, a task that could not start
anywhere before the worker's running tasks end (:meth:`Scheduler.ahead`):
its bound group's next tasks, or the most urgent free task that waits only
on tasks running there, while no ready task is waiting for a worker.  The
remaining path of a task is its own duration plus the longest path after it,
in the durations the graph carries (equal when none are known).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Final, Literal, final

from .errors import name_of
from .graph import Graph, strongly_connected

#: Outcomes a driver may report.  Only "passed" lets requires-pass dependents run.
Outcome = Literal[
    "passed", "failed", "error", "skipped", "xfailed", "crashed", "deselected", "not run"
]
OUTCOMES: Final = frozenset(
    ("passed", "failed", "error", "skipped", "xfailed", "crashed", "deselected", "not run")
)

FailurePolicy = Literal["skip", "stop", "run"]

# How a root cause's outcome reads inside a skip reason.
_PHRASES: Final[Mapping[str, str]] = {
    "failed": "failed",
    "error": "had an error",
    "skipped": "was skipped",
    "xfailed": "xfailed",
    "crashed": "crashed its worker",
    "deselected": "was deselected",
    "not run": "did not run",
}

Worker = Hashable


class State(Enum):
    WAITING = "waiting"
    READY = "ready"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"

    # Members are singletons compared by identity: hash them the same way, in C
    # (Enum's own __hash__ is Python code, and the hot paths test membership).
    __hash__ = object.__hash__

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL: Final = frozenset((State.PASSED, State.FAILED, State.SKIPPED))


@dataclass(frozen=True, slots=True)
class Skip:
    """A decision: ``task`` will not run.

    ``prerequisite`` is the direct prerequisite that did not pass and ``root``
    the task whose own outcome (``root_outcome``) started it; both are None
    for a stop or a cancellation.  ``remote``: the task had been handed out
    speculatively, so the worker holding it skips it itself (with this same
    reason, see :func:`blocked_skip`); the driver must not report it twice.
    """

    task: int
    reason: str
    prerequisite: int | None
    root: int | None
    root_outcome: str | None
    remote: bool = False


def blocked_skip(
    task: int,
    prereq: int,
    prereq_outcome: str | None,
    upstream: Skip | None,
    name: Callable[[int], str],
) -> Skip:
    """Why ``task`` is skipped because ``prereq`` did not pass.

    ``upstream`` is the skip decision of ``prereq`` itself, if it was
    skipped rather than run.  A pure function, shared by the core and by a
    worker that gates speculatively sent tasks, so both word it alike.
    """
    p = name(prereq)
    if upstream is not None:
        if upstream.root is None:
            return Skip(task, f"prerequisite {p} was skipped: {upstream.reason}", prereq,
                        None, None)
        root, outcome = upstream.root, upstream.root_outcome
        assert outcome is not None
        reason = f"prerequisite {p} was skipped: {name(root)} {_PHRASES[outcome]}"
        return Skip(task, reason, prereq, root, outcome)
    outcome = prereq_outcome or "not run"
    return Skip(task, f"prerequisite {p} {_PHRASES[outcome]}", prereq, prereq, outcome)


@final
class Scheduler:
    def __init__(
        self,
        graph: Graph,
        *,
        on_failure: FailurePolicy = "skip",
        resources: Sequence[Sequence[str]] | None = None,
        limits: Mapping[str, int] | None = None,
        groups: Sequence[Hashable | None] | None = None,
        priority: Sequence[float] | None = None,
        name: Callable[[int], str] | None = None,
        locality: bool = True,
    ) -> None:
        if on_failure not in ("skip", "stop", "run"):
            raise ValueError(f"on_failure must be 'skip', 'stop' or 'run', not {on_failure!r}")
        n = len(graph)
        self.graph: Final = graph
        self.on_failure: Final = on_failure
        self._name = name or (lambda i: name_of(graph.ids[i]))
        # Without locality every released task joins the global heap: pure
        # priority order, the shortest makespan when tasks share no state.
        self._locality = locality
        crit = graph.critical_path() if priority is None else priority
        # Heap keys: longest remaining path first, then collection order.
        self._key: list[tuple[float, int]] = [(-crit[i], i) for i in range(n)]
        self.state: list[State] = [State.WAITING] * n
        self.outcome: list[str | None] = [None] * n
        self.skips: dict[int, Skip] = {}
        self.where: dict[int, Worker] = {}  # running task -> worker
        self._pending = [len(graph.requires[i]) + len(graph.after[i]) for i in range(n)]
        self._terminal_count = 0
        self._spec: set[int] = set()  # handed out speculatively (see take())
        self._ready_count = 0
        self._new_skips: list[Skip] = []
        self._stopped: str | None = None
        # Workers, in the order they were added (the tie-break among them).
        self._workers: dict[Worker, int] = {}
        self._local: dict[Worker, deque[int]] = {}
        self._running_on: dict[Worker, set[int]] = {}
        # Flat entries (-critical path, index, kind, id): flat tuples compare
        # faster than nested ones, and this heap is the hot path.
        self._heap: list[tuple[float, int, int, int]] = []
        # Resources.
        self._res: list[tuple[str, ...]] = (
            [tuple(dict.fromkeys(r)) for r in resources] if resources else [()] * n
        )
        self._limits = dict(limits or {})
        for r, k in self._limits.items():
            if k < 1:
                raise ValueError(f"limit for resource {r!r} must be at least 1, not {k}")
        self._in_use: dict[str, int] = {}
        self._parked: dict[str, list[int]] = {}
        # Groups.
        self._group_of: list[int] = [-1] * n
        self._members: list[list[int]] = []
        self._outside_left: list[int] = []
        self._outside_of: dict[int, list[int]] = {}
        self._group_ready: list[list[tuple[tuple[float, int], int]]] = []
        self._group_left: list[int] = []
        self._bound: dict[Worker, int] = {}
        # What a worker was already running when it took its group (for validate():
        # those may end alongside the group; nothing else may start there).
        self._bound_over: dict[Worker, frozenset[int]] = {}
        self._bound_to: dict[int, Worker] = {}
        self._group_queued: list[bool] = []
        if groups is not None:
            self._init_groups(groups)
        for i in range(n):
            if not self._pending[i]:
                self._make_ready(i, None)

    # ------------------------------------------------------------------ groups

    def _init_groups(self, groups: Sequence[Hashable | None]) -> None:
        g = self.graph
        n = len(g)
        if len(groups) != n:
            raise ValueError(f"groups has {len(groups)} entries for {n} tasks")
        labels: dict[Hashable, int] = {}
        of = [-1] * n
        for i, label in enumerate(groups):
            if label is not None:
                of[i] = labels.setdefault(label, len(labels))
        of = _dissolve_group_cycles(g, of, len(labels))
        members: dict[int, list[int]] = {}
        for i in range(n):
            if of[i] >= 0:
                members.setdefault(of[i], []).append(i)
        # Renumber the surviving groups densely, in order of their first task.
        for new, old in enumerate(sorted(members, key=lambda k: members[k][0])):
            tasks = members[old]
            self._members.append(tasks)
            for i in tasks:
                self._group_of[i] = new
        for gid, tasks in enumerate(self._members):
            inside = set(tasks)
            outside = sorted(
                {p for i in tasks for p in (*g.requires[i], *g.after[i]) if p not in inside}
            )
            self._outside_left.append(len(outside))
            for p in outside:
                self._outside_of.setdefault(p, []).append(gid)
            self._group_ready.append([])
            self._group_left.append(len(tasks))
            self._group_queued.append(False)

    @property
    def groups(self) -> list[list[int]]:
        """The affinity groups in force (after any dissolution), as task lists."""
        return [list(m) for m in self._members]

    def group_of(self, task: int) -> int | None:
        gid = self._group_of[task]
        return None if gid < 0 else gid

    # ------------------------------------------------------------------ events

    def add_worker(self, worker: Worker) -> None:
        if worker in self._workers:
            raise ValueError(f"worker {worker!r} was already added")
        self._workers[worker] = len(self._workers)
        self._local[worker] = deque()
        self._running_on[worker] = set()

    def remove_worker(self, worker: Worker) -> list[int]:
        """Forget a worker; tasks still running there go back to READY.

        A driver that knows one of them crashed the worker reports it with
        :meth:`finished` (outcome "crashed") before calling this.  Returns the
        tasks that were put back, in index order.
        """
        if worker not in self._workers:
            raise KeyError(worker)
        del self._workers[worker]
        back = sorted(self._running_on.pop(worker))
        for i in back:
            del self.where[i]
            self._release_resources(i)
            self._spec.discard(i)
            if self._pending[i]:
                # Handed out speculatively, its prerequisites still open.
                self.state[i] = State.WAITING
                continue
            self.state[i] = State.READY
            self._ready_count += 1
            self._enqueue(i, None)
        for i in self._local.pop(worker):
            if self.state[i] is State.READY:
                self._enqueue(i, None)
        gid = self._bound.pop(worker, None)
        self._bound_over.pop(worker, None)
        if gid is not None:
            del self._bound_to[gid]
            self._queue_group(gid)
        if self._stopped is not None:
            # take() admits nothing after a stop: a task put back would never run.
            self.stop(self._stopped)
        return back

    def claim(self, task: int, worker: Worker) -> None:
        """Start a specific READY task on ``worker`` (a driver that fixes the order)."""
        if self.state[task] is not State.READY:
            raise ValueError(
                f"task {self._name(task)} is {self.state[task].value}, not ready; "
                "only a ready task can be started"
            )
        gid = self._group_of[task]
        if gid >= 0:
            self._bind(gid, worker)
        self._start(task, worker)

    def take(self, worker: Worker, limit: int = 1, *, speculate: bool = False) -> list[int]:
        """Up to ``limit`` READY tasks for ``worker``, now RUNNING there.

        With ``speculate`` (policy ``skip`` only), a worker bound to a group
        also gets group tasks whose only open prerequisites are running on
        that same worker: it runs them in the order given, so it knows those
        outcomes first and must skip such a task itself when one did not
        pass (see :class:`Skip`.remote).  This saves a round trip per test
        along a chain.
        """
        if speculate and self.on_failure != "skip":
            raise ValueError("speculative hand-out needs on_failure='skip'")
        out: list[int] = []
        while len(out) < limit and self._stopped is None:
            i = self._next_for(worker)
            if i is None:
                break
            self._start(i, worker)
            out.append(i)
        if speculate and len(out) < limit and self._stopped is None:
            gid = self._bound.get(worker)
            if gid is not None:
                out += self._speculate(worker, gid, limit - len(out))
        return out

    def ahead(self, worker: Worker, limit: int = 1) -> list[int]:
        """Up to ``limit`` tasks for ``worker`` to hold behind what it runs now.

        Only tasks that could not start anywhere before the worker's running
        tasks end (policy ``skip`` only): a bound worker's own group tasks
        (:meth:`take` with ``speculate``), else the free task that waits only
        on tasks running there, and only while no task is ready (a task held
        behind a running one must not go before one that was ready first;
        measured: holding whenever the held task was at least as urgent as
        every ready one made random DAGs 0.5 % slower).  The worker starts it
        the moment its prerequisite ends, without a round trip, and skips it
        itself if that prerequisite did not pass (see :class:`Skip`.remote).
        """
        if self.on_failure != "skip":
            raise ValueError("tasks handed out ahead need on_failure='skip'")
        if worker not in self._workers:
            raise KeyError(worker)
        if self._bound.get(worker) is not None:
            return self.take(worker, limit, speculate=True)
        out: list[int] = []
        if self._stopped is not None or self._any_ready(worker):
            return out
        while len(out) < limit:
            d = self._best_successor(worker)
            if d is None:
                break
            self._hold(d, worker)
            out.append(d)
        return out

    def _best_successor(self, worker: Worker) -> int | None:
        """The most urgent free WAITING task whose open prerequisites all run on ``worker``."""
        g, state = self.graph, self.state
        best: int | None = None
        for r in self._running_on[worker]:
            for d in (*g.dependents[r], *g.followers[r]):
                if (state[d] is not State.WAITING or self._group_of[d] >= 0 or self._res[d]
                        or (best is not None and self._key[best] <= self._key[d])):
                    continue
                if self._waits_only_on(d, worker):
                    best = d
        return best

    def _waits_only_on(self, d: int, worker: Worker) -> bool:
        """Whether every open prerequisite of ``d`` is running on ``worker``.

        Requires-pass prerequisites must have passed or be running there;
        ordering-only ones must have ended or be running there.
        """
        state, where = self.state, self.where
        return all(
            state[p] is State.PASSED or (state[p] is State.RUNNING and where.get(p) == worker)
            for p in self.graph.requires[d]
        ) and all(
            state[p].terminal or (state[p] is State.RUNNING and where.get(p) == worker)
            for p in self.graph.after[d]
        )

    def _any_ready(self, worker: Worker) -> bool:
        """Whether :meth:`take` would give ``worker`` a task now (resources aside)."""
        if self._drop_ended(worker) or self._heap:
            return True
        # Only other workers' local queues hold ready tasks: take() would steal one.
        return any(self.state[i] is State.READY for q in self._local.values() for i in q)

    def _hold(self, d: int, worker: Worker) -> None:
        """Hand WAITING task ``d`` to ``worker`` ahead of its prerequisites' end."""
        self.state[d] = State.RUNNING
        self.where[d] = worker
        self._running_on[worker].add(d)
        self._spec.add(d)

    def _speculate(self, worker: Worker, gid: int, limit: int) -> list[int]:
        """Group tasks whose open prerequisites all run on ``worker`` (see :meth:`take`)."""
        g, state = self.graph, self.state
        frontier = sorted(self._running_on[worker], key=self._key.__getitem__)
        out: list[int] = []
        k = 0
        while k < len(frontier) and len(out) < limit:
            r = frontier[k]
            k += 1
            for d in sorted((*g.dependents[r], *g.followers[r]), key=self._key.__getitem__):
                if (len(out) >= limit or state[d] is not State.WAITING
                        or self._group_of[d] != gid or self._res[d]
                        or not self._waits_only_on(d, worker)):
                    continue
                self._hold(d, worker)
                out.append(d)
                frontier.append(d)
        return out

    def finished(self, task: int, outcome: str) -> bool:
        """Record a task's outcome.  Returns False (and changes nothing) if it was terminal.

        Any non-terminal task may be finished, not only a running one: a
        driver reports tasks that will never run this way ("deselected").
        """
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}; expected one of {sorted(OUTCOMES)}")
        if self.state[task] in _TERMINAL:
            return False
        worker = self.where.pop(task, None)
        if worker is not None:
            self._running_on[worker].discard(task)
            self._release_resources(task)
        self.outcome[task] = outcome
        self._set_terminal(task, State.PASSED if outcome == "passed" else State.FAILED, worker)
        if outcome != "passed" and self.on_failure == "stop":
            self.stop(f"run stopped after {self._name(task)} {_PHRASES[outcome]}")
        return True

    def stop(self, reason: str = "run stopped") -> list[int]:
        """Admit nothing new: every task not yet started is skipped with ``reason``.

        Running tasks are left to finish.  Returns the tasks skipped now.
        """
        if self._stopped is None:
            self._stopped = reason
        first = len(self._new_skips)
        for i in range(len(self.state)):
            if self.state[i] in (State.WAITING, State.READY):
                self._skip(i, Skip(i, reason, None, None, None), None)
        # Dependents skipped along the way count too.
        return [skip.task for skip in self._new_skips[first:]]

    def pop_skipped(self) -> list[Skip]:
        """Skip decisions made since the last call, in the order they were made."""
        out, self._new_skips = self._new_skips, []
        return out

    # ------------------------------------------------------------------ queries

    @property
    def done(self) -> bool:
        return self._terminal_count == len(self.state)

    @property
    def stopped(self) -> str | None:
        return self._stopped

    @property
    def ready_count(self) -> int:
        """Tasks in READY (including those of groups not yet startable)."""
        return self._ready_count

    @property
    def running(self) -> int:
        return len(self.where)

    def running_on(self, worker: Worker) -> list[int]:
        return sorted(self._running_on.get(worker, ()))

    def has_ready(self) -> bool:
        """Whether some task could be handed out now (ignoring resource limits)."""
        if any(self.state[i] is State.READY for q in self._local.values() for i in q):
            return True
        if any(self._heap_entry_live(e) for e in self._heap):
            return True
        return any(self._group_ready[g] for g in self._bound_to)

    def bound_group(self, worker: Worker) -> int | None:
        return self._bound.get(worker)

    def reason(self, task: int) -> str | None:
        skip = self.skips.get(task)
        return None if skip is None else skip.reason

    # ------------------------------------------------------------------ internals

    def _make_ready(self, i: int, origin: Worker | None) -> None:
        self.state[i] = State.READY
        self._ready_count += 1
        self._enqueue(i, origin)

    def _enqueue(self, i: int, origin: Worker | None) -> None:
        gid = self._group_of[i]
        if gid >= 0:
            if self._outside_left[gid]:
                return  # released when the group becomes startable
            heapq.heappush(self._group_ready[gid], (self._key[i], i))
            if gid not in self._bound_to:
                self._queue_group(gid)
        elif origin is not None and self._locality and origin in self._local:
            self._local[origin].append(i)
        else:
            heapq.heappush(self._heap, (*self._key[i], 0, i))

    def _queue_group(self, gid: int) -> None:
        ready = self._group_ready[gid]
        if ready and not self._group_queued[gid] and gid not in self._bound_to:
            self._group_queued[gid] = True
            heapq.heappush(self._heap, (*ready[0][0], 1, gid))

    def _heap_entry_live(self, entry: tuple[float, int, int, int]) -> bool:
        kind, ident = entry[2], entry[3]
        if kind == 0:
            return self.state[ident] is State.READY
        # Drop entries of members that ended while queued (a "deselected" report):
        # binding a worker to a group with nothing left would idle it for good.
        ready = self._group_ready[ident]
        while ready and self.state[ready[0][1]] is not State.READY:
            heapq.heappop(ready)
        return bool(ready) and ident not in self._bound_to

    def _bind(self, gid: int, worker: Worker) -> None:
        current = self._bound.get(worker)
        if current == gid:
            return
        if current is not None or gid in self._bound_to:
            raise ValueError(f"group {gid} cannot be bound to worker {worker!r}")
        self._bound[worker] = gid
        self._bound_over[worker] = frozenset(self._running_on[worker])
        self._bound_to[gid] = worker

    def _next_for(self, worker: Worker) -> int | None:
        if worker not in self._workers:
            raise KeyError(worker)
        while True:
            gid = self._bound.get(worker)
            if gid is not None:
                i = self._pop_group(gid)
                if i is None:
                    return None  # contiguity: wait for the group's running tasks
                if self._fits(i):
                    return i
                continue
            i = self._pop_free(worker)
            if i is None:
                return None
            if i < 0:  # a group entry: bind it and take from it
                self._bind(-i - 1, worker)
                continue
            if not self._res[i] or self._fits(i):
                return i

    def _pop_group(self, gid: int) -> int | None:
        ready = self._group_ready[gid]
        while ready:
            _, i = heapq.heappop(ready)
            if self.state[i] is State.READY:
                return i
        return None

    def _drop_ended(self, worker: Worker) -> deque[int]:
        """Drop entries that are no longer ready from the tops of ``worker``'s
        local queue and of the heap; returns that local queue.

        Entries of tasks that started or ended elsewhere stay in the queues
        until a reader meets them; afterwards the top of each is a live one.
        """
        local = self._local[worker]
        state = self.state
        while local and state[local[-1]] is not State.READY:
            local.pop()
        heap = self._heap
        while heap:
            top = heap[0]
            # Inline test for the common entry (a free task) - this is the hot path.
            if state[top[3]] is State.READY if top[2] == 0 else self._heap_entry_live(top):
                break
            _, _, kind, ident = heapq.heappop(heap)
            if kind == 1:
                self._group_queued[ident] = False
        return local

    def _pop_free(self, worker: Worker) -> int | None:
        """A ready free task (>= 0) or a startable group (encoded as -gid - 1)."""
        local = self._drop_ended(worker)
        heap = self._heap
        # Locality yields to priority: the worker's newest released task is
        # taken unless the heap holds one with a longer remaining path.
        if local and (not heap or self._key[local[-1]][0] <= heap[0][0]):
            return local.pop()
        if heap:
            _, _, kind, ident = heapq.heappop(heap)
            if kind == 1:
                self._group_queued[ident] = False
            return ident if kind == 0 else -ident - 1
        # Steal the oldest entry of the longest local queue.
        while True:
            victim = None
            best = 0
            for w, q in self._local.items():
                if len(q) > best:
                    victim, best = w, len(q)
            if victim is None:
                return None
            q = self._local[victim]
            while q:
                i = q.popleft()
                if self.state[i] is State.READY:
                    return i

    def _fits(self, i: int) -> bool:
        """Whether i's resources have room; if not, park it until they do."""
        for r in self._res[i]:
            if self._in_use.get(r, 0) >= self._limits.get(r, 1):
                self._parked.setdefault(r, []).append(i)
                return False
        return True

    def _start(self, i: int, worker: Worker) -> None:
        if worker not in self._workers:
            raise KeyError(worker)
        self.state[i] = State.RUNNING
        self._ready_count -= 1
        self.where[i] = worker
        self._running_on[worker].add(i)
        for r in self._res[i]:
            self._in_use[r] = self._in_use.get(r, 0) + 1

    def _release_resources(self, i: int) -> None:
        for r in self._res[i]:
            self._in_use[r] -= 1
            parked = self._parked.pop(r, None)
            if parked:
                for j in parked:
                    if self.state[j] is State.READY:
                        self._enqueue(j, None)

    def _set_terminal(self, task: int, state: State, origin: Worker | None) -> None:
        """Make ``task`` terminal and settle everything that waited on it.

        Iterative, so a long chain of skips cannot exhaust the stack.
        """
        g = self.graph
        states, terminal, pending = self.state, _TERMINAL, self._pending
        work = [(task, state)]
        while work:
            i, st = work.pop()
            if states[i] in terminal:
                continue
            if states[i] is State.READY:
                self._ready_count -= 1
            elif i in self._spec:
                self._spec.discard(i)
                if st is State.SKIPPED:  # skipped while held by a worker
                    w = self.where.pop(i)
                    self._running_on[w].discard(i)
            states[i] = st
            self._terminal_count += 1
            gid = self._group_of[i]
            if gid >= 0:
                self._group_left[gid] -= 1
                if not self._group_left[gid]:
                    w = self._bound_to.pop(gid, None)
                    if w is not None:
                        del self._bound[w]
                        del self._bound_over[w]
            passed = st is State.PASSED or self.on_failure == "run"
            released: list[int] = []
            for d in g.dependents[i]:
                if states[d] in terminal:
                    continue
                if passed:
                    pending[d] -= 1
                    if not pending[d]:
                        released.append(d)
                else:
                    # After a stop, every task not started is skipped for the stop's reason.
                    skip = (self._blocked(d, i) if self._stopped is None
                            else Skip(d, self._stopped, None, None, None))
                    self._record_skip(skip)
                    work.append((d, State.SKIPPED))
            for d in g.followers[i]:
                if states[d] in terminal:
                    continue
                pending[d] -= 1
                if not pending[d]:
                    released.append(d)
            for gid2 in self._outside_of.get(i, ()):
                self._outside_left[gid2] -= 1
                if not self._outside_left[gid2]:
                    for m in self._members[gid2]:
                        if self.state[m] is State.READY:
                            self._enqueue(m, None)
            if not released:
                continue
            if not self._locality and not self._members:
                # The common case of the thread-pool runner, inlined: every
                # released task joins the global heap (it orders them itself).
                heap, key, push = self._heap, self._key, heapq.heappush
                for d in released:
                    if states[d] is State.WAITING:
                        states[d] = State.READY
                        self._ready_count += 1
                        push(heap, (*key[d], 0, d))
                continue
            # Push in reverse priority so the local LIFO pops the most urgent first.
            if len(released) > 1:
                released.sort(key=self._key.__getitem__, reverse=True)
            for d in released:
                if states[d] is State.WAITING:
                    self._make_ready(d, origin)

    def _blocked(self, task: int, prereq: int) -> Skip:
        """Why ``task`` is skipped because ``prereq`` did not pass."""
        skip = blocked_skip(task, prereq, self.outcome[prereq], self.skips.get(prereq),
                            self._name)
        if task in self._spec:
            skip = replace(skip, remote=True)
        return skip

    def _record_skip(self, skip: Skip) -> None:
        self.skips[skip.task] = skip
        self.outcome[skip.task] = "skipped"
        self._new_skips.append(skip)

    def _skip(self, i: int, skip: Skip, origin: Worker | None) -> None:
        self._record_skip(skip)
        self._set_terminal(i, State.SKIPPED, origin)

    # ------------------------------------------------------------------ checking

    def validate(self) -> None:
        """Check every invariant; raise AssertionError naming the first broken one.

        Costs O(V + E): meant for tests, after every event.
        """
        g = self.graph
        n = len(g)
        terminal = sum(1 for s in self.state if s.terminal)
        ready = sum(1 for s in self.state if s is State.READY)
        _check(ready == self._ready_count, "ready count drifted")
        _check(terminal == self._terminal_count, "terminal count drifted")
        for i in range(n):
            st = self.state[i]
            expected = 0
            for p in g.requires[i]:
                ps = self.state[p]
                if ps is State.PASSED or (ps.terminal and self.on_failure == "run"):
                    continue
                expected += 1
            expected += sum(1 for p in g.after[i] if not self.state[p].terminal)
            if not st.terminal:
                _check(self._pending[i] == expected,
                       f"task {i}: pending {self._pending[i]} != {expected}")
                _check(self._pending[i] >= 0, f"task {i}: negative pending")
            if st is State.RUNNING and i in self._spec:
                w = self.where.get(i)
                for p in (*g.requires[i], *g.after[i]):
                    ps = self.state[p]
                    _check(ps.terminal or (ps is State.RUNNING and self.where.get(p) == w),
                           f"speculative task {i} waits on {p}, not running on its worker")
                    if p in g.requires[i]:
                        _check(ps in (State.PASSED, State.RUNNING),
                               f"speculative task {i} held although {p} did not pass")
            elif st in (State.READY, State.RUNNING):
                _check(expected == 0, f"task {i} is {st.value} with prerequisites left")
            if st is not State.RUNNING:
                _check(i not in self._spec, f"task {i} is {st.value} but marked speculative")
            if st is State.RUNNING:
                _check(i in self.where, f"running task {i} has no worker")
            else:
                _check(i not in self.where, f"task {i} is {st.value} but placed on a worker")
            if st is State.SKIPPED:
                _check(i in self.skips, f"skipped task {i} has no reason")
            if st is State.WAITING and self.on_failure != "run":
                for p in g.requires[i]:
                    _check(self.state[p] in (State.WAITING, State.READY, State.RUNNING,
                                             State.PASSED),
                           f"task {i} waits on {p} which did not pass")
        for w, tasks in self._running_on.items():
            for i in tasks:
                _check(self.where.get(i) == w, f"task {i} misplaced")
        for r, used in self._in_use.items():
            _check(0 <= used <= self._limits.get(r, 1) or used == 0,
                   f"resource {r!r} over its limit: {used}")
        for gid, w in self._bound_to.items():
            _check(self._bound.get(w) == gid, "group binding asymmetric")
            others = [i for i in self._running_on.get(w, ())
                      if self._group_of[i] != gid and i not in self._bound_over[w]]
            _check(not others, f"worker {w!r} runs {others} outside its group {gid}")
        if self._stopped is not None:
            waiting = [i for i in range(n) if self.state[i] in (State.WAITING, State.READY)]
            _check(not waiting, f"tasks {waiting} not skipped after the stop")
        if not self.done and not self.where and self._workers:
            live = self.has_ready() or any(self._parked.values())
            _check(live, "run cannot progress: nothing running, nothing ready")


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise AssertionError(message)


def _dissolve_group_cycles(graph: Graph, of: list[int], count: int) -> list[int]:
    """Drop groups that could never start: those on a cycle of the group-level graph.

    A group starts only when all its outside prerequisites are terminal, so
    group G waiting (through other tasks) on a task that waits on G would
    deadlock.  Dissolving only refines the graph, so it is repeated until
    no cycle is left (each round removes at least one group).
    """
    of = list(of)
    n = len(graph)
    while count:
        # Node ids: tasks not in a group keep i; group g becomes n + g.
        node = [n + g if g >= 0 else i for i, g in enumerate(of)]
        succ: dict[int, set[int]] = {}
        for i in range(n):
            a = node[i]
            for p in (*graph.requires[i], *graph.after[i]):
                b = node[p]
                if a != b:
                    succ.setdefault(a, set()).add(b)
        cyclic = _nodes_on_cycles(succ)
        bad = {v - n for v in cyclic if v >= n}
        if not bad:
            return of
        of = [-1 if g in bad else g for g in of]
    return of


def _nodes_on_cycles(succ: Mapping[int, set[int]]) -> set[int]:
    """Nodes that lie on some cycle (members of strongly connected components > 1).

    Peeling sources and sinks alone is not enough: a node on a path from one
    cycle to another survives both peels without being on a cycle itself.
    """
    comps = strongly_connected(sorted(succ), lambda v: sorted(succ.get(v, ())))
    return {v for comp in comps for v in comp}

