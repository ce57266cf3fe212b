"""Tier 1: DagExecutor, the work-stealing pool for callables with future dependencies.

Concurrency is pinned with events and barriers, never with timings; every
wait is bounded by ``WAIT`` (reached only if something is broken).  Every
executor made through the ``make`` fixture is shut down, awaited and
``validate()``-d at teardown.
"""

from __future__ import annotations

import ast
import pickle
import random
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import (
    FIRST_EXCEPTION,
    CancelledError,
    Future,
    ThreadPoolExecutor,
    as_completed,
    wait,
)
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dagorder import DagExecutor, PrerequisiteFailed
from pytest_dagorder.runners import dag_executor

#: Generous bound for any wait in these tests: reached only if something is broken.
WAIT = 10.0

Make = Callable[..., DagExecutor]


@pytest.fixture
def make() -> Iterator[Make]:
    made: list[DagExecutor] = []

    def factory(max_workers: int = 4, **kwargs: Any) -> DagExecutor:
        ex = DagExecutor(max_workers, **kwargs)
        made.append(ex)
        return ex

    yield factory
    for ex in made:
        ex.shutdown(wait=False)
        assert ex.await_termination(WAIT), f"executor did not terminate: {ex.stats()}"
        ex.validate()


def finish(ex: DagExecutor) -> None:
    """shutdown(wait=True), bounded: graceful shutdown must end within WAIT."""
    done = threading.Event()

    def run() -> None:
        ex.shutdown(wait=True)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(WAIT), f"shutdown(wait=True) hung: {ex.stats()}"
    assert ex.phase == "terminated"
    ex.validate()


class Log:
    """Thread-safe record of what ran, in order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[str] = []

    def add(self, event: str) -> None:
        with self.lock:
            self.events.append(event)

    def task(self, name: str, value: object = None) -> Callable[[], object]:
        def body() -> object:
            self.add(name)
            return value

        return body


def fetch() -> int:
    return 1


def parse(x: int = 0) -> int:
    return x + 1


def index() -> int:
    return 3


def broken() -> int:
    raise ValueError("broken on purpose")


# ---------------------------------------------------------------- submit and results


def test_submit_returns_a_concurrent_future_with_the_result(make: Make) -> None:
    ex = make()
    fut = ex.submit(divmod, 17, 5)
    assert isinstance(fut, Future)
    assert fut.result(WAIT) == (3, 2)
    kw = ex.submit(dict, a=1, depends_on=[fut], retries=1)
    assert kw.result(WAIT) == {"a": 1}  # depends_on / retries are not passed to fn


def test_with_statement_shuts_down_and_drains() -> None:
    log = Log()
    gate = threading.Event()
    outcome: list[Future[object]] = []

    def scenario() -> None:
        with DagExecutor(max_workers=2) as ex:
            a = ex.submit(lambda: gate.wait(WAIT))
            b = ex.submit(log.task("b", 2), depends_on=[a])
            outcome.append(b)
            gate.set()
        # __exit__ waited: b ran although it was still waiting when the block ended
        assert b.done()
        ex.validate()

    t = threading.Thread(target=scenario, daemon=True)
    t.start()
    t.join(WAIT)
    assert not t.is_alive()
    assert outcome[0].result(0) == 2
    assert log.events == ["b"]


def test_readme_example(make: Make) -> None:
    ex = make()
    a = ex.submit(fetch)
    b = ex.submit(parse, depends_on=[a])
    c = ex.submit(index, depends_on=[b], retries=2)
    finish(ex)
    assert (a.result(0), b.result(0), c.result(0)) == (1, 1, 3)


def test_exception_of_a_task_is_its_futures(make: Make) -> None:
    ex = make()
    fut = ex.submit(broken)
    with pytest.raises(ValueError, match="broken on purpose"):
        fut.result(WAIT)
    assert ex.submit(fetch).result(WAIT) == 1  # the worker survived


def test_base_exception_is_recorded_not_retried(make: Make) -> None:
    ex = make(1)
    calls: list[int] = []

    def leave() -> None:
        calls.append(1)
        raise SystemExit(3)

    fut = ex.submit(leave, retries=3)
    assert isinstance(fut.exception(WAIT), SystemExit)
    assert calls == [1]
    assert ex.submit(fetch).result(WAIT) == 1


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_workers must be a positive int, not 0"):
        DagExecutor(0)
    ex = DagExecutor(1)
    try:
        for bad in (-1, True, 1.5):
            with pytest.raises(ValueError, match="retries must be a non-negative int"):
                ex.submit(fetch, retries=bad)
        assert ex.stats().submitted == 0
    finally:
        finish(ex)


# ---------------------------------------------------------------- depends_on


def test_dependent_runs_after_its_prerequisites_succeeded(make: Make) -> None:
    log = Log()
    ex = make()
    gate = threading.Event()
    a = ex.submit(lambda: (gate.wait(WAIT), log.add("a")))
    b = ex.submit(log.task("b"))
    c = ex.submit(log.task("c"), depends_on=[a, b])
    d = ex.submit(log.task("d"), depends_on=(c,))
    assert b.result(WAIT) is None
    assert not c.done() and not d.done()
    gate.set()
    d.result(WAIT)
    assert log.events.index("c") > log.events.index("a")
    assert log.events.index("d") > log.events.index("c")
    assert sorted(log.events) == ["a", "b", "c", "d"]


def test_a_dependent_sees_its_prerequisites_result(make: Make) -> None:
    ex = make()
    a = ex.submit(fetch)
    b = ex.submit(lambda: a.result(0) + 1, depends_on=[a])
    assert b.result(WAIT) == 2


def test_chain_runs_in_order(make: Make) -> None:
    log = Log()
    ex = make()
    futs: list[Future[object]] = []
    for k in range(50):
        futs.append(ex.submit(log.task(str(k)), depends_on=futs[-1:]))
    futs[-1].result(WAIT)
    assert log.events == [str(k) for k in range(50)]


def test_depends_on_accepts_any_iterable_and_duplicates(make: Make) -> None:
    ex = make()
    a = ex.submit(fetch)
    b = ex.submit(parse, depends_on=(f for f in [a, a]))
    assert b.result(WAIT) == 1


@pytest.mark.parametrize(
    ("depends_on", "error", "match"),
    [
        ("abc", TypeError, "depends_on must be an iterable of futures, not str 'abc'"),
        (5, TypeError, "depends_on must be an iterable of futures, not int 5$"),
        (None, TypeError, "depends_on must be an iterable of futures, not NoneType None$"),
        ([5], TypeError, "expected futures returned by submit\\(\\), got int 5"),
        ([Future()], ValueError, "was not returned by this executor's submit\\(\\)"),
    ],
)
def test_depends_on_rejects_what_is_not_a_future_of_this_executor(
    make: Make, depends_on: Any, error: type[Exception], match: str
) -> None:
    ex = make()
    with pytest.raises(error, match=match):
        ex.submit(fetch, depends_on=depends_on)
    assert ex.stats().submitted == 0


def test_depends_on_a_single_future_says_to_wrap_it(make: Make) -> None:
    ex = make()
    a = ex.submit(fetch)
    with pytest.raises(TypeError, match=r"not _DagFuture .*wrap a single future in a list"):
        ex.submit(parse, depends_on=a)  # type: ignore[arg-type]


def test_depends_on_a_future_of_another_executor(make: Make) -> None:
    ex, other = make(), make()
    foreign = other.submit(fetch)
    with pytest.raises(ValueError, match=r"fetch .* belongs to another DagExecutor"):
        ex.submit(parse, depends_on=[foreign])
    with ThreadPoolExecutor(1) as pool:
        plain = pool.submit(fetch)
        with pytest.raises(ValueError, match="not returned by this executor"):
            ex.submit(parse, depends_on=[plain])


# ---------------------------------------------------------------- PrerequisiteFailed


def test_failed_prerequisite_skips_dependents_with_reasons(make: Make) -> None:
    ran: list[str] = []
    ex = make()
    a = ex.submit(broken)
    b = ex.submit(lambda: ran.append("b"), depends_on=[a])
    c = ex.submit(lambda: ran.append("c"), depends_on=[b])
    finish(ex)
    assert ran == []
    eb, ec = b.exception(0), c.exception(0)
    assert isinstance(eb, PrerequisiteFailed) and isinstance(ec, PrerequisiteFailed)
    assert isinstance(eb, Exception)
    assert str(eb) == "prerequisite broken failed"
    assert (eb.prerequisite, eb.root, eb.root_outcome) == ("broken", "broken", "failed")
    assert str(ec) == (
        "prerequisite test_failed_prerequisite_skips_dependents_with_reasons.<locals>.<lambda>"
        " was skipped: broken failed"
    )
    assert ec.root == "broken"
    assert isinstance(eb.__cause__, ValueError) and ec.__cause__ is eb.__cause__
    stats = ex.stats()
    assert (stats.failed, stats.skipped, stats.executed) == (1, 2, 1)


def test_names_get_a_sequence_number_when_a_function_repeats(make: Make) -> None:
    ex = make(1)
    gate = threading.Event()
    first = ex.submit(gate.wait, WAIT)  # holds the only worker
    p1 = ex.submit(parse, depends_on=[first])
    p2 = ex.submit(parse, depends_on=[first])
    bad = ex.submit(broken, depends_on=[p2])
    d = ex.submit(parse, depends_on=[bad])
    e = ex.submit(parse, depends_on=[d])
    gate.set()
    assert p1.result(WAIT) == 1
    assert str(d.exception(WAIT)) == "prerequisite broken failed"
    err = e.exception(WAIT)
    assert isinstance(err, PrerequisiteFailed)
    assert str(err) == "prerequisite parse#3 was skipped: broken failed"
    assert (err.task, err.prerequisite, err.root) == ("parse#4", "parse#3", "broken")


def test_dependent_submitted_after_the_failure_is_skipped_at_once(make: Make) -> None:
    ex = make()
    a = ex.submit(broken)
    a.exception(WAIT)
    b = ex.submit(parse, depends_on=[a])
    assert b.done()  # decided in submit: nothing to wait for
    err = b.exception(0)
    assert isinstance(err, PrerequisiteFailed) and str(err) == "prerequisite broken failed"
    c = ex.submit(parse, depends_on=[b])
    assert str(c.exception(0)) == "prerequisite parse was skipped: broken failed"


def test_prerequisite_failed_pickles() -> None:
    err = PrerequisiteFailed("c", "b", "a", "cancelled")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == "prerequisite b was skipped: a was cancelled"
    assert (back.task, back.prerequisite, back.root, back.root_outcome) == (
        "c", "b", "a", "cancelled")


def test_user_cancelled_future_skips_its_dependents(make: Make) -> None:
    ex = make(1)
    gate = threading.Event()
    ran: list[str] = []
    hold = ex.submit(gate.wait, WAIT)
    victim = ex.submit(lambda: ran.append("victim"))
    dep = ex.submit(lambda: ran.append("dep"), depends_on=[victim])
    assert victim.cancel()
    gate.set()
    assert hold.result(WAIT) is True
    err = dep.exception(WAIT)
    assert isinstance(err, PrerequisiteFailed)
    assert err.root_outcome == "cancelled" and "was cancelled" in str(err)
    assert ran == []
    finish(ex)
    assert ex.stats().cancelled == 1


# ---------------------------------------------------------------- the Future protocol


def test_futures_work_with_wait_as_completed_and_callbacks(make: Make) -> None:
    ex = make()
    gate = threading.Event()
    a = ex.submit(gate.wait, WAIT)
    b = ex.submit(parse, 1, depends_on=[a])
    seen: list[object] = []
    b.add_done_callback(lambda f: seen.append(f.result()))
    assert a.running() or not a.done()
    not_done = wait([a, b], timeout=0.01).not_done  # a waiter on unfinished futures
    assert b in not_done
    gate.set()
    assert {f.result() for f in as_completed([a, b], timeout=WAIT)} == {True, 2}
    assert wait([a, b], timeout=WAIT, return_when=FIRST_EXCEPTION).not_done == set()
    assert seen == [2]


def test_callback_of_a_finished_task_may_submit(make: Make) -> None:
    ex = make()
    children: list[Future[int]] = []
    a = ex.submit(fetch)
    done = threading.Event()

    def on_done(f: Future[int]) -> None:
        children.append(ex.submit(parse, f.result()))
        done.set()

    a.add_done_callback(on_done)
    assert done.wait(WAIT)
    assert children[0].result(WAIT) == 2


def test_result_waiting_before_the_task_ends(make: Make) -> None:
    # Another thread waits on the future before the task ends: resolving must wake it.
    ex = make()
    gate = threading.Event()
    a = ex.submit(lambda: gate.wait(WAIT) and "ok")
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(a.result(WAIT)), daemon=True)
    t.start()
    gate.set()
    t.join(WAIT)
    assert got == ["ok"]


def test_only_the_public_future_api_is_used() -> None:
    # Future's private fields and methods, read from this interpreter's Future, so a
    # field CPython adds later is covered too.
    private = {name for name in vars(Future()) if name.startswith("_")}
    private |= {name for name in vars(Future) if name.startswith("_") and not name.startswith("__")}
    assert "_state" in private  # the check below looks at the right names
    source = Path(dag_executor.__file__).read_text(encoding="utf-8")
    tree = ast.parse(source)
    touched = sorted({node.attr for node in ast.walk(tree)
                      if isinstance(node, ast.Attribute) and node.attr in private})
    imported = sorted({node.module or "" for node in ast.walk(tree)
                       if isinstance(node, ast.ImportFrom)
                       and (node.module or "").startswith("concurrent.futures.")})
    assert touched == [] and imported == []


# ---------------------------------------------------------------- retries


def flaky(failures: int) -> Callable[[], int]:
    calls = [0]

    def body() -> int:
        calls[0] += 1
        if calls[0] <= failures:
            raise ConnectionError(f"attempt {calls[0]}")
        return calls[0]

    return body


def test_retry_succeeds_within_its_budget(make: Make) -> None:
    ex = make()
    fut = ex.submit(flaky(2), retries=2)
    assert fut.result(WAIT) == 3
    finish(ex)
    stats = ex.stats()
    assert (stats.executed, stats.retried, stats.failed) == (3, 2, 0)


def test_retry_budget_exhausted_fails_with_the_last_error(make: Make) -> None:
    ex = make()
    fut = ex.submit(flaky(5), retries=2)
    dep = ex.submit(parse, depends_on=[fut])
    err = fut.exception(WAIT)
    assert isinstance(err, ConnectionError) and str(err) == "attempt 3"
    assert isinstance(dep.exception(WAIT), PrerequisiteFailed)
    finish(ex)
    assert (ex.stats().retried, ex.stats().failed, ex.stats().skipped) == (2, 1, 1)


def test_retry_reenters_the_accounting(make: Make) -> None:
    # Dependents wait for the retried attempt, and a shutdown issued while
    # the first attempt fails does not end before the retry succeeded.
    ex = make(2)
    log = Log()
    first_failing = threading.Event()
    go_on = threading.Event()
    calls = [0]

    def body() -> str:
        calls[0] += 1
        if calls[0] == 1:
            first_failing.set()
            go_on.wait(WAIT)
            raise ConnectionError("first")
        log.add("retry")
        return "ok"

    fut = ex.submit(body, retries=1)
    dep = ex.submit(log.task("dep"), depends_on=[fut])
    assert first_failing.wait(WAIT)
    ex.shutdown(wait=False)
    assert ex.phase == "draining"
    go_on.set()
    assert ex.await_termination(WAIT)
    assert fut.result(0) == "ok" and dep.done()
    assert log.events == ["retry", "dep"]
    ex.validate()


# ---------------------------------------------------------------- shutdown


def test_submit_from_outside_after_shutdown_is_refused(make: Make) -> None:
    ex = make()
    ex.shutdown(wait=False)
    with pytest.raises(RuntimeError, match="cannot submit fetch after shutdown"):
        ex.submit(fetch)
    assert ex.await_termination(WAIT)
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.submit(fetch)


def test_children_submitted_during_the_drain_run(make: Make) -> None:
    ex = make(2)
    shut = threading.Event()
    log = Log()

    def root() -> list[Future[object]]:
        assert shut.wait(WAIT)
        assert ex.phase == "draining"
        kids = [ex.submit(log.task(f"kid{k}")) for k in range(5)]
        grand = ex.submit(log.task("grand"), depends_on=kids)  # on futures not yet done
        return [*kids, grand]

    r = ex.submit(root)
    ex.shutdown(wait=False)
    shut.set()
    assert ex.await_termination(WAIT)
    assert all(f.done() for f in r.result(0))
    assert sorted(log.events) == sorted([f"kid{k}" for k in range(5)] + ["grand"])
    assert log.events[-1] == "grand"
    ex.validate()


def test_await_termination_times_out_while_work_runs(make: Make) -> None:
    ex = make()
    gate = threading.Event()
    ex.submit(gate.wait, WAIT)
    assert not ex.await_termination(0.01)  # not even shut down
    ex.shutdown(wait=False)
    assert not ex.await_termination(0.01)
    assert ex.phase == "draining"
    gate.set()
    assert ex.await_termination(WAIT)
    assert ex.phase == "terminated"


def test_shutdown_of_an_idle_executor_terminates(make: Make) -> None:
    ex = make()
    finish(ex)
    finish(ex)  # idempotent


def test_shutdown_wait_from_a_task_is_refused(make: Make) -> None:
    ex = make()
    fut = ex.submit(ex.shutdown)
    with pytest.raises(RuntimeError, match="would wait for itself: call shutdown\\(wait=False\\)"):
        fut.result(WAIT)
    assert ex.submit(ex.shutdown, wait=False).result(WAIT) is None
    assert ex.await_termination(WAIT)


def test_cancel_futures_cancels_what_has_not_started(make: Make) -> None:
    ex = make(1)
    started = threading.Event()
    gate = threading.Event()
    ran: list[str] = []

    def running() -> str:
        started.set()
        gate.wait(WAIT)
        return "finished"

    run = ex.submit(running)
    assert started.wait(WAIT)
    assert run.running() and not run.cancel()  # a running task's future cannot be cancelled
    queued = ex.submit(lambda: ran.append("queued"))
    after_running = ex.submit(lambda: ran.append("after_running"), depends_on=[run])
    after_queued = ex.submit(lambda: ran.append("after_queued"), depends_on=[queued])
    both = ex.submit(lambda: ran.append("both"), depends_on=[after_running, after_queued])
    ex.shutdown(wait=False, cancel_futures=True)
    assert queued.cancelled() and after_running.cancelled()
    for fut in (after_queued, both):
        with pytest.raises(PrerequisiteFailed, match="was cancelled") as info:
            fut.result(0)
        assert info.value.root_outcome == "cancelled"
    with pytest.raises(CancelledError):
        queued.result(0)
    gate.set()
    assert ex.await_termination(WAIT)
    assert run.result(0) == "finished"
    assert ran == []
    stats = ex.stats()
    assert (stats.cancelled, stats.skipped, stats.executed) == (2, 2, 1)
    ex.validate()


def test_cancel_futures_lets_a_pending_retry_finish(make: Make) -> None:
    ex = make(1)
    failing = threading.Event()
    go_on = threading.Event()
    calls = [0]

    def body() -> int:
        calls[0] += 1
        if calls[0] == 1:
            failing.set()
            go_on.wait(WAIT)
            raise ConnectionError("first")
        return calls[0]

    fut = ex.submit(body, retries=1)
    assert failing.wait(WAIT)
    ex.shutdown(wait=False, cancel_futures=True)  # fut is running: not cancelled
    go_on.set()
    assert ex.await_termination(WAIT)
    assert fut.result(0) == 2


# ---------------------------------------------------------------- work stealing


def test_owner_takes_its_newest_child_first(make: Make) -> None:
    ex = make(1)
    log = Log()

    def root() -> None:
        for k in range(5):
            ex.submit(log.task(f"c{k}"))

    ex.submit(root)
    finish(ex)
    assert log.events == ["c4", "c3", "c2", "c1", "c0"]


def test_idle_workers_steal_children(make: Make) -> None:
    # The children sit in the root's worker's deque; a barrier of 3 opens
    # only if two other workers took children from it.
    ex = make(4)
    barrier = threading.Barrier(3)

    def child() -> None:
        barrier.wait(WAIT)

    def root() -> list[Future[None]]:
        return [ex.submit(child) for _ in range(3)]

    for kid in ex.submit(root).result(WAIT):
        kid.result(WAIT)
    assert ex.stats().steals >= 2


def test_a_thief_takes_the_oldest_in_a_bounded_batch(make: Make) -> None:
    ex = make(3)
    stand_ins = [object() for _ in range(10)]  # _steal moves items, never looks inside
    with ex._lock:
        victim, own = ex._deques[2], ex._deques[0]
        victim.extend(stand_ins)
        first = ex._steal(0, random.Random(0))
        taken = [first, *reversed(own)]  # the order worker 0 would run them in
        # 4 at most (STEAL_BATCH), oldest first; the owner keeps its newest
        assert taken == stand_ins[:4]
        assert list(victim) == stand_ins[4:]
        small = ex._deques[1]
        own.clear()
        victim.clear()
        small.extend(stand_ins[:3])
        assert ex._steal(0, random.Random(1)) is stand_ins[0]
        assert list(own) == [stand_ins[1]] and list(small) == [stand_ins[2]]  # half, rounded up
        own.clear()
        small.clear()
        assert ex._steal(0, random.Random(2)) is None
        assert ex._steals == 6


# ---------------------------------------------------------------- exactly once, no loss


def run_roots_and_children(ex: DagExecutor, roots: int, kids: int) -> list[int]:
    runs = [0] * (roots * (kids + 1))
    lock = threading.Lock()

    def body(k: int) -> None:
        with lock:
            runs[k] += 1

    def root(r: int) -> None:
        body(r)
        for c in range(kids):
            ex.submit(body, roots + r * kids + c)

    for r in range(roots):
        ex.submit(root, r)
    finish(ex)  # right after the roots: children arrive during the drain
    return runs


@pytest.mark.parametrize("seed", range(50))
def test_stress_roots_with_children_each_run_exactly_once(make: Make, seed: int) -> None:
    ex = make(4, seed=seed)
    runs = run_roots_and_children(ex, 200, 5)
    assert runs == [1] * 1200
    stats = ex.stats()
    assert stats.submitted == stats.executed == 1200


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[tuple[list[int], int, int]], int, bool]:
    """Tasks (prerequisites among earlier ones, failures before success, retries)."""
    n = draw(st.integers(1, 25))
    tasks = []
    for i in range(n):
        deps = draw(st.lists(st.integers(0, i - 1), max_size=3)) if i else []
        failures = draw(st.sampled_from([0, 0, 0, 1, 2, 9]))
        retries = draw(st.integers(0, 2))
        tasks.append((deps, failures, retries))
    return tasks, draw(st.integers(1, 4)), draw(st.booleans())


@settings(max_examples=60, deadline=None)
@given(dags())
def test_random_dags_run_each_task_once_iff_its_prerequisites_succeeded(
    spec: tuple[list[tuple[list[int], int, int]], int, bool],
) -> None:
    tasks, workers, from_a_task = spec
    calls = [0] * len(tasks)
    lock = threading.Lock()

    def body(i: int) -> int:
        with lock:
            calls[i] += 1
            attempt = calls[i]
        if attempt <= tasks[i][1]:
            raise ConnectionError(f"task {i} attempt {attempt}")
        return i

    ex = DagExecutor(workers)
    futures: list[Future[int]] = []

    def submit_all() -> None:
        for i, (deps, _, retries) in enumerate(tasks):
            futures.append(ex.submit(body, i, depends_on=[futures[d] for d in deps],
                                     retries=retries))

    if from_a_task:
        ex.submit(submit_all)
    else:
        submit_all()
    finish(ex)
    assert len(futures) == len(tasks)

    ok: list[bool] = []
    for i, (deps, failures, retries) in enumerate(tasks):
        runnable = all(ok[d] for d in deps)
        ok.append(runnable and failures <= retries)
        expected_calls = min(failures, retries) + 1 if runnable else 0
        assert calls[i] == expected_calls, (i, tasks[i])
        fut = futures[i]
        assert fut.done()
        if ok[i]:
            assert fut.result(0) == i
        elif runnable:
            assert isinstance(fut.exception(0), ConnectionError)
        else:
            err = fut.exception(0)
            assert isinstance(err, PrerequisiteFailed)
            # submit_all has a name of its own: body's ordinals are the task indices
            names = {f"{body.__qualname__}#{d + 1}" if d else body.__qualname__
                     for d in deps if not ok[d]}
            assert err.prerequisite in names, (err, names)
    stats = ex.stats()
    assert stats.submitted == len(tasks) + from_a_task
    assert stats.executed == sum(calls) + from_a_task
    assert stats.skipped == sum(1 for i, t in enumerate(tasks)
                                if not all(ok[d] for d in t[0]))


# ---------------------------------------------------------------- validate


def test_validate_detects_a_lost_task(make: Make) -> None:
    ex = make(1)
    started, gate = threading.Event(), threading.Event()
    hold = ex.submit(lambda: (started.set(), gate.wait(WAIT)))
    dep = ex.submit(parse, depends_on=[hold])
    assert started.wait(WAIT)
    ex.validate()
    with ex._lock:
        saved = hold._dag_dependents  # type: ignore[attr-defined]
        hold._dag_dependents = None  # type: ignore[attr-defined]  # dep is now unreachable
    with pytest.raises(AssertionError, match=r"outstanding 2 != queued 0 \+ waiting 0 \+ held 1"):
        ex.validate()
    with ex._lock:
        hold._dag_dependents = saved  # type: ignore[attr-defined]
    gate.set()
    assert dep.result(WAIT) == 1


def test_validate_detects_broken_counts(make: Make) -> None:
    ex = make()
    ex.submit(fetch).result(WAIT)
    finish(ex)
    ex._submitted += 1
    with pytest.raises(AssertionError, match="submitted 2 != ok 1"):
        ex.validate()
    ex._submitted -= 1
