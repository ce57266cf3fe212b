"""Tier 1: DagScheduler, the scheduler core driving a thread pool.

Concurrency is measured with counters and barriers, never with timings: a
barrier of N parties only opens if N bodies really run at the same time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

import pytest

from pytest_dagorder import (
    CycleError,
    DagScheduler,
    DependencyError,
    DuplicateTaskError,
    Task,
    TaskResult,
    UnknownDependencyError,
)

#: Generous bound for any wait in these tests: reached only if something is broken.
WAIT = 10.0


class Recorder:
    """Thread-safe log of task starts/ends, plus the concurrency high-water mark."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, Hashable]] = []
        self.active = 0
        self.peak = 0
        self.by_tag: dict[str, int] = {}
        self.peak_by_tag: dict[str, int] = {}

    def body(self, name: Hashable, inner: Callable[[], object] | None = None,
             tag: str | None = None) -> Callable[[], object]:
        def fn() -> object:
            with self.lock:
                self.events.append(("start", name))
                self.active += 1
                self.peak = max(self.peak, self.active)
                if tag:
                    self.by_tag[tag] = self.by_tag.get(tag, 0) + 1
                    self.peak_by_tag[tag] = max(self.peak_by_tag.get(tag, 0), self.by_tag[tag])
            try:
                return inner() if inner else name
            finally:
                with self.lock:
                    self.active -= 1
                    if tag:
                        self.by_tag[tag] -= 1
                    self.events.append(("end", name))

        return fn

    def started(self) -> list[Hashable]:
        return [n for kind, n in self.events if kind == "start"]

    def position(self, kind: str, name: Hashable) -> int:
        return self.events.index((kind, name))


def barrier_wait(barrier: threading.Barrier) -> Callable[[], object]:
    def fn() -> object:
        barrier.wait(WAIT)
        return None

    return fn


def fail(exc: BaseException) -> Callable[[], object]:
    def fn() -> object:
        raise exc

    return fn


def statuses(results: dict[Hashable, TaskResult]) -> dict[Hashable, str]:
    return {k: r.status for k, r in results.items()}


# ---------------------------------------------------------------- ordering


def test_diamond_join_runs_once_after_both_parents() -> None:
    rec = Recorder()
    both = threading.Barrier(2)  # b and c must overlap
    tasks = [
        Task("a", rec.body("a")),
        Task("b", rec.body("b", barrier_wait(both)), deps=["a"]),
        Task("c", rec.body("c", barrier_wait(both)), deps=["a"]),
        Task("d", rec.body("d"), deps=["b", "c"]),
    ]
    results = DagScheduler(tasks, max_workers=4).execute()
    assert statuses(results) == dict.fromkeys("abcd", "passed")
    assert rec.started().count("d") == 1
    assert len(rec.started()) == 4
    assert rec.position("start", "d") > rec.position("end", "b")
    assert rec.position("start", "d") > rec.position("end", "c")
    assert rec.position("start", "b") > rec.position("end", "a")
    assert rec.position("start", "c") > rec.position("end", "a")


def test_values_are_returned() -> None:
    results = DagScheduler([Task("a", lambda: 41), Task("b", lambda: "x", deps=["a"])]).execute()
    assert results["a"] == TaskResult("passed", None, None, 41)
    assert results["b"].value == "x"
    assert list(results) == ["a", "b"]


def test_chain_runs_in_order() -> None:
    rec = Recorder()
    n = 30
    tasks = [Task(k, rec.body(k), deps=[k - 1] if k else []) for k in reversed(range(n))]
    results = DagScheduler(tasks, max_workers=4).execute()
    assert all(r.status == "passed" for r in results.values())
    assert rec.started() == list(range(n))
    assert rec.peak == 1


def test_single_worker_is_serial() -> None:
    rec = Recorder()
    tasks = [Task(k, rec.body(k)) for k in range(10)]
    DagScheduler(tasks, max_workers=1).execute()
    assert rec.peak == 1
    assert rec.started() == list(range(10))


def test_empty_graph() -> None:
    assert DagScheduler([]).execute() == {}


# ---------------------------------------------------------------- concurrency


@pytest.mark.parametrize("max_workers", [2, 3])
def test_at_most_max_workers_and_they_really_overlap(max_workers: int) -> None:
    rec = Recorder()
    gate = threading.Barrier(max_workers)  # opens only with max_workers bodies at once
    tasks = [Task(k, rec.body(k, barrier_wait(gate))) for k in range(3 * max_workers)]
    results = DagScheduler(tasks, max_workers=max_workers).execute()
    assert statuses(results) == dict.fromkeys(range(3 * max_workers), "passed")
    assert rec.peak == max_workers
    assert not gate.broken


def test_dependent_is_dispatched_while_siblings_still_run() -> None:
    # Not level by level: b (needs a) starts while slow, a sibling of a, still runs.
    b_started = threading.Event()

    def slow() -> object:
        assert b_started.wait(WAIT), "b did not start while slow was running"
        return None

    def b() -> object:
        b_started.set()
        return None

    tasks = [Task("slow", slow, duration=5.0), Task("a", lambda: None),
             Task("b", b, deps=["a"])]
    results = DagScheduler(tasks, max_workers=2).execute()
    assert statuses(results) == {"slow": "passed", "a": "passed", "b": "passed"}


# ---------------------------------------------------------------- failures


def test_failure_skips_only_descendants() -> None:
    rec = Recorder()
    boom = ValueError("boom")
    tasks = [
        Task("a", rec.body("a", fail(boom))),
        Task("b", rec.body("b"), deps=["a"]),
        Task("c", rec.body("c"), deps=["b"]),
        Task("x", rec.body("x")),
        Task("y", rec.body("y"), deps=["x"]),
        Task("z", rec.body("z"), deps=["x"], after=["a"]),
    ]
    results = DagScheduler(tasks, max_workers=2).execute()
    assert statuses(results) == {"a": "failed", "b": "skipped", "c": "skipped",
                                 "x": "passed", "y": "passed", "z": "passed"}
    assert results["a"].error is boom
    assert results["a"].reason is None
    assert results["b"].reason == "prerequisite a failed"
    assert results["c"].reason == "prerequisite b was skipped: a failed"
    assert results["b"].error is None
    assert set(rec.started()) == {"a", "x", "y", "z"}
    # z only waited for a's end ("after"), whatever its outcome.
    assert rec.position("start", "z") > rec.position("end", "a")


@pytest.mark.parametrize("exc", [RuntimeError("x"), AssertionError("y"), KeyboardInterrupt(),
                                 SystemExit(3)])
def test_exceptions_are_recorded(exc: BaseException) -> None:
    results = DagScheduler([Task("a", fail(exc)), Task("b", lambda: None)]).execute()
    assert results["a"].status == "failed"
    assert results["a"].error is exc
    assert results["b"].status == "passed"


def test_on_failure_stop() -> None:
    rec = Recorder()
    tasks = [
        Task("a", rec.body("a", fail(ValueError())), duration=10.0),
        Task("b", rec.body("b"), deps=["a"]),
        Task("x", rec.body("x")),
        Task("y", rec.body("y"), deps=["x"]),
    ]
    results = DagScheduler(tasks, max_workers=1, on_failure="stop").execute()
    assert rec.started() == ["a"]
    assert statuses(results) == {"a": "failed", "b": "skipped", "x": "skipped", "y": "skipped"}
    assert results["b"].reason == "prerequisite a failed"
    assert results["x"].reason == "run stopped after a failed"
    assert results["y"].reason == "run stopped after a failed"


def test_on_failure_stop_lets_running_tasks_finish() -> None:
    other_started = threading.Event()
    a_failed = threading.Event()

    def a() -> object:
        assert other_started.wait(WAIT)
        a_failed.set()
        raise ValueError

    def other() -> object:
        other_started.set()
        assert a_failed.wait(WAIT)
        return "done"

    tasks = [Task("a", a), Task("other", other), Task("later", lambda: None, deps=["other"])]
    results = DagScheduler(tasks, max_workers=2, on_failure="stop").execute()
    assert statuses(results) == {"a": "failed", "other": "passed", "later": "skipped"}
    assert results["other"].value == "done"
    assert results["later"].reason == "run stopped after a failed"


def test_on_failure_run() -> None:
    rec = Recorder()
    tasks = [
        Task("a", rec.body("a", fail(ValueError()))),
        Task("b", rec.body("b"), deps=["a"]),
        Task("c", rec.body("c", fail(KeyError())), deps=["b"]),
        Task("d", rec.body("d"), deps=["c"]),
    ]
    results = DagScheduler(tasks, max_workers=2, on_failure="run").execute()
    assert statuses(results) == {"a": "failed", "b": "passed", "c": "failed", "d": "passed"}
    assert rec.started() == ["a", "b", "c", "d"]


# ---------------------------------------------------------------- limits


def test_limits_cap_concurrency_per_resource_only() -> None:
    rec = Recorder()
    free_gate = threading.Barrier(3)  # the free tasks overlap with a db task
    tasks = [Task(f"db{k}", rec.body(f"db{k}", tag="db"), resources=["db"]) for k in range(6)]
    tasks += [Task(f"f{k}", rec.body(f"f{k}", barrier_wait(free_gate))) for k in range(2)]
    tasks.append(Task("dbwait", rec.body("dbwait", barrier_wait(free_gate), tag="db"),
                      resources=["db"]))
    results = DagScheduler(tasks, max_workers=4, limits={"db": 1}).execute()
    assert all(r.status == "passed" for r in results.values()), results
    assert rec.peak_by_tag["db"] == 1


def test_limit_of_two_really_overlaps() -> None:
    rec = Recorder()
    pair = threading.Barrier(2)
    tasks = [Task(k, rec.body(k, barrier_wait(pair), tag="gpu"), resources=["gpu"])
             for k in range(4)]
    results = DagScheduler(tasks, max_workers=4, limits={"gpu": 2}).execute()
    assert all(r.status == "passed" for r in results.values())
    assert rec.peak_by_tag["gpu"] == 2


def test_unlisted_resource_defaults_to_one() -> None:
    rec = Recorder()
    tasks = [Task(k, rec.body(k, tag="r"), resources=["r"]) for k in range(5)]
    DagScheduler(tasks, max_workers=4).execute()
    assert rec.peak_by_tag["r"] == 1


# ---------------------------------------------------------------- cancel


def test_cancel_from_another_thread() -> None:
    started = threading.Event()
    release = threading.Event()
    called: list[str] = []

    def first() -> object:
        started.set()
        assert release.wait(WAIT)
        return "first"

    def body(name: str) -> Callable[[], object]:
        def fn() -> object:
            called.append(name)
            return None

        return fn

    tasks = [Task("first", first, duration=10.0), Task("b", body("b"), deps=["first"]),
             Task("c", body("c"), deps=["b"]), Task("x", body("x")), Task("y", body("y"))]
    dag = DagScheduler(tasks, max_workers=1)
    out: dict[str, dict[Hashable, TaskResult]] = {}
    runner = threading.Thread(target=lambda: out.setdefault("r", dag.execute()))
    runner.start()
    try:
        assert started.wait(WAIT)
        dag.cancel()
    finally:
        release.set()
        runner.join(WAIT)
    assert not runner.is_alive()
    results = out["r"]
    assert called == []
    assert results["first"] == TaskResult("passed", None, None, "first")
    for name in ("b", "c", "x", "y"):
        assert results[name].status == "skipped"
        assert results[name].reason == "cancelled"


def test_cancel_before_execute_runs_nothing() -> None:
    called: list[int] = []
    tasks = [Task(k, lambda k=k: called.append(k)) for k in range(5)]  # type: ignore[misc]
    dag = DagScheduler(tasks)
    dag.cancel()
    results = dag.execute()
    assert called == []
    assert {r.reason for r in results.values()} == {"cancelled"}


# ---------------------------------------------------------------- invalid graphs


def never(called: list[str], name: str) -> Callable[[], object]:
    def fn() -> object:
        called.append(name)
        return None

    return fn


@pytest.mark.parametrize(
    ("deps", "error"),
    [
        ({"a": ["b"], "b": ["a"]}, CycleError),
        ({"a": ["a"]}, CycleError),
        ({"a": ["ghost"]}, UnknownDependencyError),
    ],
)
def test_invalid_graph_raises_before_anything_runs(deps: dict[str, list[str]],
                                                   error: type[DependencyError]) -> None:
    called: list[str] = []
    tasks = [Task("free", never(called, "free"))]
    tasks += [Task(t, never(called, t), deps=d) for t, d in deps.items()]
    with pytest.raises(error):
        DagScheduler(tasks).execute()
    assert called == []


def test_duplicate_ids_raise_before_anything_runs() -> None:
    called: list[str] = []
    tasks = [Task("a", never(called, "a1")), Task("b", never(called, "b")),
             Task("a", never(called, "a2"))]
    with pytest.raises(DuplicateTaskError) as info:
        DagScheduler(tasks)
    assert info.value.duplicates == ("a",)
    assert called == []


def test_cycle_through_after_edges_raises() -> None:
    called: list[str] = []
    tasks = [Task("a", never(called, "a"), after=["b"]), Task("b", never(called, "b"),
                                                                deps=["a"])]
    with pytest.raises(CycleError) as info:
        DagScheduler(tasks)
    assert set(info.value.cycle) == {"a", "b"}
    assert called == []


def test_several_problems_reported_together() -> None:
    tasks = [Task("a", lambda: None, deps=["zz"]), Task("b", lambda: None, deps=["c"]),
             Task("c", lambda: None, deps=["b"])]
    with pytest.raises(DependencyError) as info:
        DagScheduler(tasks)
    assert [type(e) for e in info.value.errors] == [UnknownDependencyError, CycleError]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_workers"):
        DagScheduler([], max_workers=0)
    with pytest.raises(TypeError, match="deps must be a sequence of names, not a string"):
        DagScheduler([Task("a", lambda: None), Task("b", lambda: None, deps="a")])
    with pytest.raises(ValueError, match="limit for resource"):
        DagScheduler([Task("a", lambda: None, resources=["r"])], limits={"r": 0}).execute()


def test_batches_of_tiny_tasks_stop_at_a_failure() -> None:
    """Tiny tasks are taken in batches; under "stop", nothing of a batch starts
    after a failure, and every task still ends with the right status."""
    started: list[int] = []
    lock = threading.Lock()

    def make(i: int) -> Callable[[], None]:
        def fn() -> None:
            with lock:
                started.append(i)
            if i == 300:
                raise RuntimeError("boom")
        return fn

    tasks = [Task(i, make(i)) for i in range(600)]
    result = DagScheduler(tasks, max_workers=4, on_failure="stop").execute()
    assert result[300].status == "failed"
    ran = set(started)
    for i in range(600):
        r = result[i]
        if i in ran:
            assert r.status in ("passed", "failed")
        else:
            assert r.status == "skipped"
            assert r.reason == "run stopped after 300 failed"
    assert len(started) == len(ran)  # nothing ran twice
    assert len(ran) < 600


def test_cancel_during_batches_of_tiny_tasks() -> None:
    count = [0]
    sched: list[DagScheduler] = []
    lock = threading.Lock()

    def fn() -> None:
        with lock:
            count[0] += 1
            now = count[0]
        if now == 200:
            sched[0].cancel()

    runner = DagScheduler([Task(i, fn) for i in range(2000)], max_workers=4)
    sched.append(runner)
    result = runner.execute()
    statuses = [r.status for r in result.values()]
    assert statuses.count("passed") == count[0] < 2000
    assert all(r.reason == "cancelled" for r in result.values() if r.status == "skipped")


def test_an_exclusive_task_runs_alone_and_limits_hold_per_kind() -> None:
    import time

    lock = threading.Lock()
    running: set[str] = set()
    seen: list[tuple[str, frozenset[str]]] = []

    def body(name: str) -> Callable[[], None]:
        def run() -> None:
            with lock:
                running.add(name)
                seen.append((name, frozenset(running)))
            time.sleep(0.02)
            with lock:
                running.discard(name)
        return run

    tasks = [Task(f"free{k}", body(f"free{k}")) for k in range(6)]
    tasks += [Task(f"db{k}", body(f"db{k}"), resources=["db"]) for k in range(4)]
    tasks += [Task("alone", body("alone"), exclusive=True)]
    results = DagScheduler(tasks, max_workers=4, limits={"db": 2}).execute()
    assert all(r.status == "passed" for r in results.values())
    for name, others in seen:
        if name == "alone":
            assert others == {"alone"}, others
        assert "alone" not in others or others == {"alone"}, (name, others)
        assert sum(1 for o in others if o.startswith("db")) <= 2, others
