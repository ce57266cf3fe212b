"""DagExecutor against the standard library, and its exactly-once stress test.

(a) Submit: 50,000 no-op tasks, each with ``depends_on`` two random earlier
    futures, submitted one by one to ``DagExecutor(4)`` then
    ``shutdown(wait=True)``, against a plain ``ThreadPoolExecutor(4)``
    running 50,000 no-ops.  The two alternate in one process; each side's
    best of N.  Target: ratio <= 1.5.  For context, not the target: the
    same pool holding all its futures to the end, as a DAG's submitter must
    (their garbage collection is most of the difference), and each side's
    CPU time in garbage collection.
(b) Fan-out: one task submits 400 tasks of ``time.sleep(0.002)`` on 4
    workers; wall time from the first submit to the last child's end, best
    of N.  Target: <= 1.25 x (0.8 s / 4) = 0.25 s, and steals > 0.
(c) Stress: 200 roots each submitting 5 children, ``shutdown(wait=True)``
    right after the roots; every one of the 1,200 tasks must run exactly
    once, ``validate()`` must pass, and the shutdown must end within 30 s
    (no hang); repeated ``--stress`` times (1,000 by default).

Run: ``python benchmarks/bench_executor.py [--quick] [--repeat N] [--stress N]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_dagorder import DagExecutor

SUBMIT_TARGET = 1.5
FANOUT_TARGET = 1.25 * (400 * 0.002) / 4
WORKERS = 4
#: A shutdown that takes longer than this is reported as a hang.
HANG_SECONDS = 30.0


def noop() -> None:
    return None


def random_edges(n: int, seed: int) -> list[tuple[int, ...]]:
    """For task i, the indices of two random earlier tasks (fewer for the first two)."""
    rng = random.Random(seed)
    return [tuple(rng.sample(range(i), min(2, i))) for i in range(n)]


def run_dag(edges: list[tuple[int, ...]]) -> float:
    start = time.perf_counter()
    with DagExecutor(WORKERS) as ex:
        futures: list[Future[None]] = []
        append = futures.append
        submit = ex.submit
        for deps in edges:
            append(submit(noop, depends_on=[futures[j] for j in deps]))
    elapsed = time.perf_counter() - start
    stats = ex.stats()
    assert stats.executed == len(edges), stats
    return elapsed


def run_pool(n: int, keep: bool = False) -> float:
    """``keep``: hold every future to the end, as a DAG's submitter must (their
    garbage-collection cost grows with them)."""
    start = time.perf_counter()
    kept: list[Future[None]] = []
    with ThreadPoolExecutor(WORKERS) as pool:
        submit = pool.submit
        if keep:
            append = kept.append
            for _ in range(n):
                append(submit(noop))
        else:
            for _ in range(n):
                submit(noop)
    return time.perf_counter() - start


class GcClock:
    """CPU seconds spent in garbage collection (gc callbacks), read around each run."""

    def __init__(self) -> None:
        self.total = 0.0
        self._start = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.total += time.process_time() - self._start


def bench_submit(n: int, repeat: int) -> dict[str, tuple[float, float]]:
    """Per side: the best wall time, and the mean CPU seconds in gc per run."""
    edges = random_edges(n, seed=n)
    runs: dict[str, Callable[[], float]] = {
        "pool": lambda: run_pool(n),
        "pool_kept": lambda: run_pool(n, keep=True),
        "dag": lambda: run_dag(edges),
    }
    walls: dict[str, list[float]] = {side: [] for side in runs}
    in_gc = dict.fromkeys(runs, 0.0)
    clock = GcClock()
    for _ in range(repeat):  # alternating, so all sides see the same machine
        for side, run in runs.items():
            before = clock.total
            walls[side].append(run())
            in_gc[side] += clock.total - before
    return {side: (min(walls[side]), in_gc[side] / repeat) for side in runs}


def fan_out(ex: DagExecutor) -> list[Future[None]]:
    return [ex.submit(time.sleep, 0.002) for _ in range(400)]


def bench_fanout(repeat: int) -> tuple[float, int]:
    best, steals = float("inf"), 0
    for _ in range(repeat):
        ex = DagExecutor(WORKERS)

        start = time.perf_counter()
        children = ex.submit(fan_out, ex).result(HANG_SECONDS)
        for child in children:
            child.result(HANG_SECONDS)
        elapsed = time.perf_counter() - start
        ex.shutdown()
        if elapsed < best:
            best, steals = elapsed, ex.stats().steals
    return best, steals


def stress_once(seed: int) -> tuple[str | None, int]:
    """One round: what went wrong (None when every task ran exactly once), and how
    many children were submitted while the executor drained."""
    runs = [0] * 1200
    late = [0]
    lock = threading.Lock()
    ex = DagExecutor(WORKERS, seed=seed)

    def body(k: int) -> None:
        with lock:
            runs[k] += 1

    def root(r: int) -> None:
        body(r)
        for c in range(5):
            if ex.phase == "draining":
                late[0] += 1
            ex.submit(body, 200 + r * 5 + c)

    for r in range(200):
        ex.submit(root, r)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (ex.shutdown(wait=True), done.set()), daemon=True)
    worker.start()
    if not done.wait(HANG_SECONDS):
        return f"seed {seed}: shutdown did not finish in {HANG_SECONDS} s ({ex.stats()})", 0
    ex.validate()
    wrong = [k for k, n in enumerate(runs) if n != 1]
    if wrong:
        return f"seed {seed}: tasks {wrong[:10]} ran {[runs[k] for k in wrong[:10]]} times", 0
    return None, late[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer tasks and repeats")
    parser.add_argument("--repeat", type=int, default=None, help="Runs per timing (best of)")
    parser.add_argument("--stress", type=int, default=None, help="Rounds of the stress test")
    parser.add_argument("--only", choices=["submit", "fanout", "stress"], default=None,
                        help="Run one part only")
    args = parser.parse_args()
    repeat = args.repeat or (3 if args.quick else 7)
    n = 10_000 if args.quick else 50_000
    rounds = args.stress if args.stress is not None else (50 if args.quick else 1000)
    parts: list[str] = [args.only] if args.only else ["submit", "fanout", "stress"]

    print(f"Python {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} cores; best of {repeat}\n")
    missed: list[str] = []
    checks: dict[str, Callable[[], None]] = {}

    def submit_part() -> None:
        sides = bench_submit(n, repeat)
        (ref, gc_ref), (kept, gc_kept), (ours, gc_ours) = (
            sides["pool"], sides["pool_kept"], sides["dag"])
        ratio = ours / ref
        print(f"(a) {n:,} no-op tasks, 2 random depends_on each, {WORKERS} workers\n")
        print("| | seconds | us/task | ratio | target | gc CPU s/run |")
        print("|---|---:|---:|---:|---:|---:|")
        print(f"| ThreadPoolExecutor, no edges | {ref:.3f} | {ref / n * 1e6:.1f} | 1.00 | "
              f"| {gc_ref:.3f} |")
        print(f"| ThreadPoolExecutor, futures kept | {kept:.3f} | {kept / n * 1e6:.1f} "
              f"| {kept / ref:.2f} | | {gc_kept:.3f} |")
        print(f"| DagExecutor | {ours:.3f} | {ours / n * 1e6:.1f} | {ratio:.2f} "
              f"| <= {SUBMIT_TARGET} | {gc_ours:.3f} |\n")
        if ratio > SUBMIT_TARGET:
            missed.append("submit")

    def fanout_part() -> None:
        wall, steals = bench_fanout(repeat)
        print(f"(b) one task submits 400 x sleep(2 ms), {WORKERS} workers\n")
        print("| wall (s) | target (s) | ratio to 0.2 s | steals |")
        print("|---:|---:|---:|---:|")
        print(f"| {wall:.3f} | <= {FANOUT_TARGET:.3f} | {wall / 0.2:.2f} | {steals} |\n")
        if wall > FANOUT_TARGET or steals == 0:
            missed.append("fanout")

    def stress_part() -> None:
        start = time.perf_counter()
        outcomes = [stress_once(seed) for seed in range(rounds)]
        elapsed = time.perf_counter() - start
        failures = [f for f, _ in outcomes if f]
        late = sum(n for _, n in outcomes)
        print(f"(c) stress: {rounds:,} rounds of 200 roots x 5 children, shutdown right after"
              f" the roots: {len(failures)} failed ({elapsed:.1f} s); {late:,} of"
              f" {rounds * 1000:,} children were submitted during the drain\n")
        for failure in failures[:5]:
            print("   ", failure)
        if failures:
            missed.append("stress")

    checks = {"submit": submit_part, "fanout": fanout_part, "stress": stress_part}
    for part in parts:
        checks[part]()
    print("targets missed: " + (", ".join(missed) if missed else "none"))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
