"""Run plain callables as a DAG on a fixed thread pool, driven by the scheduler core.

The calling thread owns the :class:`Scheduler` (it is not thread-safe, and
need not be): pool threads only run task bodies and post ``(index, error)``
to a queue.  A task is submitted only once it is ready, so no pool thread
ever blocks on a dependency, and at most ``max_workers`` bodies run at once
because one pool slot is one scheduler worker.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, final

from .graph import Graph
from .scheduler import FailurePolicy, Scheduler

Status = Literal["passed", "failed", "skipped"]

#: How long the driving thread sleeps at most between checks for cancel().
_POLL_SECONDS = 0.25


@dataclass(frozen=True)
class Task:
    """A unit of work: ``fn`` runs once every task in ``deps`` passed.

    ``after`` orders without gating (wait for those to end, whatever their
    outcome); ``resources`` names limited resources the task holds while it
    runs; ``duration`` estimates its run time in seconds, to run the longest
    remaining path first.
    """

    id: Hashable
    fn: Callable[[], object]
    deps: Sequence[Hashable] = ()
    after: Sequence[Hashable] = ()
    resources: Sequence[str] = ()
    duration: float | None = None


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
            for field_name in ("deps", "after", "resources"):
                if isinstance(getattr(t, field_name), str):
                    raise TypeError(
                        f"task {t.id!r}: {field_name} must be a sequence of names, not a string"
                    )
        self.graph = Graph.build(
            ((t.id, t.deps) for t in self._tasks),
            after={t.id: t.after for t in self._tasks if t.after},
            durations={t.id: t.duration for t in self._tasks},
        )
        self.max_workers = max_workers
        self.on_failure: FailurePolicy = on_failure
        self.limits = dict(limits or {})
        self._cancel = threading.Event()
        self._events: queue.SimpleQueue[tuple[int, int, BaseException | None, object]] = (
            queue.SimpleQueue()
        )

    def cancel(self) -> None:
        """Stop admitting tasks (from any thread); running ones finish, the rest skip."""
        self._cancel.set()
        self._events.put((-1, -1, None, None))  # wake the driving thread

    def execute(self) -> dict[Hashable, TaskResult]:
        """Run every task; return once each is terminal, keyed by task id."""
        tasks = self._tasks
        sched = Scheduler(
            self.graph,
            on_failure=self.on_failure,
            resources=[t.resources for t in tasks] if any(t.resources for t in tasks) else None,
            limits=self.limits,
            locality=False,  # threads share no fixtures: priority order alone
        )
        errors: dict[int, BaseException] = {}
        values: dict[int, object] = {}
        events = self._events
        idle = list(range(self.max_workers - 1, -1, -1))
        for slot in idle:
            sched.add_worker(slot)

        def run(index: int, slot: int) -> None:
            fn = tasks[index].fn
            try:
                value = fn()
            except BaseException as exc:  # recorded, never lost: the run goes on
                events.put((index, slot, exc, None))
            else:
                events.put((index, slot, None, value))

        with ThreadPoolExecutor(self.max_workers, thread_name_prefix="dagorder") as pool:
            while not sched.done:
                if self._cancel.is_set() and sched.stopped is None:
                    sched.stop("cancelled")
                while idle:
                    got = sched.take(idle[-1])
                    if not got:
                        break
                    pool.submit(run, got[0], idle.pop())
                if sched.done:
                    break
                try:
                    event = events.get(timeout=_POLL_SECONDS)
                except queue.Empty:
                    continue
                while True:
                    index, slot, exc, value = event
                    if index >= 0:
                        idle.append(slot)
                        if exc is None:
                            values[index] = value
                            sched.finished(index, "passed")
                        else:
                            errors[index] = exc
                            sched.finished(index, "failed")
                    try:
                        event = events.get_nowait()
                    except queue.Empty:
                        break
        ids = self.graph.ids
        result: dict[Hashable, TaskResult] = {}
        for i, task_id in enumerate(ids):
            if i in errors:
                result[task_id] = TaskResult("failed", None, errors[i])
            elif sched.outcome[i] == "passed":
                result[task_id] = TaskResult("passed", None, None, values.get(i))
            else:
                result[task_id] = TaskResult("skipped", sched.reason(i))
        return result

