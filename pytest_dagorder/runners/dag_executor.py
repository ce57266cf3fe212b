"""A work-stealing thread pool for callables that depend on each other's futures.

:class:`DagExecutor` follows :mod:`concurrent.futures`: ``submit`` returns a
:class:`~concurrent.futures.Future`, ``shutdown`` drains, ``with`` shuts down.
On top of that a task may wait for other futures of the same executor
(``depends_on``), tasks may submit tasks, a failing task may be retried,
and each worker keeps its own deque (a task submitted by a task stays on
that worker; idle workers steal the oldest work of busy ones).

How it is kept honest
---------------------

One lock (``_lock``) guards every decision: the phase, the counters, the
deques, the sleeper list, each task's dependency counter and dependents
list.  Deques give locality and an order (the owner takes its newest task,
a thief the oldest), not lock freedom: under the GIL a short critical
section is cheaper than any lock-free protocol written in Python.  User code
(task bodies, and future callbacks, which run inside ``set_result``) never
runs under the lock.

Every task is a :class:`_DagFuture` (the future *is* the task record) in one
of these states::

    WAITING --(last prerequisite succeeded)--> QUEUED --(taken)--> RUNNING
    RUNNING --> OK | FAILED | CANCELLED(by its user) | QUEUED (a retry)
    WAITING --(a prerequisite did not succeed)--> SKIPPED
    WAITING, QUEUED --(shutdown(cancel_futures=True))--> CANCELLED | SKIPPED

*Exactly once.*  A task enters a deque only from these places, each under
the lock: ``submit`` when it has no unfinished prerequisite; the settling
of a prerequisite whose success brings the task's counter of unfinished
prerequisites to zero (the counter is decremented once per registration,
so exactly one decrement reaches zero); the worker holding it, for a
retry.  It leaves a deque only under the lock (a steal moves it to the
thief's deque), by one ``pop``/``popleft`` of one worker, which marks it
RUNNING in the same critical section, or by ``shutdown(cancel_futures=True)``,
which removes it before marking it CANCELLED.  So each attempt is taken by
exactly one worker, and a task that is WAITING, SKIPPED or CANCELLED is in
no deque.

*No loss.*  ``_outstanding`` counts accepted tasks whose future is not yet
resolved *and* accounted for.  It goes up in ``submit`` and down only in
the critical section that follows the resolution of the future (a worker
settles the task it held; whoever marked tasks SKIPPED or CANCELLED
resolves their futures outside the lock, then subtracts them).  At every
release of the lock::

    outstanding == queued + waiting + held by a worker + being resolved
    submitted == ok + failed + skipped + cancelled + outstanding

where every WAITING task is reachable through dependents lists from a
queued or held task (its unfinished prerequisite is one of those, or is
itself WAITING).  :meth:`DagExecutor.validate` checks exactly this.

*Termination.*  The phase goes ``accepting -> draining`` on ``shutdown``
(submissions from other threads are refused from then on) and ``draining
-> terminated`` in the critical section that finds ``_outstanding == 0``.
No task can appear after that: only a worker thread may submit while
draining, and a worker runs user code only while it holds a task or
resolves futures, both counted in ``_outstanding``.  Termination wakes
every sleeping worker, which then exits; :meth:`~DagExecutor.await_termination`
returns True from then on.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from threading import get_ident
from typing import Any, Final, Literal, TypeVar, final

from ..core import wording

__all__ = ["DagExecutor", "ExecutorStats", "PrerequisiteFailed"]

T = TypeVar("T")

Phase = Literal["accepting", "draining", "terminated"]
RootOutcome = Literal["failed", "cancelled"]

# Task states: small ints, compared in the hot paths.  Terminal ones are >= OK.
WAITING: Final = 0
QUEUED: Final = 1
RUNNING: Final = 2
OK: Final = 3
FAILED: Final = 4
CANCELLED: Final = 5
SKIPPED: Final = 6

#: A thief takes at most this many tasks at once (and never more than half of
#: the victim's deque): enough to amortise the search, few enough that the
#: victim's locality survives.
STEAL_BATCH: Final = 4

class PrerequisiteFailed(Exception):
    """A task did not run because one of its prerequisites did not succeed.

    ``task`` names the task that did not run, ``prerequisite`` its direct
    prerequisite that failed, was cancelled or was skipped itself, ``root``
    the task whose own failure or cancellation started it and
    ``root_outcome`` which of the two.  When the root failed, its exception
    is this one's ``__cause__``.
    """

    def __init__(self, task: str, prerequisite: str, root: str, root_outcome: RootOutcome) -> None:
        if prerequisite == root:
            message = wording.prerequisite_ended(prerequisite, root_outcome)
        else:
            message = wording.prerequisite_skipped(prerequisite, root, root_outcome)
        super().__init__(message)
        self.task = task
        self.prerequisite = prerequisite
        self.root = root
        self.root_outcome: RootOutcome = root_outcome

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.task, self.prerequisite, self.root, self.root_outcome))


@dataclass(frozen=True, slots=True)
class ExecutorStats:
    """Counts since the executor started.

    ``executed`` counts task bodies run (a retried task counts once per
    run), ``retried`` the re-runs, ``failed`` the futures that failed with
    the task's own exception, ``skipped`` those that failed with
    :class:`PrerequisiteFailed`, ``steals`` the tasks taken from another
    worker's deque.
    """

    submitted: int
    executed: int
    failed: int
    retried: int
    skipped: int
    cancelled: int
    steals: int


@final
class _DagFuture(Future[Any]):
    """A future that is also its task's record (one object per task, not two).

    Every ``_dag_*`` field is guarded by the executor's lock, except that the
    worker holding a task reads its call and writes its terminal state
    (after resolving the future, so a reader that sees a terminal state may
    rely on the future being done).  The future itself is a plain
    :class:`~concurrent.futures.Future`, built by its own ``__init__`` and
    driven only through the methods documented for executor implementations
    (``set_running_or_notify_cancel``, ``set_result``, ``set_exception``),
    outside the executor's lock, since they run callbacks.
    """

    __slots__ = (
        "_dag_args",
        "_dag_attempts",
        "_dag_dependents",
        "_dag_fn",
        "_dag_kwargs",
        "_dag_ordinal",
        "_dag_owner",
        "_dag_prereq",
        "_dag_qualname",
        "_dag_retries",
        "_dag_seq",
        "_dag_state",
        "_dag_waiting",
    )

    _dag_fn: Callable[..., Any] | None
    _dag_args: tuple[Any, ...]
    _dag_kwargs: dict[str, Any]
    _dag_owner: DagExecutor
    _dag_seq: int
    _dag_qualname: str
    _dag_ordinal: int
    _dag_state: int
    _dag_waiting: int
    #: Tasks waiting for this one, in registration order; None when none (yet).
    _dag_dependents: list[_DagFuture] | None
    _dag_retries: int
    _dag_attempts: int
    #: SKIPPED: the direct prerequisite that did not succeed.
    _dag_prereq: _DagFuture | None

    @property
    def _dag_name(self) -> str:
        if self._dag_ordinal == 1:
            return self._dag_qualname
        return f"{self._dag_qualname}#{self._dag_ordinal}"


def _new_task(owner: DagExecutor, fn: Callable[..., Any], args: tuple[Any, ...],
              kwargs: dict[str, Any], retries: int) -> _DagFuture:
    """The record of a task :meth:`DagExecutor.submit` accepts, before its
    sequence number, ordinal and state (given under the executor's lock)."""
    task = _DagFuture()
    task._dag_fn = fn
    task._dag_args = args
    task._dag_kwargs = kwargs
    task._dag_owner = owner
    task._dag_retries = retries
    task._dag_attempts = 0
    task._dag_dependents = None
    task._dag_prereq = None
    qualname = getattr(fn, "__qualname__", None)
    if type(qualname) is not str:
        qualname = _qualname(fn)
    task._dag_qualname = qualname
    return task


def _wait_for(task: _DagFuture, deps: Sequence[_DagFuture]) -> int | None:
    """Register ``task`` as a dependent of each of ``deps`` not done yet and
    return how many; None if one of them failed, was cancelled or was skipped
    (then ``task`` is SKIPPED, naming it, and the registrations made before
    it stay behind: the prerequisites' settling ignores terminal tasks).
    Under the executor's lock."""
    waiting = 0
    for dep in deps:
        state = dep._dag_state
        if state == OK:
            continue
        if state > OK:
            task._dag_state = SKIPPED
            task._dag_prereq = dep
            return None
        dependents = dep._dag_dependents
        if dependents is None:
            dep._dag_dependents = [task]
        else:
            dependents.append(task)
        waiting += 1
    return waiting


def _qualname(fn: object) -> str:
    name = getattr(fn, "__qualname__", None)
    if isinstance(name, str):
        return name
    inner = getattr(fn, "func", None)  # functools.partial
    if inner is not None and inner is not fn:
        return _qualname(inner)
    return type(fn).__qualname__


def _root_of(task: _DagFuture) -> _DagFuture:
    while task._dag_state == SKIPPED:
        assert task._dag_prereq is not None
        task = task._dag_prereq
    return task


def _resolve_skipped(skipped: list[_DagFuture]) -> None:
    """Fail each future with PrerequisiteFailed (outside the lock: callbacks run here)."""
    for task in skipped:
        prereq = task._dag_prereq
        assert prereq is not None
        root = _root_of(prereq)
        outcome: RootOutcome = "cancelled" if root._dag_state == CANCELLED else "failed"
        error = PrerequisiteFailed(task._dag_name, prereq._dag_name, root._dag_name, outcome)
        if outcome == "failed":
            error.__cause__ = root.exception(0)
        task._dag_fn, task._dag_args, task._dag_kwargs = None, (), {}  # never runs
        # Its user may have cancelled it first: cancelled is as final as failed.
        with contextlib.suppress(InvalidStateError):
            task.set_exception(error)


@final
class DagExecutor:
    """A thread pool whose tasks may depend on each other's futures.

    ``max_workers`` threads start at once (as daemon threads: call
    :meth:`shutdown`, or use ``with``, to have accepted work finish before
    the interpreter exits).  ``seed`` seeds each worker's choice of steal
    victims.

    Over 20 methods, in one class on purpose: the executor API of
    ``concurrent.futures`` (submit, shutdown, the context manager), its
    queries (phase, stats, validate), and the steps of the worker loop
    (:meth:`_work`: settle, take, run), which all share one lock and the
    deques it guards; split, each part would reach into the others' state.
    """

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        thread_name_prefix: str = "DagExecutor",
        seed: int = 0,
    ) -> None:
        if max_workers is None:
            max_workers = min(32, (os.cpu_count() or 1) + 4)  # concurrent.futures' default
        if type(max_workers) is not int or max_workers < 1:
            raise ValueError(f"max_workers must be a positive int, not {max_workers!r}")
        self._max_workers = max_workers
        self._lock = threading.Lock()
        self._phase: Phase = "accepting"
        self._outstanding = 0
        self._resolving = 0  # marked SKIPPED/CANCELLED, future not yet resolved
        self._seq = 0
        self._ordinals: dict[str, int] = {}
        self._inject: deque[_DagFuture] = deque()  # submissions from outside, oldest first
        self._deques: list[deque[_DagFuture]] = [deque() for _ in range(max_workers)]
        self._held: list[_DagFuture | None] = [None] * max_workers
        # A sleeping worker blocks on its own lock; whoever pops it from
        # _sleepers releases that lock exactly once, so no wake-up is lost or doubled.
        self._sleepers: list[int] = []
        self._parks = [threading.Lock() for _ in range(max_workers)]
        for park in self._parks:
            park.acquire()
        self._terminated = threading.Event()
        # Which worker, if any, the calling thread is, by thread ident: every submit
        # from outside would miss on a threading.local, and a miss raises and catches
        # an AttributeError inside getattr.
        self._worker_of: dict[int, int] = {}
        self._submitted = self._executed = self._ok = self._failed = 0
        self._retried = self._skipped = self._cancelled = self._steals = 0
        self._threads = [
            threading.Thread(
                target=self._work, args=(i, seed), name=f"{thread_name_prefix}_{i}", daemon=True
            )
            for i in range(max_workers)
        ]
        for thread in self._threads:
            thread.start()

    # ------------------------------------------------------------ public API

    def __enter__(self) -> DagExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown(wait=True)

    @property
    def max_workers(self) -> int:
        return self._max_workers

    def submit(
        self,
        fn: Callable[..., T],
        /,
        *args: Any,
        depends_on: Iterable[Future[Any]] = (),
        retries: int = 0,
        **kwargs: Any,
    ) -> Future[T]:
        """Schedule ``fn(*args, **kwargs)`` to run once every future in ``depends_on`` succeeded.

        If one of them failed, was cancelled or was skipped, ``fn`` never
        runs and the returned future fails with :class:`PrerequisiteFailed`.
        A failing ``fn`` is run again up to ``retries`` times.
        """
        if retries and (type(retries) is not int or retries < 0):
            raise ValueError(f"retries must be a non-negative int, not {retries!r}")
        if type(depends_on) is not list and type(depends_on) is not tuple:
            depends_on = self._check_depends_on(depends_on)
        else:
            for dep in depends_on:
                if type(dep) is not _DagFuture or dep._dag_owner is not self:
                    self._check_depends_on(depends_on)  # raises, naming it
        deps: Sequence[_DagFuture] = depends_on  # checked above
        task = _new_task(self, fn, args, kwargs, retries)
        qualname = task._dag_qualname
        worker = self._worker_of.get(get_ident())
        with self._lock:
            if self._phase != "accepting" and (worker is None or self._phase == "terminated"):
                raise RuntimeError(
                    f"cannot submit {qualname} after shutdown(): submit before shutting"
                    " down, or from a running task of this executor while it drains"
                )
            self._seq = seq = self._seq + 1
            task._dag_seq = seq
            ordinals = self._ordinals
            task._dag_ordinal = ordinals[qualname] = ordinals.get(qualname, 0) + 1
            self._submitted += 1
            self._outstanding += 1
            waiting = _wait_for(task, deps)
            if waiting is None:  # a prerequisite did not succeed: this task never runs
                self._resolving += 1
            else:
                task._dag_waiting = waiting
                if waiting:
                    task._dag_state = WAITING
                else:
                    task._dag_state = QUEUED
                    (self._inject if worker is None else self._deques[worker]).append(task)
                    if self._sleepers:
                        self._parks[self._sleepers.pop()].release()
                return task
        # Skipped at once (see _wait_for).
        _resolve_skipped([task])
        with self._lock:
            self._settle_resolved(skipped=1, cancelled=0)
        return task

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse new work from outside; let accepted work (and what it submits) finish.

        ``cancel_futures=True`` cancels every accepted task that has not
        started (its dependents fail with :class:`PrerequisiteFailed`); tasks
        that are running, or waiting for a retry, finish.  ``wait=True``
        returns once the executor terminated; see :meth:`await_termination`.
        """
        if wait and self._in_worker():
            raise RuntimeError(
                "shutdown(wait=True) from one of this executor's own tasks would wait"
                " for itself: call shutdown(wait=False) there"
            )
        cancelled: list[_DagFuture] = []
        skipped: list[_DagFuture] = []
        with self._lock:
            if self._phase == "accepting":
                self._phase = "draining"
            if cancel_futures:
                cancelled, skipped = self._cancel_unstarted()
            self._maybe_terminate()
        if cancelled or skipped:
            for task in cancelled:
                task._dag_fn, task._dag_args, task._dag_kwargs = None, (), {}
                task.cancel()
            _resolve_skipped(skipped)
            with self._lock:
                self._settle_resolved(skipped=len(skipped), cancelled=len(cancelled))
        if wait:
            self._terminated.wait()
            for thread in self._threads:
                thread.join()

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait until a shutdown has finished; False if ``timeout`` seconds passed first."""
        if timeout is None and self._in_worker():
            raise RuntimeError(
                "await_termination() from one of this executor's own tasks would wait"
                " for itself: pass a timeout, or wait from another thread"
            )
        return self._terminated.wait(timeout)

    @property
    def phase(self) -> Phase:
        """``"accepting"``, then ``"draining"`` after shutdown(), then ``"terminated"``."""
        return self._phase

    def stats(self) -> ExecutorStats:
        with self._lock:
            return ExecutorStats(
                submitted=self._submitted,
                executed=self._executed,
                failed=self._failed,
                retried=self._retried,
                skipped=self._skipped,
                cancelled=self._cancelled,
                steals=self._steals,
            )

    def validate(self) -> None:
        """Check the invariants of the module docstring; raise AssertionError if one fails.

        Cheap enough for tests (it walks every unfinished task), not meant for
        production loops.
        """
        with self._lock:
            problems = self._problems()
        if problems:
            raise AssertionError("DagExecutor invariants broken:\n  " + "\n  ".join(problems))

    # ------------------------------------------------------------ internals

    def _in_worker(self) -> bool:
        return get_ident() in self._worker_of

    def _check_depends_on(self, depends_on: Iterable[Future[Any]]) -> list[_DagFuture]:
        if isinstance(depends_on, (str, bytes, Future)) or not isinstance(depends_on, Iterable):
            hint = ": wrap a single future in a list" if isinstance(depends_on, Future) else ""
            raise TypeError(
                f"depends_on must be an iterable of futures, not {type(depends_on).__name__}"
                f" {depends_on!r}{hint}"
            )
        deps: list[_DagFuture] = []
        for dep in depends_on:
            if type(dep) is not _DagFuture:
                if isinstance(dep, Future):
                    raise ValueError(
                        f"depends_on: {dep!r} was not returned by this executor's submit();"
                        " depend only on futures of the same DagExecutor"
                    )
                raise TypeError(
                    f"depends_on: expected futures returned by submit(), got"
                    f" {type(dep).__name__} {dep!r}"
                )
            if dep._dag_owner is not self:
                raise ValueError(
                    f"depends_on: {dep._dag_name} ({dep!r}) belongs to another DagExecutor;"
                    " depend only on futures of the same executor"
                )
            deps.append(dep)
        return deps

    def _work(self, index: int, seed: int) -> None:
        """One worker: settle what it held, take the next task, run it; sleep when idle.

        Settling a task and taking the next one share one critical section, so
        a busy worker takes the lock once per task.  The task's future is
        resolved before that, outside the lock: resolving runs its callbacks.
        """
        ident = get_ident()
        self._worker_of[ident] = index
        lock = self._lock
        park = self._parks[index]
        rng = random.Random(seed * 1_000_003 + index)
        done: _DagFuture | None = None  # held, future resolved, dependents not yet released
        resolved = 0  # skipped futures resolved by this worker, not yet accounted for
        skipped: list[_DagFuture] = []
        task: _DagFuture | None
        while True:
            with lock:
                if resolved:
                    self._settle_resolved(skipped=resolved, cancelled=0)
                    resolved = 0
                if done is not None:
                    skipped = self._settle(index, done)
                    done = None
                if skipped:
                    task = None
                else:
                    task = self._next_task(index, rng)
                    if task is None and self._phase == "terminated":
                        # Before the thread ends: its ident may be given to a new thread.
                        del self._worker_of[ident]
                        return
            if skipped:
                _resolve_skipped(skipped)
                resolved = len(skipped)
                skipped = []
                continue
            if task is None:
                park.acquire()
                continue
            done = task
            self._run(task)

    def _settle(self, index: int, done: _DagFuture) -> list[_DagFuture]:
        """Under the lock: worker ``index`` ran ``done`` (its future resolved).

        A retry is queued again; a task that passed releases its dependents
        onto this worker's deque; one that failed or was cancelled skips
        them: returned, for the worker to resolve outside the lock.
        """
        self._held[index] = None
        state = done._dag_state
        own = self._deques[index]
        skipped: list[_DagFuture] = []
        if state == RUNNING:  # a retry: it stays in the accounting
            self._executed += 1
            self._retried += 1
            done._dag_state = QUEUED
            own.append(done)
            return skipped
        self._outstanding -= 1
        if state == OK:
            self._executed += 1
            self._ok += 1
            dependents = done._dag_dependents
            if dependents is not None:
                for dep in dependents:
                    if dep._dag_state == WAITING:
                        dep._dag_waiting -= 1
                        if not dep._dag_waiting:
                            dep._dag_state = QUEUED
                            own.append(dep)
        else:
            if state == FAILED:
                self._executed += 1
                self._failed += 1
            else:
                self._cancelled += 1
            skipped = self._skip_dependents(done)
        done._dag_dependents = None
        if self._outstanding == 0:
            self._maybe_terminate()
        return skipped

    def _next_task(self, index: int, rng: random.Random) -> _DagFuture | None:
        """Under the lock: worker ``index``'s next task (its own newest, else the
        injected queue's oldest, else stolen), now RUNNING and held; None:
        nothing to run (the worker is listed as sleeping, unless the pool ended)."""
        own, inject, sleepers = self._deques[index], self._inject, self._sleepers
        if own:
            task: _DagFuture | None = own.pop()
        elif inject:
            task = inject.popleft()
        else:
            task = self._steal(index, rng)
        if task is not None:
            task._dag_state = RUNNING
            self._held[index] = task
            # Wake one sleeper per task taken while more wait: a chain of
            # wake-ups, never a stampede, and none while everyone is busy.
            if sleepers and (own or inject):
                self._parks[sleepers.pop()].release()
        elif self._phase != "terminated":
            sleepers.append(index)
        return task

    def _run(self, task: _DagFuture) -> None:
        """Run ``task`` outside the lock and resolve its future (a retry leaves
        it RUNNING, a cancelled one CANCELLED: the settling tells them apart)."""
        # Its user may have cancelled it.  (A retry's future is running already.)
        if not task._dag_attempts and not task.set_running_or_notify_cancel():
            task._dag_state = CANCELLED
            task._dag_fn, task._dag_args, task._dag_kwargs = None, (), {}
            return
        task._dag_attempts += 1
        fn = task._dag_fn
        assert fn is not None
        try:
            value = fn(*task._dag_args, **task._dag_kwargs)
        except BaseException as exc:  # recorded in the future, as concurrent.futures does
            if task._dag_retries and isinstance(exc, Exception):
                task._dag_retries -= 1
                return  # still RUNNING: the settling re-queues it
            task._dag_fn, task._dag_args, task._dag_kwargs = None, (), {}
            task.set_exception(exc)
            task._dag_state = FAILED
        else:
            task._dag_fn, task._dag_args, task._dag_kwargs = None, (), {}
            task.set_result(value)
            task._dag_state = OK
            del value

    def _steal(self, index: int, rng: random.Random) -> _DagFuture | None:
        """Take the oldest tasks of the first non-empty deque from a random start."""
        deques = self._deques
        n = len(deques)
        start = int(rng.random() * n)
        for k in range(n):
            victim = deques[(start + k) % n]
            if victim and victim is not deques[index]:
                take = min(STEAL_BATCH, (len(victim) + 1) // 2)
                batch = [victim.popleft() for _ in range(take)]
                # The owner takes its newest first: reversed, the oldest stolen runs first.
                deques[index].extend(reversed(batch[1:]))
                self._steals += take
                return batch[0]
        return None

    def _skip_dependents(self, root: _DagFuture) -> list[_DagFuture]:
        """Mark every task waiting (transitively) on ``root`` SKIPPED, under the lock."""
        out: list[_DagFuture] = []
        stack = [root]
        while stack:
            prereq = stack.pop()
            dependents = prereq._dag_dependents
            if dependents is None:
                continue
            for dep in dependents:
                if dep._dag_state == WAITING:
                    dep._dag_state = SKIPPED
                    dep._dag_prereq = prereq
                    out.append(dep)
                    stack.append(dep)
            if prereq is not root:
                prereq._dag_dependents = None
        self._resolving += len(out)
        return out

    def _cancel_unstarted(self) -> tuple[list[_DagFuture], list[_DagFuture]]:
        """Under the lock: mark every task that has not started CANCELLED or SKIPPED.

        A task is CANCELLED when no prerequisite of it is being cancelled
        (it is queued, or waits only for running tasks), SKIPPED otherwise;
        tasks are decided in submission order, so a prerequisite is decided
        before its dependents.  Retries waiting in a deque have started: they stay.
        """
        unstarted: list[_DagFuture] = []
        for queue in (self._inject, *self._deques):
            keep = [t for t in queue if t._dag_attempts]
            unstarted.extend(t for t in queue if not t._dag_attempts)
            queue.clear()
            queue.extend(keep)
        unstarted.extend(self._waiting_tasks())
        unstarted.sort(key=lambda t: t._dag_seq)
        cancelled: list[_DagFuture] = []
        skipped: list[_DagFuture] = []
        for task in unstarted:
            if task._dag_state == SKIPPED:
                continue  # a prerequisite decided earlier was cancelled
            task._dag_state = CANCELLED
            cancelled.append(task)
            self._resolving += 1
            skipped.extend(self._skip_dependents(task))
            task._dag_dependents = None
        return cancelled, skipped

    def _waiting_tasks(self) -> list[_DagFuture]:
        """Every WAITING task, found from the queued and held ones (under the lock)."""
        seen: set[int] = set()
        found: list[_DagFuture] = []
        roots = [t for t in self._held if t is not None]
        roots.extend(self._inject)
        for queue in self._deques:
            roots.extend(queue)
        stack = roots
        while stack:
            task = stack.pop()
            for dep in task._dag_dependents or ():
                if dep._dag_state == WAITING and id(dep) not in seen:
                    seen.add(id(dep))
                    found.append(dep)
                    stack.append(dep)
        return found

    def _settle_resolved(self, *, skipped: int, cancelled: int) -> None:
        """Under the lock: account for SKIPPED/CANCELLED futures that are now resolved."""
        count = skipped + cancelled
        self._resolving -= count
        self._outstanding -= count
        self._skipped += skipped
        self._cancelled += cancelled
        if self._outstanding == 0:
            self._maybe_terminate()

    def _maybe_terminate(self) -> None:
        """Under the lock: draining with nothing outstanding means terminated."""
        if self._phase == "draining" and self._outstanding == 0:
            self._phase = "terminated"
            while self._sleepers:
                self._parks[self._sleepers.pop()].release()
            self._terminated.set()

    def _problems(self) -> list[str]:
        problems: list[str] = []
        queued: list[_DagFuture] = list(self._inject)
        for queue in self._deques:
            queued.extend(queue)
        held = [t for t in self._held if t is not None]
        if len({id(t) for t in queued}) != len(queued):
            problems.append("a task is queued twice")
        problems.extend(
            f"queued task {t._dag_name} is in state {t._dag_state}, not QUEUED"
            for t in queued if t._dag_state != QUEUED
        )
        problems.extend(
            f"held task {t._dag_name} is in state {t._dag_state}"
            for t in held if t._dag_state not in (RUNNING, OK, FAILED, CANCELLED)
        )
        waiting = self._waiting_tasks()
        problems.extend(
            f"waiting task {t._dag_name} waits for {t._dag_waiting} prerequisites"
            for t in waiting if t._dag_waiting < 1
        )
        accounted = len(queued) + len(waiting) + len(held) + self._resolving
        if self._outstanding != accounted:
            problems.append(
                f"outstanding {self._outstanding} != queued {len(queued)} + waiting"
                f" {len(waiting)} + held {len(held)} + resolving {self._resolving}"
            )
        terminal = self._ok + self._failed + self._skipped + self._cancelled
        if self._submitted != terminal + self._outstanding:
            problems.append(
                f"submitted {self._submitted} != ok {self._ok} + failed {self._failed} + skipped"
                f" {self._skipped} + cancelled {self._cancelled} + outstanding {self._outstanding}"
            )
        if self._executed != self._ok + self._failed + self._retried:
            problems.append(
                f"executed {self._executed} != ok {self._ok} + failed {self._failed}"
                f" + retried {self._retried}"
            )
        if len(set(self._sleepers)) != len(self._sleepers):
            problems.append(f"a worker sleeps twice: {self._sleepers}")
        if self._phase == "terminated":
            if self._outstanding:
                problems.append(f"terminated with {self._outstanding} tasks outstanding")
            if not self._terminated.is_set():
                problems.append("terminated but await_termination() would still wait")
        elif self._terminated.is_set():
            problems.append(f"await_termination() returns while {self._phase}")
        return problems
