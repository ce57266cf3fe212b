"""core/disjoint.py: the sets are the connected components, each named by its lowest index."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from pytest_dagorder.core.disjoint import DisjointSets

PAIRS = st.integers(1, 30).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=40)))


def lowest_in_component(n: int, pairs: list[tuple[int, int]]) -> list[int]:
    """By search over the edges, independently of union-find."""
    adjacent: dict[int, set[int]] = {i: set() for i in range(n)}
    for a, b in pairs:
        adjacent[a].add(b)
        adjacent[b].add(a)
    out = [0] * n
    for i in range(n):
        seen, todo = {i}, [i]
        while todo:
            for j in adjacent[todo.pop()] - seen:
                seen.add(j)
                todo.append(j)
        out[i] = min(seen)
    return out


@given(PAIRS, st.randoms())
def test_roots_are_the_lowest_index_of_each_component_in_any_union_order(
        case: tuple[int, list[tuple[int, int]]], rnd: random.Random) -> None:
    n, pairs = case
    want = lowest_in_component(n, pairs)
    for order in (pairs, rnd.sample(pairs, len(pairs))):
        sets = DisjointSets(n)
        for a, b in order:
            sets.union(a, b)
        assert sets.roots() == want
        assert [sets.find(i) for i in range(n)] == want


def test_labels_join_their_tasks_and_name_each_labels_first_task() -> None:
    sets = DisjointSets(5)
    first = sets.join_labels(["g", None, "h", "g", "h"])
    assert first == {"g": 0, "h": 2}
    assert sets.roots() == [0, 1, 2, 0, 2]
