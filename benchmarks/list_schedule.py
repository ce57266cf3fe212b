"""How loose max(C, W/N) is for one run: an ideal greedy schedule of its graph.

Reads a run's graph (``--dag-graph=g.json``) and timeline
(``--dag-timeline=t.json``; each test's duration is its time in the
timeline) and prints the critical path C, the work per worker W/N, the
run's makespan, and the makespan of a list schedule on N ideal workers (no
dispatch cost, durations known exactly; whenever a worker is free it takes
the ready test with the longest remaining path, ties by collection order).
Such a schedule is not optimal either, but where it already exceeds
max(C, W/N) the gap is in the graph, not in the plugin.

Run: ``python benchmarks/list_schedule.py g.json t.json [-n 2]``.
"""

from __future__ import annotations

import argparse
import heapq
import json
from pathlib import Path


def load(graph_path: Path, timeline_path: Path) -> tuple[list[str], dict[str, list[str]],
                                                         dict[str, float], float]:
    graph = json.loads(graph_path.read_text(encoding="utf-8"))
    timeline = json.loads(timeline_path.read_text(encoding="utf-8"))
    ids = [node["id"] for node in graph["nodes"]]
    after: dict[str, list[str]] = {i: [] for i in ids}
    for edge in graph["edges"]:
        after[edge["from"]].append(edge["to"])
    spans = [e for e in timeline["traceEvents"] if e.get("ph") == "X"]
    seconds: dict[str, float] = {i: 0.0 for i in ids}
    for e in spans:
        if e["name"] in seconds:
            seconds[e["name"]] += e["dur"] / 1e6
    makespan = (max(e["ts"] + e["dur"] for e in spans) - min(e["ts"] for e in spans)) / 1e6
    return ids, after, seconds, makespan


def list_schedule(ids: list[str], after: dict[str, list[str]], seconds: dict[str, float],
                  workers: int) -> tuple[float, float]:
    """(critical path, makespan of the greedy longest-remaining-path schedule)."""
    position = {i: k for k, i in enumerate(ids)}
    waiting = {i: 0 for i in ids}
    for i in ids:
        for j in after[i]:
            waiting[j] += 1
    order: list[str] = []
    stack = [i for i in ids if waiting[i] == 0]
    left = dict(waiting)
    while stack:
        i = stack.pop()
        order.append(i)
        for j in after[i]:
            left[j] -= 1
            if left[j] == 0:
                stack.append(j)
    tail: dict[str, float] = {}
    for i in reversed(order):
        tail[i] = seconds[i] + max((tail[j] for j in after[i]), default=0.0)
    ready = [(-tail[i], position[i], i) for i in ids if waiting[i] == 0]
    heapq.heapify(ready)
    running: list[tuple[float, int, str]] = []
    now, free = 0.0, workers
    while ready or running:
        while ready and free:
            _, k, i = heapq.heappop(ready)
            heapq.heappush(running, (now + seconds[i], k, i))
            free -= 1
        now, _, i = heapq.heappop(running)
        free += 1
        for j in after[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, (-tail[j], position[j], j))
    return max(tail.values(), default=0.0), now


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("graph", type=Path)
    ap.add_argument("timeline", type=Path)
    ap.add_argument("-n", type=int, default=2)
    args = ap.parse_args()
    ids, after, seconds, makespan = load(args.graph, args.timeline)
    critical, greedy = list_schedule(ids, after, seconds, args.n)
    bound = max(critical, sum(seconds.values()) / args.n)
    print(f"C {critical:.2f} s, W/N {sum(seconds.values()) / args.n:.2f} s: bound {bound:.2f} s")
    print(f"greedy list schedule {greedy:.2f} s ({greedy / bound:.2f} x the bound)")
    print(f"the run {makespan:.2f} s ({makespan / bound:.2f} x the bound, "
          f"{makespan / greedy:.2f} x the greedy schedule)")


if __name__ == "__main__":
    main()
