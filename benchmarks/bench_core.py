"""Cost of the pure scheduler core against the standard library.

(a) Validation: ``Graph.build`` (duplicates, unknown ids, cycles, stable
    topological order, adjacency) against ``graphlib.TopologicalSorter(g)
    .static_order()`` on the same random DAG of string ids (3 prerequisites
    per task).  Target: ratio <= 1.5.
(b) Execution: ``DagScheduler(tasks, max_workers=4).execute()`` on no-op tasks
    in a random DAG (2 prerequisites per task) against a plain
    ``ThreadPoolExecutor(4)`` running the same number of no-ops with no
    dependencies.  Reported twice: construction (graph validation) plus
    execute, and execute alone.  Target: ratio <= 1.3.
(c) Both at several sizes, to show linear growth (time per task flat).

Timings are the best of N runs in one process.  Run:
``python benchmarks/bench_core.py [--quick] [--repeat N]``.
"""

from __future__ import annotations

import argparse
import graphlib
import os
import platform
import random
import sys
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_dagorder import DagScheduler, Task
from pytest_dagorder.graph import Graph

VALIDATE_TARGET = 1.5
EXECUTE_TARGET = 1.3
WORKERS = 4


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def random_dag(n: int, degree: int, seed: int) -> list[tuple[str, list[str]]]:
    """``n`` tasks with ``degree`` prerequisites each (fewer for the first ones),
    given in a shuffled order so that the input is not already sorted."""
    rng = random.Random(seed)
    ids = [f"tests/test_m{i // 100}.py::test_{i}" for i in range(n)]
    pairs = [(ids[i], [ids[j] for j in rng.sample(range(i), min(degree, i))]) for i in range(n)]
    rng.shuffle(pairs)
    return pairs


def noop() -> None:
    return None


def bench_validate(n: int, repeat: int) -> tuple[int, float, float]:
    pairs = random_dag(n, 3, seed=n)
    mapping: dict[Hashable, list[str]] = dict(pairs)
    edges = sum(len(d) for _, d in pairs)
    ours = best(lambda: Graph.build(pairs), repeat)
    ref = best(lambda: list(graphlib.TopologicalSorter(mapping).static_order()), repeat)
    return edges, ours, ref


def bench_execute(n: int, repeat: int) -> tuple[int, float, float, float]:
    pairs = random_dag(n, 2, seed=n)
    tasks = [Task(t, noop, deps=d) for t, d in pairs]
    edges = sum(len(d) for _, d in pairs)

    def ours() -> None:
        results = DagScheduler(tasks, max_workers=WORKERS).execute()
        assert len(results) == n

    dag = DagScheduler(tasks, max_workers=WORKERS)

    def ours_execute_only() -> None:
        dag.execute()

    def ref() -> None:
        with ThreadPoolExecutor(WORKERS) as pool:
            for _ in range(n):
                pool.submit(noop)

    return edges, best(ours, repeat), best(ours_execute_only, repeat), best(ref, repeat)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Small sizes, fewer repeats")
    parser.add_argument("--repeat", type=int, default=None, help="Runs per timing (best of)")
    args = parser.parse_args()
    repeat = args.repeat or (2 if args.quick else 5)
    validate_n = 20_000 if args.quick else 100_000
    execute_n = 10_000 if args.quick else 50_000
    sizes = [2_000, 5_000, 10_000] if args.quick else [10_000, 20_000, 50_000, 100_000]

    print(f"Python {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} cores; best of {repeat}\n")
    missed = []

    edges, ours, ref = bench_validate(validate_n, repeat)
    ratio = ours / ref
    print(f"(a) validate {validate_n:,} nodes / {edges:,} edges\n")
    print("| | seconds | ratio | target |")
    print("|---|---:|---:|---:|")
    print(f"| graphlib static_order | {ref:.3f} | 1.00 | |")
    print(f"| Graph.build | {ours:.3f} | {ratio:.2f} | <= {VALIDATE_TARGET} |\n")
    if ratio > VALIDATE_TARGET:
        missed.append("validate")

    edges, total, execute, ref = bench_execute(execute_n, repeat)
    print(f"(b) execute {execute_n:,} no-op tasks ({edges:,} edges), {WORKERS} threads\n")
    print("| | seconds | ratio | target |")
    print("|---|---:|---:|---:|")
    print(f"| ThreadPoolExecutor, no edges | {ref:.3f} | 1.00 | |")
    print(f"| DagScheduler: construct + execute | {total:.3f} | {total / ref:.2f} "
          f"| <= {EXECUTE_TARGET} |")
    print(f"| DagScheduler: execute only | {execute:.3f} | {execute / ref:.2f} | |\n")
    if total / ref > EXECUTE_TARGET:
        missed.append("execute")

    print("(c) growth (microseconds per task)\n")
    print("| tasks | Graph.build | graphlib | ratio | DagScheduler | ThreadPoolExecutor | ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        _, v_ours, v_ref = bench_validate(n, repeat)
        _, e_total, _, e_ref = bench_execute(n, max(1, repeat // 2))
        us = 1e6 / n
        print(f"| {n:,} | {v_ours * us:.2f} | {v_ref * us:.2f} | {v_ours / v_ref:.2f} "
              f"| {e_total * us:.2f} | {e_ref * us:.2f} | {e_total / e_ref:.2f} |")
    print()
    print("targets missed: " + (", ".join(missed) if missed else "none"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
