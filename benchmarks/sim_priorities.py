"""How far ranking by test counts can get on random DAGs, with no xdist in the way.

Replays the random DAGs of ``bench_xdist.py`` (seeds 1..N) through the
scheduler core as an event simulation: 4 workers, one test in flight per
worker (the xdist adapter's policy for tests that are not short), and a
fixed dispatch cost per test (the round trip from a test's end to the next
test's start on the same worker).  Reports makespan / max(critical path,
work / 4) when ready tests are ranked by the number of tests on their
longest remaining path (a first run: nothing recorded) and by their
durations (later runs: recorded in pytest's cache).

Run: ``python benchmarks/sim_priorities.py [--dags 40] [--costs 0,2.4]``
(dispatch costs in milliseconds).
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_xdist import lower_bound, shape  # this directory (run as a script)

from pytest_dagorder.core.graph import Graph
from pytest_dagorder.core.state_machine import Setup, StateMachine

Tests = list[tuple[str, float, list[str]]]


def bound(tests: Tests, n: int) -> float:
    return lower_bound(tests, {name: secs for name, secs, _ in tests}, n)


def makespan(tests: Tests, n: int, known: bool, cost: float) -> float:
    """Simulated makespan; ``known``: the core ranks by the real durations."""
    pairs = [(t, deps) for t, _, deps in tests]
    graph = Graph.build(pairs, durations={t: s for t, s, _ in tests} if known else None)
    sched = StateMachine(graph, Setup(locality=False))
    secs = [s for _, s, _ in tests]
    for w in range(n):
        sched.add_worker(w)
    now, running, idle = 0.0, [], list(range(n))
    while not sched.done:
        for w in sorted(idle):
            got = sched.take(w, 1)
            if got:
                idle.remove(w)
                heapq.heappush(running, (now + cost + secs[got[0]], w, got[0]))
        now, w, i = heapq.heappop(running)
        sched.finished(i, "passed")
        idle.append(w)
    return now


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dags", type=int, default=40)
    ap.add_argument("--costs", default="0,2.4", help="Dispatch costs in ms, comma-separated")
    ap.add_argument("-n", type=int, default=4)
    opts = ap.parse_args()
    dags = [shape("random", random.Random(seed)) for seed in range(1, opts.dags + 1)]
    print(f"{opts.dags} random DAGs (seeds 1..{opts.dags}), {opts.n} workers")
    print("| dispatch cost (ms) | ranked by | seed 1 | mean | max | DAGs over 1.05 |")
    print("|---|---|---|---|---|---|")
    for cost_ms in (float(c) for c in opts.costs.split(",")):
        for known, label in ((False, "test counts"), (True, "durations")):
            ratios = [makespan(t, opts.n, known, cost_ms / 1000) / bound(t, opts.n) for t in dags]
            over = sum(r > 1.05 for r in ratios)
            print(f"| {cost_ms:g} | {label} | {ratios[0]:.3f} | {statistics.mean(ratios):.3f} "
                  f"| {max(ratios):.3f} | {over}/{len(ratios)} |")


if __name__ == "__main__":
    main()
