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

(d) ``--ab OTHER``: this checkout against another one (e.g. ``git worktree
    add /tmp/base <commit>``), in CPU seconds, each side in its own process,
    the sides alternating ``--rounds`` times; best and median per side.
    Measures ``Graph.build`` (100,000 tasks), the scheduler driven directly
    on 50,000 tasks and 4 workers (priority heap only, local queues,
    affinity groups of 100) and ``DagScheduler.execute()``.  CPU time and
    alternation make it usable on a shared machine, where the wall-clock
    figures above move from run to run by more than a few percent.
"""

from __future__ import annotations

import argparse
import graphlib
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_dagorder import DagScheduler, Task
from pytest_dagorder.core.graph import Graph

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


# Run in a fresh interpreter with the checkout to measure first on sys.path, so
# that the other side may be any commit (it needs no copy of this script).
_MEASURE = """
import json, random, sys, time
sys.path.insert(0, sys.argv[1])
from pytest_dagorder import DagScheduler, Task
from pytest_dagorder.core.graph import Graph
try:
    from pytest_dagorder.core.state_machine import StateMachine
except ImportError:  # a commit from before the rename
    from pytest_dagorder.core.scheduler import Scheduler as StateMachine

def dag(n, degree, seed):
    rng = random.Random(seed)
    ids = [f"tests/test_m{i // 100}.py::test_{i}" for i in range(n)]
    pairs = [(ids[i], [ids[j] for j in rng.sample(range(i), min(degree, i))]) for i in range(n)]
    rng.shuffle(pairs)
    return pairs

def cpu(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)

pairs = dag(50_000, 2, 50_000)
graph = Graph.build(pairs)
graph.critical_path()
modules = [str(t).split("::")[0] for t in graph.ids]

try:
    from pytest_dagorder.core.state_machine import Setup
except ImportError:  # a commit from before the settings record
    Setup = None

def drive(**kw):
    s = StateMachine(graph, **kw) if Setup is None else StateMachine(graph, Setup(**kw))
    for w in range(4):
        s.add_worker(w)
    running = []
    while not s.done:
        for w in range(4):
            running.extend(s.take(w))
        s.finished(running.pop(0), "passed")

validate = dag(100_000, 3, 100_000)
runner = DagScheduler([Task(t, lambda: None, deps=d) for t, d in pairs], max_workers=4)
print(json.dumps({
    "Graph.build 100k": cpu(lambda: Graph.build(validate), 3),
    "StateMachine, heap only": cpu(lambda: drive(locality=False), 3),
    "StateMachine, local queues": cpu(lambda: drive(), 3),
    "StateMachine, affinity groups": cpu(lambda: drive(groups=modules), 3),
    "DagScheduler.execute": cpu(runner.execute, 3),
}))
"""


def ab(other: str, rounds: int) -> int:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sides = {"other": os.path.abspath(other), "this": here}
    runs: dict[str, dict[str, list[float]]] = {side: {} for side in sides}
    for _ in range(rounds):
        for side, repo in sides.items():
            out = subprocess.run([sys.executable, "-c", _MEASURE, repo], check=True,
                                 capture_output=True, text=True).stdout
            for name, secs in json.loads(out).items():
                runs[side].setdefault(name, []).append(secs)
    print(f"(d) CPU seconds, {rounds} alternating rounds; other = {sides['other']}\n")
    print("| | other best | this best | ratio | other median | this median | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in runs["other"]:
        a, b = runs["other"][name], runs["this"][name]
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {name} | {min(a):.3f} | {min(b):.3f} | {min(b) / min(a):.2f} "
              f"| {ma:.3f} | {mb:.3f} | {mb / ma:.2f} |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Small sizes, fewer repeats")
    parser.add_argument("--repeat", type=int, default=None, help="Runs per timing (best of)")
    parser.add_argument("--ab", metavar="OTHER", help="Compare with another checkout (CPU time)")
    parser.add_argument("--rounds", type=int, default=6, help="Alternating rounds for --ab")
    args = parser.parse_args()
    if args.ab:
        return ab(args.ab, args.rounds)
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
