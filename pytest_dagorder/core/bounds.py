"""Lower bounds on a run's makespan, with and without affinity groups.

Pure: durations, edges and group labels in, seconds out; no pytest.

Without groups no schedule on N workers beats max(C, W/N), C the longest
duration-weighted chain, W the sum of durations.  Nor does it beat the
*staggered* bound, which counts when work can happen at all: no test starts
before its longest chain of prerequisites can end (its head h), so after
any time t at least min(d, h + d - t) of each test (if positive) is still to
run, and the makespan is at least t plus that work over N (the same from
the end, with each test's longest chain of dependents).  Where a suite
opens or closes with a chain that leaves workers idle, this is the tighter
of the two; it never exceeds what the best schedule takes.  An affinity group runs on
one worker, contiguously, once every prerequisite it has outside itself
ended, so with groups a tighter bound holds: a group starts no sooner than
its last outside prerequisite can end, it ends no sooner than that start
plus the sum of its members, and each member ends no sooner than that start
plus its own chain inside the group.  The difference between the two bounds
is what the grouping constraint costs at least, whatever the scheduler does.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Bounds:
    """Seconds: the work, the critical path with and without groups, the
    staggered bound (see the module's docstring); and which groups (label,
    members, seconds) lie on the grouped critical path, in order."""

    work: float
    critical: float
    grouped_critical: float
    workers: int
    groups_on_path: tuple[tuple[Hashable, int, float], ...] = ()
    staggered: float = 0.0

    @property
    def simple(self) -> float:
        """max(C, W/N)."""
        return max(self.critical, self.work / self.workers) if self.workers else 0.0

    @property
    def bound(self) -> float:
        """The tightest bound without groups."""
        return max(self.simple, self.staggered) if self.workers else 0.0

    @property
    def grouped_bound(self) -> float:
        return max(self.grouped_critical, self.bound) if self.workers else 0.0

    @property
    def cost(self) -> float:
        """How much the groups raise the lower bound (0: they cost nothing unavoidable)."""
        return max(0.0, self.grouped_bound - self.bound)


def _topo(nodes: Sequence[Hashable], preds: Mapping[Hashable, Sequence[Hashable]]
          ) -> tuple[list[Hashable], list[Hashable]]:
    """Kahn's order of ``nodes`` (ties by the order given), and the nodes left on cycles."""
    indeg = {u: 0 for u in nodes}
    succs: dict[Hashable, list[Hashable]] = {}
    for u in nodes:
        for p in preds.get(u, ()):
            if p in indeg:
                indeg[u] += 1
                succs.setdefault(p, []).append(u)
    ready = [u for u in nodes if not indeg[u]]
    order: list[Hashable] = []
    k = 0
    while k < len(ready):
        u = ready[k]
        k += 1
        order.append(u)
        for d in succs.get(u, ()):
            indeg[d] -= 1
            if not indeg[d]:
                ready.append(d)
    placed = set(order)
    return order, [u for u in nodes if u not in placed]


def bounds(durations: Mapping[K, float], edges: Iterable[tuple[K, K]],
           groups: Mapping[K, Hashable], workers: int) -> Bounds:
    """The bounds for tasks ``durations`` (those that ran), ``edges`` (prerequisite,
    dependent) among them, ``groups`` (task -> label; absent: free) on ``workers``.

    Groups whose outside prerequisites form a cycle between groups could
    never have run as groups (the scheduler dissolves them): they count as
    free tasks here too.
    """
    took: dict[Hashable, float] = {t: s for t, s in durations.items()}
    tasks: list[Hashable] = list(took)
    preds: dict[Hashable, list[Hashable]] = {}
    for p, d in edges:
        if p in took and d in took and p != d:
            preds.setdefault(d, []).append(p)
    order, _ = _topo(tasks, preds)
    fin: dict[Hashable, float] = {}
    for t in order:
        fin[t] = took[t] + max((fin[p] for p in preds.get(t, ()) if p in fin), default=0.0)
    critical = max(fin.values(), default=0.0)
    work = sum(took.values())
    staggered = 0.0
    if workers:
        head = {t: fin[t] - took[t] for t in order}
        tail: dict[Hashable, float] = dict.fromkeys(order, 0.0)
        for t in reversed(order):
            for pre in preds.get(t, ()):
                if pre in tail:
                    tail[pre] = max(tail[pre], took[t] + tail[t])
        staggered = max(_staggered(head, took, workers), _staggered(tail, took, workers))
    label: dict[Hashable, Hashable] = {t: g for t, g in groups.items()
                                       if t in took and g is not None}
    while True:
        grouped = _grouped(tasks, order, preds, took, label)
        if grouped is not None:
            g_crit, on_path = grouped
            break
        # A cycle between groups: dissolve the groups on it and try again.
        label = _dissolve(tasks, preds, label)
    return Bounds(work, critical, max(g_crit, critical), workers, on_path, staggered)


def _staggered(release: Mapping[Hashable, float], took: Mapping[Hashable, float],
               workers: int) -> float:
    """max over t of t + (work that cannot run before t) / workers, each task
    starting no sooner than ``release``; t need only be a release or an end.

    One sweep over t: tasks released before t move to ``active`` (a heap of
    their ends) and leave it once they could have ended; each still active
    contributes its end - t, each not yet released its whole duration.
    """
    tasks = sorted(release, key=release.__getitem__)
    points = sorted({*release.values(), *(release[t] + took[t] for t in tasks)})
    later = sum(took[t] for t in tasks)  # durations of tasks released at or after t
    ends: list[float] = []
    ends_sum = 0.0
    k = 0
    best = 0.0
    for at in points:
        while k < len(tasks) and release[tasks[k]] < at:
            t = tasks[k]
            k += 1
            later -= took[t]
            heapq.heappush(ends, release[t] + took[t])
            ends_sum += release[t] + took[t]
        while ends and ends[0] <= at:
            ends_sum -= heapq.heappop(ends)
        best = max(best, at + (later + ends_sum - len(ends) * at) / workers)
    return best


#: A node of the graph with each group contracted: ("task", task) or ("group", label).
Node = tuple[str, Hashable]


def _node(t: Hashable, label: Mapping[Hashable, Hashable]) -> Node:
    g = label.get(t)
    return ("task", t) if g is None else ("group", g)


def _contracted(tasks: Sequence[Hashable], preds: Mapping[Hashable, Sequence[Hashable]],
                label: Mapping[Hashable, Hashable]
                ) -> tuple[list[Hashable], dict[Hashable, list[Hashable]]]:
    """The graph with each group contracted to one node: its nodes, and their predecessors."""
    cpreds: dict[Hashable, list[Hashable]] = {}
    nodes: dict[Hashable, None] = {}
    for t in tasks:
        a = _node(t, label)
        nodes[a] = None
        for p in preds.get(t, ()):
            b = _node(p, label)
            if a != b:
                cpreds.setdefault(a, []).append(b)
    return list(nodes), cpreds


def _dissolve(tasks: Sequence[Hashable], preds: Mapping[Hashable, Sequence[Hashable]],
              label: Mapping[Hashable, Hashable]) -> dict[Hashable, Hashable]:
    _, left = _topo(*_contracted(tasks, preds, label))
    bad = {n[1] for n in left if isinstance(n, tuple) and n[0] == "group"}
    return {t: g for t, g in label.items() if g not in bad}


def _grouped(tasks: Sequence[Hashable], order: Sequence[Hashable],
             preds: Mapping[Hashable, Sequence[Hashable]], durations: Mapping[Hashable, float],
             label: Mapping[Hashable, Hashable]
             ) -> tuple[float, tuple[tuple[Hashable, int, float], ...]] | None:
    """The grouped critical path and the groups on it; None if groups form a cycle."""
    members: dict[Hashable, list[Hashable]] = {}
    for t in order:  # each group's members in an order their inside edges respect
        if t in label:
            members.setdefault(label[t], []).append(t)
    corder, left = _topo(*_contracted(tasks, preds, label))
    if left:
        return None
    fin: dict[Hashable, float] = {}
    # Where each finish time comes from: a task, or a group's start.
    back: dict[Hashable, Hashable | None] = {}
    ends: dict[Hashable, float] = {}  # group -> its end
    start_from: dict[Hashable, Hashable | None] = {}  # group -> task its start waits on
    for node in corder:
        kind, key = cast(Node, node)
        if kind == "task":
            via = max((p for p in preds.get(key, ())), key=fin.__getitem__, default=None)
            fin[key] = durations[key] + (fin[via] if via is not None else 0.0)
            back[key] = via
            continue
        inside = set(members[key])
        outside = [p for m in members[key] for p in preds.get(m, ()) if p not in inside]
        via = max(outside, key=fin.__getitem__, default=None)
        start = fin[via] if via is not None else 0.0
        start_from[key] = via
        ends[key] = start + sum(durations[m] for m in members[key])
        for m in members[key]:
            prior = [p for p in preds.get(m, ()) if p in inside]
            best = max(prior, key=fin.__getitem__, default=None)
            if best is not None and fin[best] > start:
                fin[m], back[m] = durations[m] + fin[best], best
            else:
                fin[m], back[m] = durations[m] + start, via
    crit = max([*fin.values(), *ends.values()], default=0.0)
    # Walk the path back from where it ends, noting each group passed.
    path_groups: list[Hashable] = []
    end_group = max(ends, key=ends.__getitem__, default=None)
    cur: Hashable | None
    if end_group is not None and ends[end_group] >= max(fin.values(), default=0.0):
        path_groups.append(end_group)
        cur = start_from[end_group]
    else:
        cur = max(fin, key=fin.__getitem__, default=None)
    while cur is not None:
        g = label.get(cur)
        if g is not None and (not path_groups or path_groups[-1] != g):
            path_groups.append(g)
        cur = back.get(cur)
    path_groups.reverse()
    on_path = tuple((g, len(members[g]), sum(durations[m] for m in members[g]))
                    for g in path_groups)
    return crit, on_path
