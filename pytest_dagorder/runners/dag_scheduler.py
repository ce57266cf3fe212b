"""Run plain callables as a DAG on a fixed thread pool, driven by the scheduler core.

The pool runs exactly ``max_workers`` slot loops; one slot is one scheduler
worker, so at most ``max_workers`` task bodies run at once.  The core is not
thread-safe, so every call into it happens under one condition lock: a slot
that finished a task settles it and takes its next one in the same critical
section (no hand-off to another thread per task), and sleeps on the
condition only when nothing is ready.  A task is taken only once it is
ready, so no slot ever blocks on a dependency.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from time import perf_counter
from typing import Literal, final

from ..core import wording
from ..core.graph import Graph
from ..core.pacing import Pacing
from ..core.state_machine import FailurePolicy, Setup, StateMachine

Status = Literal["passed", "failed", "skipped"]

#: Tasks shorter than this (moving average, seconds) are taken BATCH at a time.
FAST_TASK = 0.001
BATCH = 8
#: Unknown yet: a task counts as slow (one at a time) until measured.
_FIRST_GUESS = 1.0
#: How long an idle slot sleeps at most before it looks again (a bound, not a poll:
#: completions and cancel() wake it at once).
_POLL_SECONDS = 0.25


@dataclass(frozen=True)
class Task:
    """A unit of work: ``fn`` runs once every task in ``deps`` passed.

    ``after`` orders without gating (wait for those to end, whatever their
    outcome); ``resources`` names limited resources the task uses while it
    runs (at most ``limits[name]`` tasks naming it at once, default 1);
    ``exclusive`` runs it alone, no other task at the same time;
    ``duration`` estimates its run time in seconds, to run the longest
    remaining path first.
    """

    id: Hashable
    fn: Callable[[], object]
    deps: Sequence[Hashable] = ()
    after: Sequence[Hashable] = ()
    resources: Sequence[str] = ()
    duration: float | None = None
    exclusive: bool = False


@dataclass(frozen=True)
class TaskResult:
    status: Status
    reason: str | None = None
    error: BaseException | None = None
    value: object = field(default=None, repr=False)


@final
class DagScheduler:
    """Validate a task graph, then run it with ``max_workers`` threads.

    A malformed graph raises a :class:`~pytest_dagorder.DependencyError` here,
    before anything runs.
    """

    def __init__(
        self,
        tasks: Iterable[Task],
        *,
        max_workers: int = 4,
        on_failure: FailurePolicy = "skip",
        limits: Mapping[str, int] | None = None,
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, not {max_workers}")
        self._tasks = list(tasks)
        for t in self._tasks:
            if isinstance(t.deps, str) or isinstance(t.after, str) or isinstance(
                t.resources, str
            ):
                field_name = next(f for f in ("deps", "after", "resources")
                                  if isinstance(getattr(t, f), str))
                raise TypeError(
                    f"task {t.id!r}: {field_name} must be a sequence of names, not a string"
                )
        self.graph = Graph.build(
            ((t.id, t.deps) for t in self._tasks),
            after={t.id: t.after for t in self._tasks if t.after},
            durations={t.id: t.duration for t in self._tasks if t.duration is not None},
        )
        self.max_workers = max_workers
        self.on_failure: FailurePolicy = on_failure
        self.limits = dict(limits or {})
        self._cancel = threading.Event()
        self._cond = threading.Condition()

    def cancel(self) -> None:
        """Stop admitting tasks (from any thread); running ones finish, the rest skip."""
        with self._cond:
            self._cancel.set()
            self._cond.notify_all()  # wake idle slots so they see it

    def execute(self) -> dict[Hashable, TaskResult]:
        """Run every task; return once each is terminal, keyed by task id."""
        tasks = self._tasks
        sched = self._machine()
        errors: dict[int, BaseException] = {}
        values: dict[int, object] = {}
        cond = self._cond
        cancel = self._cancel
        for slot in range(self.max_workers):
            sched.add_worker(slot)

        unstarted: dict[int, str] = {}  # taken in a batch, never begun: why
        stop_on_failure = self.on_failure == "stop"
        max_workers = self.max_workers

        def slot_loop(slot: int) -> None:
            # One pool slot = one scheduler worker.  After its tasks the slot
            # settles them and takes its next ones under the lock, with no
            # hand-off to another thread; it sleeps only when nothing is ready.
            ran: _Ran = []
            skipped: list[int] = []
            pace = Pacing(fast=FAST_TASK, seconds=FAST_TASK * BATCH, cap=BATCH,
                          initial=_FIRST_GUESS)
            while True:
                with cond:
                    for index, error, value in ran:
                        if error is None:
                            values[index] = value
                            sched.finished(index, "passed")
                        else:
                            errors[index] = error
                            sched.finished(index, "failed")
                    for index in skipped:
                        # Taken in a batch but not begun: a stop or cancel came first.
                        unstarted[index] = sched.stopped or wording.CANCELLED
                        sched.finished(index, "not run")
                    if ran and (sched.ready_count or sched.done):
                        cond.notify_all()
                    while True:
                        if cancel.is_set() and sched.stopped is None:
                            sched.stop(wording.CANCELLED)
                            cond.notify_all()
                        if sched.done:
                            return
                        # Tiny tasks go in batches: the lock hand-off then costs
                        # more than the tasks.  A batch is taken only while there
                        # is work for every slot, so it never starves another.
                        batch = pace.batch()
                        if sched.ready_count <= batch * max_workers:
                            batch = 1
                        got = sched.take(slot, batch)
                        if got:
                            break
                        cond.wait(_POLL_SECONDS)
                ran, skipped = _run_batch(tasks, got, cancel, stop_on_failure, pace)

        with ThreadPoolExecutor(self.max_workers, thread_name_prefix="dagorder") as pool:
            futures = [pool.submit(slot_loop, slot) for slot in range(self.max_workers)]
            for future in futures:
                future.result()  # slot_loop never raises; this only waits
        return self._results(sched, errors, values, unstarted)

    def _machine(self) -> StateMachine:
        """The scheduler core over this run's graph, resources and failure policy."""
        tasks = self._tasks
        return StateMachine(self.graph, Setup(
            on_failure=self.on_failure,
            resources=[t.resources for t in tasks] if any(t.resources for t in tasks) else None,
            exclusive=[t.exclusive for t in tasks] if any(t.exclusive for t in tasks) else None,
            limits=self.limits,
            locality=False,  # threads share no fixtures: priority order alone
        ))

    def _results(self, sched: StateMachine, errors: Mapping[int, BaseException],
                 values: Mapping[int, object],
                 unstarted: Mapping[int, str]) -> dict[Hashable, TaskResult]:
        """Each task's result, keyed by task id, once every task is terminal."""
        result: dict[Hashable, TaskResult] = {}
        for i, task_id in enumerate(self.graph.ids):
            if i in errors:
                result[task_id] = TaskResult("failed", None, errors[i])
            elif sched.outcome[i] == "passed":
                result[task_id] = TaskResult("passed", None, None, values.get(i))
            else:
                result[task_id] = TaskResult("skipped", unstarted.get(i) or sched.reason(i))
        return result


#: What a slot ran: (task index, the error it raised or None, its return value).
_Ran = list[tuple[int, BaseException | None, object]]


def _run_batch(tasks: Sequence[Task], got: list[int], cancel: threading.Event,
               stop_on_failure: bool, pace: Pacing) -> tuple[_Ran, list[int]]:
    """Run the tasks ``got`` (a slot's batch) in order, outside the lock: what
    ran, and the rest left unbegun because, after the first, a cancel came or
    (under ``stop``) a task failed."""
    ran: _Ran = []
    for k, index in enumerate(got):
        if k and (cancel.is_set() or (stop_on_failure and ran[-1][1] is not None)):
            return ran, got[k:]
        start = perf_counter()
        try:
            ran.append((index, None, tasks[index].fn()))
        except BaseException as exc:  # recorded, never lost: the run goes on
            ran.append((index, exc, None))
        pace.record(perf_counter() - start)
    return ran, []

