"""Disjoint sets (union-find) over tasks ``0 .. n - 1``: affinity groups and shard components.

The root of a set is always its lowest index, so a set's label (its first
task in collection order) never depends on the order of the unions, nor on
hashing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import final


@final
class DisjointSets:
    __slots__ = ("parent",)

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        """The lowest index of ``x``'s set (halving the path on the way)."""
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        # find() twice, inlined: this runs once per edge of large suites.
        parent = self.parent
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        if a < b:
            parent[b] = a
        elif b < a:
            parent[a] = b

    def join_labels(self, labels: Sequence[str | None]) -> dict[str, int]:
        """Join the tasks that share a label (None: no label); the first task of each label."""
        first: dict[str, int] = {}
        for i, label in enumerate(labels):
            if label is not None:
                self.union(i, first.setdefault(label, i))
        return first

    def roots(self) -> list[int]:
        """Per task, the lowest index of its set."""
        find = self.find
        return [find(i) for i in range(len(self.parent))]
