"""Splitting a suite into N parts for N CI jobs, without cutting a dependency.

Pure (no pytest).  A part must give, for each of its tests, the outcome the
whole suite gives; so a test travels with everything it needs in one
process: its prerequisites (``requires`` and ``after`` edges, transitively),
the tests sharing a label with it (a group the user named, a module whose tests
call pytest-dependency's runtime ``depends()``).  Those are the connected
components of the undirected graph of edges and labels; each one goes to one
part whole.

Every job computes the partition on its own, so it must come out the same on
every machine: it depends only on the node ids, the edges, the labels and
the recorded durations, never on the collection order (``-p randomly``
shuffles it), on hashing (``PYTHONHASHSEED``) or on ``-n``.  Components are
named by their smallest node id; every sum runs in node-id order (float
addition is not associative); every tie is broken by node id, then by part
number.

Balance: longest processing time first (each component, heaviest first,
into the currently lightest part), then moves and swaps of single components
between the heaviest part and the others while that lowers the heaviest
part.  Tests without a recorded duration count as the mean of those with
one (all equal when none has one: the parts then balance by count).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import final

from .disjoint import DisjointSets

#: Weight of a test when no test of the run has a recorded duration.
UNKNOWN = 1.0
#: Bound on improvement rounds after the greedy pass (each lowers the
#: heaviest part strictly, so the loop ends anyway; this keeps it short).
MAX_ROUNDS = 1000
#: The improvement rounds stop once the heaviest part is within this fraction
#: of the bound no split can beat, max(total / N, heaviest component): closer
#: is noise next to how much a test's duration varies from run to run.
CLOSE_ENOUGH = 0.002


class ShardSpecError(ValueError):
    """A part was not named ``K/N`` with ``1 <= K <= N``; ``spec`` is the value
    (the glue words it for the option that gave it)."""

    def __init__(self, spec: str) -> None:
        super().__init__(f"shard {spec!r} is not valid; write K/N with N a whole "
                         "number of at least 1 and K from 1 to N, e.g. 2/4")
        self.spec = spec


def parse_spec(spec: str) -> tuple[int, int]:
    """``"2/4"`` -> ``(2, 4)``; :class:`ShardSpecError` naming ``spec`` otherwise."""
    k, sep, n = spec.strip().partition("/")
    if not (sep and k.strip().isdigit() and n.strip().isdigit()):
        raise ShardSpecError(spec)
    part, parts = int(k), int(n)
    if not 1 <= part <= parts:
        raise ShardSpecError(spec)
    return part, parts


@final
@dataclass(frozen=True)
class Component:
    """Tests that must share a part: indices in ascending order, their weight."""

    members: tuple[int, ...]
    weight: float
    #: The smallest node id among the members: the component's name and tie-break.
    key: str


@final
@dataclass(frozen=True)
class Partition:
    """``part[i]``: the 0-based part of task ``i``; ``loads``: each part's weight."""

    part: tuple[int, ...]
    loads: tuple[float, ...]
    components: tuple[Component, ...]

    def members(self, k: int) -> list[int]:
        """Tasks of part ``k`` (0-based), in index order."""
        return [i for i, p in enumerate(self.part) if p == k]

    @property
    def total(self) -> float:
        return sum(c.weight for c in self.components)

    @property
    def largest(self) -> Component | None:
        """The heaviest component (ties: the smallest key)."""
        return min(self.components, key=lambda c: (-c.weight, c.key), default=None)


def weights(ids: Sequence[str], recorded: Mapping[str, float]) -> list[float]:
    """Per task, its recorded seconds, else the mean of the recorded ones."""
    known = [recorded[nid] for nid in ids if nid in recorded]
    mean = _sum(known) / len(known) if known else UNKNOWN
    return [recorded.get(nid, mean) for nid in ids]


def components(
    ids: Sequence[str],
    requires: Sequence[Sequence[int]],
    after: Sequence[Sequence[int]],
    labels: Sequence[str | None] = (),
    durations: Sequence[float] | None = None,
) -> list[Component]:
    """The connected components over tasks ``0 .. len(ids) - 1``.

    Edges to indices past ``len(ids)`` (prerequisites outside the run) join
    nothing: they are settled alike in every part.  Sorted heaviest first,
    ties by key.
    """
    n = len(ids)
    sets = DisjointSets(n)
    union = sets.union
    for i in range(n):
        for p in (*requires[i], *after[i]):
            if p < n:
                union(i, p)
    sets.join_labels(labels)
    groups: dict[int, list[int]] = {}
    for i, root in enumerate(sets.roots()):
        groups.setdefault(root, []).append(i)
    w = durations if durations is not None else [UNKNOWN] * n
    out = []
    for members in groups.values():
        # fsum is exact, so the weight does not depend on the members' order.
        out.append(Component(tuple(members), _sum([w[i] for i in members]),
                             min(ids[i] for i in members)))
    out.sort(key=lambda c: (-c.weight, c.key))
    return out


def partition(
    ids: Sequence[str],
    requires: Sequence[Sequence[int]],
    after: Sequence[Sequence[int]],
    parts: int,
    *,
    labels: Sequence[str | None] = (),
    recorded: Mapping[str, float] | None = None,
) -> Partition:
    """Split tasks into ``parts`` parts, each component whole, balanced by weight."""
    if parts < 1:
        raise ValueError(f"parts must be at least 1, not {parts}")
    w = weights(ids, recorded or {})
    comps = components(ids, requires, after, labels, w)
    assigned = _greedy(comps, parts)
    _improve(comps, assigned, parts)
    part = [0] * len(ids)
    for c, k in zip(comps, assigned, strict=True):
        for i in c.members:
            part[i] = k
    return Partition(tuple(part), tuple(_loads(comps, assigned, parts)), tuple(comps))


def _greedy(comps: Sequence[Component], parts: int) -> list[int]:
    """Longest first into the lightest part (ties: the lowest part number)."""
    heap = [(0.0, k) for k in range(parts)]
    out = []
    for c in comps:
        load, k = heapq.heappop(heap)
        out.append(k)
        heapq.heappush(heap, (load + c.weight, k))
    return out


def _loads(comps: Sequence[Component], assigned: Sequence[int], parts: int) -> list[float]:
    """Each part's weight, summed in component order (the same everywhere)."""
    loads = [0.0] * parts
    for c, k in zip(comps, assigned, strict=True):
        loads[k] += c.weight
    return loads


def _improve(comps: Sequence[Component], assigned: list[int], parts: int) -> None:
    """Move or swap single components out of the heaviest part while it gets lighter.

    Greedy leaves the heaviest part over the ideal by up to its last
    component; a move or a swap usually closes that.  Each step lowers the
    heaviest part's load strictly and raises no other part to the old
    maximum, so the maximum only falls.  Candidates are tried in a fixed
    order (component order, then part number): deterministic.  For a swap,
    only the partner closest to the ideal weight is looked at (a bisection),
    so a round costs O(C log C), not O(C^2), on suites of many small tests.
    """
    if parts < 2 or len(comps) < 2:
        return
    floor = max(_sum(c.weight for c in comps) / parts, comps[0].weight)
    for _ in range(MAX_ROUNDS):
        loads = _loads(comps, assigned, parts)
        top = max(range(parts), key=lambda k: (loads[k], -k))
        if loads[top] <= floor * (1 + CLOSE_ENOUGH):
            return
        by_part: list[list[int]] = [[] for _ in range(parts)]
        for j, k in enumerate(assigned):
            by_part[k].append(j)
        best: tuple[float, int, int, int] | None = None  # (pair's new max, comp, part, swap)
        for other in range(parts):
            if other == top:
                continue
            gap = loads[top] - loads[other]
            # Weights ascending (component order is descending, ties by key).
            theirs = by_part[other][::-1]
            tw = [comps[s].weight for s in theirs]
            for j in by_part[top]:
                wj = comps[j].weight
                if 0 < wj < gap:
                    new = max(loads[top] - wj, loads[other] + wj)
                    if best is None or new < best[0]:
                        best = (new, j, other, -1)
                at = bisect.bisect_left(tw, wj - gap / 2)
                for s_pos in (at - 1, at):
                    if 0 <= s_pos < len(theirs):
                        d = wj - tw[s_pos]
                        if 0 < d < gap:
                            new = max(loads[top] - d, loads[other] + d)
                            if best is None or new < best[0]:
                                best = (new, j, other, theirs[s_pos])
        if best is None or best[0] >= loads[top] * (1 - 1e-12):
            return
        _, j, other, s = best
        assigned[j] = other
        if s >= 0:
            assigned[s] = top


def _sum(values: Iterable[float]) -> float:
    """A float sum that does not depend on the order of its terms (exactly rounded)."""
    return math.fsum(values)
