"""Placement: which ready task a worker runs next.

The state machine (:mod:`.state_machine`) decides *whether* a task may run: it
counts prerequisites down, moves a task to READY, RUNNING and a terminal
state, skips what cannot pass.  Placement decides *where and in which order*
READY tasks run.  The state machine talks to it through one small protocol,
:class:`Placement`: it reports tasks released (now READY), started, ended
(no longer running) and settled (terminal), workers added and removed, and
asks :meth:`~Placement.next_for` for a worker's next task.  Placement never
changes a task's state; it reads the shared state list to drop queue
entries that went stale (a task started or ended elsewhere), so nothing it
holds can make a task run twice.

The policies, each one class, compose one way: :class:`ReadyQueues` is
innermost, and every other policy wraps the one before it (each sees every
event and forwards it inward), in the order listed; only the queues are
always there.

* :class:`ReadyQueues` (always): a task released by a completion on worker
  W joins W's local queue (its fixtures are warm there); W pops its newest
  entry first (depth-first along a chain) unless the global heap holds a
  task with a strictly longer remaining path.  Tasks with no such origin
  (the roots) wait in the global heap, ordered by :data:`Rank`.  Another
  worker's queue yields the same way: a worker takes the next entry of
  another's queue when it has a strictly longer remaining path than its
  own next entry and the heap's best.  A worker with an empty local queue
  takes from the heap; with the heap empty too it steals the oldest entry
  of the longest local queue (ties: the worker added first), whatever
  its rank.  With
  ``locality=False`` every task goes to the heap: pure priority order, the
  shortest makespan when tasks share no process state.
* :class:`AffinityGroups` (wraps the queues, when there are groups):
  a group is startable once every prerequisite it has outside itself is
  terminal; it is queued in the global heap under the rank of its most
  urgent task; the worker that takes it runs only the group's tasks, in
  serial order (index order: the order a serial run uses), until all are
  terminal, or (``take(next_group=True)``) until it holds all that is left
  of the group.  Groups whose outside prerequisites would form a cycle
  between groups are dissolved into free tasks (the only way such a group
  could ever start).
* :class:`ResourceLimits` (when some task uses a resource): a task whose
  resource is at its limit is parked until a task using it ends, so it
  never idles a worker while other work is ready.  Whatever restricts where
  or when a task may start beyond its prerequisites belongs here.
* :class:`Exclusive` (when some task runs alone): outermost; parks a task
  that runs alone until nothing else runs.

* :class:`Fences` (inside the queues, when some test is fenced): a task
  after a fence in serial order is handed out only once every task before
  the fence has been, as a plain distributed queue hands tests out in order
  (pytest-order's ``order(-1)``: after every other test has been handed
  out).  Not a completion edge: it waits for starts, not ends, and joins no
  group.  A started group hands out its members across a fence (it is one
  unit; its first member waits at the fence).  A task evidence freed
  (``unfenced``) waits at no fence.

Handing out ahead (``take(ahead=True)`` and ``ahead()``) is not a
placement: it picks WAITING tasks from the state machine's own record of
what runs where, see :mod:`.hand_out_ahead`.

The remaining path of a task is its own duration plus the longest path after
it, in the durations the graph carries (equal when none are known).
"""

from __future__ import annotations

import contextlib
import heapq
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, final

from .graph import Graph, strongly_connected
from .module_runs import ModuleRuns
from .states import TERMINAL, State, Worker, check

#: A task's place in priority order: (-remaining path, index); the smaller runs
#: first, so the longest remaining path goes first, then collection order.
#: The heaps hold the ranks themselves, built once per task.  A bare tuple,
#: not a NamedTuple: heapq orders both as fast, but a NamedTuple is several
#: times dearer to build, paid once per task at every StateMachine construction
#: (docs/performance.md); the two fields are documented here instead.
Rank = tuple[float, int]

_READY = State.READY
#: Not yet handed out: what a group's serial order waits for.
_OPEN = (State.WAITING, State.READY)
#: Above every rank's first field: "no candidate" where ranks are compared.
_NONE = float("inf")


class Placement(Protocol):
    """What the state machine tells placement and asks of it.

    Events arrive after the state machine has made the change they report,
    except :meth:`started`, which comes first so that a policy may still
    refuse the start (raise) with nothing changed.
    """

    def worker_added(self, worker: Worker) -> None: ...

    def worker_removed(self, worker: Worker) -> None:
        """``worker`` is gone; its running tasks were already put back (released)."""

    def released(self, tasks: Sequence[int], origin: Worker | None) -> None:
        """``tasks`` became READY together, in the order given; ``origin`` is the
        worker whose completion released them (None: no origin)."""

    def next_for(self, worker: Worker) -> int | None:
        """A READY task that may start on ``worker`` now, taken off the queues."""

    def started(self, task: int, worker: Worker) -> None:
        """``task`` is about to run on ``worker`` (taken, claimed or held)."""

    def ended(self, task: int) -> None:
        """``task`` no longer runs: it finished, was skipped, or was put back."""

    def settled(self, task: int) -> None:
        """``task`` became terminal."""

    def has_ready(self) -> bool:
        """Whether some task could be handed out now, resource limits aside."""

    def ready_for(self, worker: Worker) -> bool:
        """Whether :meth:`next_for` would give ``worker`` a task now, resource limits aside."""

    def has_parked(self) -> bool:
        """Whether a READY task waits off the queues until a running one ends."""

    def validate(self) -> None:
        """Check this policy's invariants (raise AssertionError)."""


@final
class Fences:
    """Handed out in order across fences (see the module docstring).

    ``segment[i]``: the stretch of the serial order task ``i`` lies in,
    between two fences (0 before the first); a task may be handed out once
    every task of an earlier stretch has been (started, or terminal without
    starting).  Handed out counts once: a task put back does not close a
    fence again, as a plain distributed queue never takes a test back.
    A task of ``free`` (evidence showed it needs no task before it) is never
    held, though it still counts in its stretch: the tasks after it wait for it.
    """

    __slots__ = ("_free", "_handed", "_left", "_open", "_segment")

    def __init__(self, segment: Sequence[int], free: Iterable[int] = ()) -> None:
        self._segment = segment
        self._free = bytearray(len(segment))
        for i in free:
            self._free[i] = 1
        self._left = [0] * (max(segment, default=0) + 1)
        for k in segment:
            self._left[k] += 1
        self._handed = bytearray(len(segment))
        self._open = 0  # the first stretch with a task not yet handed out
        self._advance()

    @staticmethod
    def of(fences: Sequence[int], n: int, free: Iterable[int] = ()) -> Fences | None:
        """The fences before the tasks at positions ``fences`` (each in ``1 .. n - 1``;
        others mean nothing) over ``n`` tasks, none holding the tasks of ``free``;
        None if none fences anything."""
        cut = sorted({f for f in fences if 0 < f < n})
        if not cut:
            return None
        segment = [0] * n
        k = 0
        for i in range(n):
            while k < len(cut) and cut[k] <= i:
                k += 1
            segment[i] = k
        return Fences(segment, [i for i in free if 0 <= i < n])

    def open(self, task: int) -> bool:
        """Whether ``task`` may be handed out now."""
        return self._segment[task] <= self._open or bool(self._free[task])

    def allows(self, task: int, worker: Worker) -> bool:
        """:meth:`open`, as the queues' ``allowed`` filters are called."""
        return self._segment[task] <= self._open or bool(self._free[task])

    def handed(self, task: int) -> None:
        """``task`` started, or became terminal without starting."""
        if not self._handed[task]:
            self._handed[task] = 1
            self._left[self._segment[task]] -= 1
            self._advance()

    def _advance(self) -> None:
        left, last = self._left, len(self._left) - 1
        while self._open < last and not left[self._open]:
            self._open += 1

    def validate(self, state: Sequence[State]) -> None:
        for i, s in enumerate(state):
            if s is State.RUNNING or s.terminal:
                check(bool(self._handed[i]), f"task {i} was handed out but not counted")
            if self._handed[i]:
                continue
            check(self._segment[i] >= self._open, f"task {i} is behind the open fence")


@final
class _ModuleQueues:
    """Module runs' side of the ready queues: per module, its free tasks
    released, by index (a heap; may hold stale ones).  Index order is the
    run's order: inside a module, a worker runs what is ready as serial
    pytest would, so the module's last test is the one its fixtures'
    teardown reports on."""

    __slots__ = ("_free", "_of_module", "_runs", "_state")

    def __init__(self, runs: ModuleRuns, state: Sequence[State]) -> None:
        self._runs = runs
        self._state = state
        self._of_module: dict[int, list[int]] = {}
        self._free: set[int] = set()  # every task ever put into _of_module

    def note(self, tasks: Sequence[int]) -> None:
        """Note released free ``tasks`` under their modules (for a worker holding one)."""
        module, of = self._runs.module, self._of_module
        for i in tasks:
            m = module[i]
            if m >= 0:
                heapq.heappush(of.setdefault(m, []), i)
                self._free.add(i)

    def pop(self, m: int, fences: Fences | None) -> int | None:
        """The first READY free task of module ``m`` in the run's order, taken off its heap."""
        ready = self._of_module.get(m)
        state = self._state
        while ready:
            i = ready[0]
            if state[i] is not _READY:
                heapq.heappop(ready)
            elif fences is not None and not fences.open(i):
                return None  # behind a fence: so is the rest of the module, later in order
            else:
                return heapq.heappop(ready)
        return None

    def first(self, i: int, fences: Fences | None) -> int | None:
        """The task a worker entering ``i``'s module starts with instead of ``i``,
        taken off its heap: the module's first READY free task in the run's
        order; None when none comes before ``i``, or ``i`` is not a free task
        of a module (``i`` itself is then the one)."""
        runs = self._runs
        m = runs.module[i]
        keep = m >= 0 and runs.keeps[i] and i in self._free
        ready = self._of_module.get(m) if keep else None
        if not ready:
            return None
        state = self._state
        while ready and state[ready[0]] is not _READY:
            heapq.heappop(ready)
        if not ready or ready[0] >= i or (fences is not None and not fences.open(ready[0])):
            return None
        return heapq.heappop(ready)


class ReadyQueues:
    """Per-worker local queues, one global heap, stealing (see the module docstring).

    Over 20 methods: the :class:`Placement` protocol's eleven, four that the
    wrapping policies use (:meth:`stand_in`, :meth:`enqueue`,
    :meth:`push_entry`, :attr:`runs`) and the steps of :meth:`next_for`
    over the one heap and the local queues they share (module runs' part
    is :class:`_ModuleQueues`).
    """

    def __init__(self, rank: Sequence[Rank], state: Sequence[State], *, locality: bool,
                 runs: ModuleRuns | None = None, fences: Fences | None = None) -> None:
        self._rank = rank
        self._state = state
        self._locality = locality
        self.fences = fences
        # Module runs (None: no test keeps module fixtures).
        self._runs = runs
        self._modules = None if runs is None else _ModuleQueues(runs, state)
        # Workers in the order they were added: the tie-break when stealing.
        self._local: dict[Worker, deque[int]] = {}
        self._heap: list[Rank] = []
        # Set by a policy whose heap entries stand for more than their task
        # (see stand_in); None: an entry is live while its task is READY.
        self._entry_live: Callable[[int], bool] | None = None
        self._entry_dropped: Callable[[int], None] = _ignore

    @property
    def runs(self) -> ModuleRuns | None:
        """Which module each worker is in (None: no test keeps module fixtures)."""
        return self._runs

    def stand_in(self, live: Callable[[int], bool], dropped: Callable[[int], None]) -> None:
        """Let a wrapping policy decide when a heap entry still stands for work.

        :class:`AffinityGroups` queues a group under one member's entry:
        ``live(task)`` says whether the entry of ``task`` is still worth
        popping, and ``dropped(task)`` is told when a stale one is dropped.
        """
        self._entry_live = live
        self._entry_dropped = dropped

    def worker_added(self, worker: Worker) -> None:
        self._local[worker] = deque()
        if self._runs is not None:
            self._runs.worker_added(worker)

    def worker_removed(self, worker: Worker) -> None:
        if self._runs is not None:
            self._runs.worker_removed(worker)
        heap, rank, state = self._heap, self._rank, self._state
        for i in self._local.pop(worker):
            if state[i] is _READY:
                heapq.heappush(heap, rank[i])

    def released(self, tasks: Sequence[int], origin: Worker | None) -> None:
        if len(tasks) > 1 and origin is not None and self._locality:
            # Pushed in reverse priority so the LIFO pops the most urgent first.
            tasks = sorted(tasks, key=self._rank.__getitem__, reverse=True)
        self.enqueue(tasks, origin)

    def enqueue(self, tasks: Sequence[int], origin: Worker | None) -> None:
        """:meth:`released` for ``tasks`` already in reverse priority order."""
        if self._modules is not None:
            self._modules.note(tasks)
        if origin is not None and self._locality and origin in self._local:
            self._local[origin].extend(tasks)
            return
        heap, rank, push = self._heap, self._rank, heapq.heappush
        for i in tasks:
            push(heap, rank[i])

    def push_entry(self, rank: Rank) -> None:
        """Put ``rank``'s task into the global heap (for a wrapper queueing a group)."""
        heapq.heappush(self._heap, rank)

    def next_for(self, worker: Worker) -> int | None:
        runs, fences, modules = self._runs, self.fences, self._modules
        if runs is None or modules is None:
            return (self._next(worker, None) if fences is None
                    else self._next_allowed(worker, fences.allows))
        held = runs.holding(worker)
        if held >= 0:
            # A worker holding a module's fixtures goes on with that module
            # while any of it is ready: leaving it early would leave its
            # rest to other workers (another setup each) or bring it back.
            i = modules.pop(held, fences)
            if i is not None:
                return i
        allowed: Callable[[int, Worker], bool] = runs.allowed
        idle: Callable[[int, Worker], bool] = runs.allowed_idle
        if fences is not None:
            allowed = _both(fences.allows, runs.allowed)
            idle = _both(fences.allows, runs.allowed_idle)
        i = self._next_allowed(worker, allowed)
        if i is None:
            # Nothing else for it: come back to a module it left rather
            # than idle, unless an idle worker can take that (ModuleRuns).
            i = self._next_allowed(worker, idle)
        # Priority picks the module; inside it the worker starts where serial
        # pytest would (see _ModuleQueues).
        if i is None:
            return None
        first = modules.first(i, fences)
        if first is None:
            return i
        # ``i`` was taken off the heap or a local queue: it waits in the heap again.
        heapq.heappush(self._heap, self._rank[i])
        return first

    def _next_allowed(self, worker: Worker, allowed: Callable[[int, Worker], bool]) -> int | None:
        """:meth:`next_for` among the tasks ``allowed`` lets ``worker`` take."""
        # Entries the worker may not take are set aside while it chooses,
        # then put back for the others.
        aside: list[Rank] = []
        heap, state, rank = self._heap, self._state, self._rank
        self._drop_heap()
        while heap and not allowed(heap[0][1], worker):
            aside.append(heapq.heappop(heap))
            self._drop_heap()
        local = self._local[worker]
        while local and (state[local[-1]] is not _READY or not allowed(local[-1], worker)):
            i = local.pop()
            if state[i] is _READY:
                aside.append(rank[i])
        try:
            return self._next(worker, allowed)
        finally:
            for entry in aside:
                heapq.heappush(heap, entry)

    def _next(self, worker: Worker,
              allowed: Callable[[int, Worker], bool] | None) -> int | None:
        """:meth:`next_for` among the tasks ``allowed`` lets ``worker`` take (None: all);
        the tops of its local queue and of the heap are allowed already."""
        local = self._drop_ended(worker)
        heap = self._heap
        own = self._rank[local[-1]][0] if local else _NONE
        # Locality yields to priority: the worker's newest released task is
        # taken unless the heap, or another (busy) worker's queue, holds one
        # with a longer remaining path.  Without the second, a long chain
        # released on one worker waits behind that worker's run while this
        # one works through short tests, and finishes last.
        best = min(own, heap[0][0] if heap else _NONE)
        urgent = self._most_urgent_queued(best, worker, allowed) if best < _NONE else None
        if urgent is not None:
            return urgent
        if local and (not heap or own <= heap[0][0]):
            return local.pop()
        if heap:
            return heapq.heappop(heap)[1]
        # Steal the oldest entry of the longest local queue.
        state = self._state
        skip: set[Worker] = set()
        while True:
            victim = None
            best = 0
            for w, q in self._local.items():
                if len(q) > best and w not in skip:
                    victim, best = w, len(q)
            if victim is None:
                return None
            q = self._local[victim]
            if allowed is None:
                while q:
                    i = q.popleft()
                    if state[i] is _READY:
                        return i
                continue
            # Steal the oldest entry this worker may take; drop stale ones.
            live = deque(i for i in q if state[i] is _READY)
            q.clear()
            q.extend(live)
            for k, i in enumerate(q):
                if allowed(i, worker):
                    del q[k]
                    return i
            # Nothing there for this worker: look at the other queues.
            skip.add(victim)

    def started(self, task: int, worker: Worker) -> None:
        if self._runs is not None:
            self._runs.started(task, worker)
        if self.fences is not None:
            self.fences.handed(task)

    def ended(self, task: int) -> None:
        pass

    def settled(self, task: int) -> None:
        if self.fences is not None:
            self.fences.handed(task)

    def has_ready(self) -> bool:
        state = self._state
        if any(state[i] is _READY for q in self._local.values() for i in q):
            return True
        return any(self._live(i) for _, i in self._heap)

    def ready_for(self, worker: Worker) -> bool:
        fences = self.fences
        if fences is not None:
            return self._ready_past(fences)
        if self._drop_ended(worker) or self._heap:
            return True
        # Only other workers' local queues hold ready tasks: next_for would steal one.
        state = self._state
        return any(state[i] is _READY for q in self._local.values() for i in q)

    def _ready_past(self, fences: Fences) -> bool:
        """:meth:`ready_for` where some test is fenced: a READY task behind the
        open fence is no worker's yet.  Counted, it kept every test from being
        handed out ahead, although only a hand-out opens the fence: in a suite
        whose every test carries an ordinal (a fence after each), a chain's next
        test then waited for its prerequisite's end and a round trip while the
        fenced tests behind it, ready, idled the other worker."""
        open_, state = fences.open, self._state
        if any(open_(i) and self._live(i) for _, i in self._heap):
            return True
        return any(state[i] is _READY and open_(i) for q in self._local.values() for i in q)

    def has_parked(self) -> bool:
        return False

    def validate(self) -> None:
        if self.fences is not None:
            self.fences.validate(self._state)

    def _live(self, task: int) -> bool:
        """Whether the heap entry of ``task`` still stands for something to run."""
        if self._entry_live is not None:
            return self._entry_live(task)
        return self._state[task] is _READY

    def _most_urgent_queued(self, than: float, worker: Worker,
                            allowed: Callable[[int, Worker], bool] | None) -> int | None:
        """Pop and return the next entry of the other workers' local queue whose
        next live entry has the longest remaining path, if longer than
        ``than`` (a rank's first field) and ``allowed`` (None: any) lets
        ``worker`` take it; None if none is."""
        rank, state = self._rank, self._state
        best: deque[int] | None = None
        for w, q in self._local.items():
            if w == worker:
                continue
            while q and state[q[-1]] is not _READY:
                q.pop()
            if (q and (allowed is None or allowed(q[-1], worker)) and rank[q[-1]][0] < than
                    and (best is None or rank[q[-1]] < rank[best[-1]])):
                best = q
        return best.pop() if best is not None else None

    def _drop_ended(self, worker: Worker) -> deque[int]:
        """Drop stale entries from the tops of ``worker``'s local queue and of the
        heap (the top of each is then a live one); returns that local queue.

        Entries of tasks that started or ended elsewhere stay in the queues
        until a reader meets them.
        """
        local = self._local[worker]
        state = self._state
        while local and state[local[-1]] is not _READY:
            local.pop()
        self._drop_heap()
        return local

    def _drop_heap(self) -> None:
        heap = self._heap
        live = self._entry_live
        if live is None:
            state = self._state
            while heap and state[heap[0][1]] is not _READY:
                heapq.heappop(heap)
            return
        dropped = self._entry_dropped
        while heap and not live(heap[0][1]):
            dropped(heapq.heappop(heap)[1])


def _ignore(task: int) -> None:
    pass


def _both(first: Callable[[int, Worker], bool],
          then: Callable[[int, Worker], bool]) -> Callable[[int, Worker], bool]:
    """A filter that allows what ``first`` and ``then`` both allow."""
    return lambda task, worker: first(task, worker) and then(task, worker)


class _Wrapping:
    """Base of the policies that wrap another: every call goes to the inner one.

    A wrapper overrides only what it changes; forwarding the rest here keeps
    the wrappers from drifting apart when the protocol grows.
    """

    def __init__(self, inner: Placement) -> None:
        self._inner = inner

    def worker_added(self, worker: Worker) -> None:
        self._inner.worker_added(worker)

    def worker_removed(self, worker: Worker) -> None:
        self._inner.worker_removed(worker)

    def released(self, tasks: Sequence[int], origin: Worker | None) -> None:
        self._inner.released(tasks, origin)

    def next_for(self, worker: Worker) -> int | None:
        return self._inner.next_for(worker)

    def started(self, task: int, worker: Worker) -> None:
        self._inner.started(task, worker)

    def ended(self, task: int) -> None:
        self._inner.ended(task)

    def settled(self, task: int) -> None:
        self._inner.settled(task)

    def has_ready(self) -> bool:
        return self._inner.has_ready()

    def ready_for(self, worker: Worker) -> bool:
        return self._inner.ready_for(worker)

    def has_parked(self) -> bool:
        return self._inner.has_parked()

    def validate(self) -> None:
        self._inner.validate()


@dataclass(slots=True, eq=False)
class Group:
    """One affinity group: tasks that run on one worker, contiguously."""

    gid: int
    members: list[int]
    #: Prerequisites outside the group not yet terminal: startable at 0.
    outside_left: int
    #: Members not yet terminal: the binding ends at 0.
    left: int
    #: Members neither terminal nor running (held or not): at 0 the group's
    #: worker holds all that is left of it (see AffinityGroups.let_go).
    unstarted: int
    #: The rank the group is queued under: its most urgent member's.
    rank: Rank = (0.0, 0)
    #: The members in serial order: the graph's stable topological order,
    #: which is index order wherever every edge leads back (a plan's graph).
    serial: list[int] = field(default_factory=list)
    #: Members released while the group was startable, by their place in
    #: ``serial`` (a heap; may hold stale ones): only the first is handed out.
    ready: list[int] = field(default_factory=list)
    #: Where in ``serial`` the first member neither running nor terminal may
    #: be (none before it is; see AffinityGroups._first_open).
    cursor: int = 0
    #: Whether the global heap holds an entry for the group.
    queued: bool = False
    #: The worker bound to the group, if any, and what that worker already ran
    #: when it took the group (those may end alongside it; nothing else may start there).
    worker: Worker | None = None
    over: frozenset[int] = frozenset()
    #: Its members are of more than one module: they run module by module.
    spans: bool = False


def _group_members(graph: Graph, labels: Sequence[Hashable | None]) -> list[list[int]]:
    """The tasks of each group ``labels`` form (a label per task; None: free),
    in index order, groups in order of their first task, once the groups
    whose outside prerequisites form a cycle between groups are dissolved."""
    ids: dict[Hashable, int] = {}
    of = [-1] * len(graph)
    for i, label in enumerate(labels):
        if label is not None:
            of[i] = ids.setdefault(label, len(ids))
    of = _dissolve_group_cycles(graph, of, len(ids))
    members: dict[int, list[int]] = {}
    for i, g in enumerate(of):
        if g >= 0:
            members.setdefault(g, []).append(i)
    return sorted(members.values(), key=lambda tasks: tasks[0])


def _topo_places(graph: Graph) -> list[int]:
    """Each task's place in the graph's serial order; empty where that is
    index order (every edge leads back), as it is at no cost."""
    topo = graph.topo
    if topo == tuple(range(len(graph))):
        return []
    place = [0] * len(graph)
    for k, i in enumerate(topo):
        place[i] = k
    return place


@final
class AffinityGroups(_Wrapping):
    """Wraps the :class:`ReadyQueues`: a group's tasks go to one worker, contiguously.

    Free tasks go to the queues as they are.  A startable, unbound group is
    queued in the queues' global heap under the rank of its most urgent
    member (an entry of a grouped task stands for its group, see
    :meth:`ReadyQueues.stand_in`);
    taking that entry binds the worker, which then takes only the group's
    tasks until all are terminal, and nothing while they run elsewhere
    (:meth:`let_go` ends the binding once the worker holds all that is left).

    Inside a group, tasks are handed out in serial order, never by rank: a
    member goes only once every member before it in index order (the
    plan's order, which every edge follows) is running or terminal.  A
    suite that passes serially may rely on that order beyond its declared
    edges (one module fixture that a chain of tests edits, each declaring
    only some of what it relies on); priority picks *which group* a worker
    takes, not the order inside it.  The first open member of a started
    group never waits on anything but members before it (its outside
    prerequisites ended before the group started), so the order cannot
    stall a group.

    Over 20 methods: the :class:`Placement` protocol's, the questions the
    state machine asks about bindings (:meth:`bound_group`, :meth:`spans`,
    :meth:`staying`, :meth:`unstarted`, :meth:`let_go`) and the steps of
    queueing and binding a group, which all share the bindings and the
    groups' counters.
    """

    def __init__(
        self,
        queues: ReadyQueues,
        graph: Graph,
        labels: Sequence[Hashable | None],
        rank: Sequence[Rank],
        state: Sequence[State],
        running_on: Mapping[Worker, set[int]],
    ) -> None:
        super().__init__(queues)
        self._queues = queues
        self._rank = rank
        self._state = state
        n = len(graph)
        if len(labels) != n:
            raise ValueError(f"groups has {len(labels)} entries for {n} tasks")
        self._running_on = running_on
        members = _group_members(graph, labels)
        #: Per task, its group (None: a free task).
        self.of: list[Group | None] = [None] * n
        self._pos = [-1] * n  # a member's place in its group's serial order
        self.groups: list[Group] = []
        place = _topo_places(graph) if members else []
        self._outside_of: dict[int, list[Group]] = {}
        runs = queues.runs
        for tasks in members:
            inside = set(tasks)
            outside = sorted({p for i in tasks for p in (*graph.requires[i], *graph.after[i])
                              if p not in inside})
            group = Group(len(self.groups), tasks, len(outside), len(tasks), len(tasks),
                          rank=min(rank[i] for i in tasks),
                          serial=sorted(tasks, key=place.__getitem__) if place else tasks)
            if runs is not None:
                group.spans = len({runs.module[i] for i in tasks}) > 1
            self.groups.append(group)
            for i in tasks:
                self.of[i] = group
            for k, i in enumerate(group.serial):
                self._pos[i] = k
            for p in outside:
                self._outside_of.setdefault(p, []).append(group)
        self._bound: dict[Worker, Group] = {}
        self._stay = False
        queues.stand_in(self._live, self._dropped)

    def bound_group(self, worker: Worker) -> int | None:
        group = self._bound.get(worker)
        return None if group is None else group.gid

    def spans(self, worker: Worker) -> bool:
        """Whether ``worker`` is bound to a group of several modules."""
        group = self._bound.get(worker)
        return group is not None and group.spans

    @contextlib.contextmanager
    def staying(self) -> Iterator[None]:
        """Within the block, a group of several modules hands out only members of
        its worker's current module (see ``StateMachine.take``)."""
        self._stay = True
        try:
            yield
        finally:
            self._stay = False

    def group_bound_to(self, worker: Worker) -> Group | None:
        return self._bound.get(worker)

    def unstarted(self, gid: int) -> int:
        """Members of group ``gid`` neither terminal nor running: 0 once all are handed out.

        With none, nothing of the group is left to hold ahead; a driver
        topping up a worker near its group's end asks after every report,
        and the search for tasks to hold would scan all it runs.
        """
        return self.groups[gid].unstarted

    def worker_removed(self, worker: Worker) -> None:
        self._queues.worker_removed(worker)
        group = self._bound.pop(worker, None)
        if group is not None:
            group.worker = None
            self._queue(group)

    def released(self, tasks: Sequence[int], origin: Worker | None) -> None:
        if len(tasks) > 1:
            # In reverse priority, as the local queues want them; the order
            # also decides which member a group is queued under.
            tasks = sorted(tasks, key=self._rank.__getitem__, reverse=True)
        free: list[int] = []
        of = self.of
        for i in tasks:
            group = of[i]
            if group is None:
                free.append(i)
            else:
                self._offer(group, i)
        if free:
            self._queues.enqueue(free, origin)

    def next_for(self, worker: Worker) -> int | None:
        while True:
            group = self._bound.get(worker)
            if group is not None:
                # Contiguity: None while the group's next tasks still wait on running ones.
                return self._pop_member(group)
            i = self._queues.next_for(worker)
            if i is None:
                return None
            group = self.of[i]
            if group is None:
                return i
            group.queued = False  # the entry was taken off the heap
            self._bind(group, worker)

    def started(self, task: int, worker: Worker) -> None:
        self._queues.started(task, worker)
        group = self.of[task]
        if group is not None:
            self._bind(group, worker)
            group.unstarted -= 1

    def ended(self, task: int) -> None:
        # No longer running: settled next (finished, or skipped while held)
        # or put back (its worker is gone).
        self._queues.ended(task)
        group = self.of[task]
        if group is not None:
            group.unstarted += 1

    def settled(self, task: int) -> None:
        self._queues.settled(task)
        group = self.of[task]
        if group is not None:
            group.left -= 1
            group.unstarted -= 1
            if not group.left and group.worker is not None:
                del self._bound[group.worker]
                group.worker = None
                group.over = frozenset()
            elif group.worker is None and not group.outside_left:
                # Skipped before its turn: the member after it may be the
                # first to go now, released while this one still waited.
                self._queue(group)
        for waiting in self._outside_of.get(task, ()):
            waiting.outside_left -= 1
            if not waiting.outside_left:
                for m in waiting.members:
                    if self._state[m] is _READY:
                        self._offer(waiting, m)

    def has_ready(self) -> bool:
        return self._queues.has_ready() or any(
            self._next_ready(g) is not None for g in self._bound.values())

    def let_go(self, worker: Worker) -> bool:
        """End ``worker``'s binding early if it runs or holds all that is left of its group.

        The worker may then take its next group (or a free task) while it
        still runs the last one's tasks: they become that binding's ``over``,
        and nothing of the old group is left to go anywhere else, so each
        group still runs on one worker, contiguously.  True if it was let go.
        """
        group = self._bound.get(worker)
        if group is None or group.unstarted:
            return False
        del self._bound[worker]
        group.worker = None
        group.over = frozenset()
        return True

    def validate(self) -> None:
        for group in self.groups:
            w = group.worker
            if w is None:
                continue
            check(self._bound.get(w) is group, "group binding asymmetric")
            others = [i for i in self._running_on.get(w, ())
                      if self.of[i] is not group and i not in group.over]
            check(not others, f"worker {w!r} runs {others} outside its group {group.gid}")
        for group in self.groups:
            open_ = [i for i in group.members if self._state[i] not in TERMINAL]
            idle = [i for i in open_ if self._state[i] is not State.RUNNING]
            check(group.unstarted == len(idle),
                  f"group {group.gid}: {group.unstarted} counted unstarted, {len(idle)} are")
            behind = -1  # a member not yet handed out: none after it runs
            for i in group.serial:
                if self._state[i] in _OPEN:
                    behind = i if behind < 0 else behind
                elif self._state[i] is State.RUNNING:
                    check(behind < 0, f"group {group.gid}: {i} runs before {behind}, "
                                      "ahead of it in serial order")
        self._queues.validate()

    def _offer(self, group: Group, i: int) -> None:
        """Put READY member ``i`` where its group's worker will find it."""
        # Put back (its worker left) or handed back (parked by a limit): the
        # first open member may be this one again.
        group.cursor = min(group.cursor, self._pos[i])
        if group.outside_left:
            return  # offered when the group becomes startable
        heapq.heappush(group.ready, self._pos[i])
        if group.worker is None:
            self._queue(group)

    def _queue(self, group: Group) -> None:
        if not group.queued and group.worker is None:
            first = self._next_ready(group)
            if first is not None:
                group.queued = True
                self._queues.push_entry((group.rank[0], first))

    def _first_open(self, group: Group) -> int:
        """Where in its serial order the group's first member is that is neither
        running nor terminal (``len(serial)``: every one is)."""
        serial, state, k = group.serial, self._state, group.cursor
        while k < len(serial) and state[serial[k]] not in _OPEN:
            k += 1
        group.cursor = k
        return k

    def _next_ready(self, group: Group) -> int | None:
        """The member to hand out next: the first open one, if it is READY and
        offered (not parked by a limit)."""
        ready, state, serial = group.ready, self._state, group.serial
        while ready and state[serial[ready[0]]] is not _READY:
            heapq.heappop(ready)
        if not ready or ready[0] != self._first_open(group):
            return None
        return serial[ready[0]]

    def _pop_member(self, group: Group) -> int | None:
        i = self._next_ready(group)
        if i is None:
            return None
        runs = self._queues.runs
        if (self._stay and group.spans and runs is not None and group.worker is not None
                and runs.module[i] != runs.current(group.worker)):
            return None  # the next module's first task: the caller decides when
        heapq.heappop(group.ready)
        return i

    def _bind(self, group: Group, worker: Worker) -> None:
        current = self._bound.get(worker)
        if current is group:
            return
        if current is not None or group.worker is not None:
            raise ValueError(f"group {group.gid} cannot be bound to worker {worker!r}")
        self._bound[worker] = group
        group.worker = worker
        group.over = frozenset(self._running_on[worker])

    def _live(self, task: int) -> bool:
        """Whether the queues' heap entry of ``task`` still stands for work: a
        free task's while it is READY, a member's while its group is unbound
        and has a READY member."""
        group = self.of[task]
        if group is None:
            return self._state[task] is _READY
        # Drop entries of members that ended while queued (a "deselected" report):
        # binding a worker to a group with nothing left would idle it for good.
        return group.worker is None and self._next_ready(group) is not None

    def _dropped(self, task: int) -> None:
        """The queues dropped the stale heap entry of ``task``."""
        group = self.of[task]
        if group is not None:
            group.queued = False


@final
class ResourceLimits(_Wrapping):
    """Parks a task whose resource is at its limit until a task using it ends.

    Wraps the queues: it sees every task before it starts and every end.
    """

    def __init__(
        self,
        inner: Placement,
        resources: Sequence[Sequence[str]] | None,
        limits: Mapping[str, int] | None,
        state: Sequence[State],
        n: int,
    ) -> None:
        self._limits = dict(limits or {})
        for r, k in self._limits.items():
            if k < 1:
                raise ValueError(f"limit for resource {r!r} must be at least 1, not {k}")
        super().__init__(inner)
        self._state = state
        self._res: list[tuple[str, ...]] = (
            [tuple(dict.fromkeys(r)) for r in resources] if resources else [()] * n
        )
        self._in_use: dict[str, int] = {}
        self._parked: dict[str, list[int]] = {}

    def constrained(self, task: int) -> bool:
        """Whether ``task`` needs a resource (it is then never handed out ahead)."""
        return bool(self._res[task])

    def next_for(self, worker: Worker) -> int | None:
        while True:
            i = self._inner.next_for(worker)
            if i is None or self._fits(i):
                return i

    def started(self, task: int, worker: Worker) -> None:
        self._inner.started(task, worker)
        for r in self._res[task]:
            self._in_use[r] = self._in_use.get(r, 0) + 1

    def ended(self, task: int) -> None:
        self._inner.ended(task)
        for r in self._res[task]:
            self._in_use[r] -= 1
            parked = self._parked.pop(r, None)
            if parked:
                for j in parked:
                    if self._state[j] is _READY:
                        self._inner.released((j,), None)

    def has_parked(self) -> bool:
        return any(self._parked.values()) or self._inner.has_parked()

    def validate(self) -> None:
        for r, used in self._in_use.items():
            check(0 <= used <= self._limits.get(r, 1) or used == 0,
                  f"resource {r!r} over its limit: {used}")
        self._inner.validate()

    def _fits(self, i: int) -> bool:
        """Whether i's resources have room; if not, park it until they do."""
        for r in self._res[i]:
            if self._in_use.get(r, 0) >= self._limits.get(r, 1):
                self._parked.setdefault(r, []).append(i)
                return False
        return True


@final
class Exclusive(_Wrapping):
    """Tests that run alone: nothing else runs anywhere while one runs.

    Wraps the other policies (outermost).  An exclusive task that comes up
    while other tasks run is parked and the run drains: no new task starts,
    except that a worker bound to an affinity group goes on with its group
    (a group started once its outside prerequisites ended, so it never
    waits on a task outside it).  Once nothing runs, the parked task goes
    to the first worker that asks and may run it: a free one to an unbound
    worker, a group's member to the worker bound to that group (it keeps its
    group: the state its group left in that process is what it reads).
    While it runs, nothing else starts, except tasks its worker holds
    behind it.  Draining idles workers: that is what running alone costs.
    """

    def __init__(self, inner: Placement, alone: Sequence[bool], state: Sequence[State],
                 groups: AffinityGroups | None) -> None:
        super().__init__(inner)
        self._alone = list(alone)
        self._state = state
        self._groups = groups
        self._running = 0  # tasks started and not ended, anywhere
        self._active: int | None = None  # the exclusive task running now
        self._active_on: Worker | None = None  # and its worker
        self._behind = 0  # tasks its worker holds behind it (started after it)
        self._parked: list[int] = []  # exclusive tasks waiting for the run to drain

    def constrained(self, task: int) -> bool:
        """Whether ``task`` runs alone (it is then never handed out ahead)."""
        return self._alone[task]

    def _owner(self, task: int) -> Group | None:
        return None if self._groups is None else self._groups.of[task]

    def _may_run(self, task: int, bound: Group | None) -> bool:
        """Whether a worker bound to ``bound`` (None: unbound) may run parked
        ``task``: a member of a group only on that group's worker, a free
        task only on an unbound worker."""
        return self._owner(task) is bound

    def next_for(self, worker: Worker) -> int | None:
        if self._active is not None:
            return None
        mine = None if self._groups is None else self._groups.group_bound_to(worker)
        parked = self._parked
        if parked:
            if not self._running:
                for k, task in enumerate(parked):
                    if self._state[task] is _READY and self._may_run(task, mine):
                        del parked[k]
                        return task
                parked[:] = [t for t in parked if self._state[t] is _READY]
            if parked and (mine is None or any(self._owner(t) is mine for t in parked)):
                # Draining; a bound worker goes on with its group, unless that
                # group's own next task is the one waiting.
                return None
        i = self._inner.next_for(worker)
        if i is not None and self._alone[i] and self._running:
            parked.append(i)
            return None
        return i

    def started(self, task: int, worker: Worker) -> None:
        self._inner.started(task, worker)
        self._running += 1
        if self._alone[task]:
            self._active, self._active_on, self._behind = task, worker, 0
        elif self._active is not None:
            # Only the active task's worker gets anything (held behind it).
            self._behind += 1

    def ended(self, task: int) -> None:
        self._inner.ended(task)
        self._running -= 1
        if task == self._active:
            self._active = self._active_on = None
        elif self._active is not None:
            self._behind -= 1

    def worker_removed(self, worker: Worker) -> None:
        self._inner.worker_removed(worker)
        # A parked member of a group that lost its worker goes back to the
        # group, which is queued afresh for another worker to take.
        keep: list[int] = []
        for task in self._parked:
            group = self._owner(task)
            if group is not None and group.worker is None:
                if self._state[task] is _READY:
                    self._inner.released((task,), None)
            else:
                keep.append(task)
        self._parked = keep

    def ready_for(self, worker: Worker) -> bool:
        # A parked task counts as ready: nothing is handed out ahead meanwhile.
        return bool(self._parked) or self._inner.ready_for(worker)

    def has_parked(self) -> bool:
        return bool(self._parked) or self._inner.has_parked()

    def validate(self) -> None:
        check(self._running >= 0, "negative running count")
        check(self._active is None or self._running == 1 + self._behind,
              f"exclusive task {self._active} runs beside "
              f"{self._running - 1 - self._behind} others")
        self._inner.validate()


def _dissolve_group_cycles(graph: Graph, of: list[int], count: int) -> list[int]:
    """Drop groups that could never start: those on a cycle of the group-level graph.

    ``of[i]`` is task i's group number, -1 for none.  A group starts only
    when all its outside prerequisites are terminal, so group G waiting
    (through other tasks) on a task that waits on G would deadlock.
    Dissolving only refines the graph, so it is repeated until no cycle is
    left (each round removes at least one group).
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
