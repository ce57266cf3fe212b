"""The searches behind ``--dag-find-missing``, over plain values (core/missing.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dagorder.core.missing import (
    NotReproducible,
    SearchStopped,
    Touches,
    conflict_candidates,
    implied,
    needed,
    ordered,
    resource_name,
)


class Oracle:
    """A probe: the test passes when ``rule(subset)``; counts probes and checks each subset."""

    def __init__(self, size: int, rule: object) -> None:
        self.size = size
        self.rule = rule
        self.calls = 0
        self.rounds = 0

    def __call__(self, subsets: Sequence[Sequence[int]]) -> list[bool]:
        self.rounds += 1
        out = []
        for s in subsets:
            assert list(s) == sorted(set(s)), s  # the serial order, each test once
            assert all(0 <= k < self.size for k in s), s
            self.calls += 1
            out.append(bool(self.rule(frozenset(s))))  # type: ignore[operator]
        return out


def all_of(needs: set[int]) -> Oracle:
    return Oracle(0, lambda s: needs <= s)


@pytest.mark.parametrize(("size", "needs"), [
    (1, {0}),
    (10, {9}),
    (10, {0}),
    (300, {17}),
    (300, {3, 150, 299}),
    (64, set(range(0, 64, 8))),
])
@pytest.mark.parametrize("width", [1, 3])
def test_a_test_that_needs_a_fixed_set_gets_exactly_that_set(
        size: int, needs: set[int], width: int) -> None:
    probe = Oracle(size, lambda s: needs <= s)
    assert needed(size, probe, width=width) == sorted(needs)


def test_one_needed_test_costs_about_log2_of_the_prefix() -> None:
    probe = Oracle(300, lambda s: 217 in s)
    assert needed(300, probe) == [217]
    assert probe.calls <= math.ceil(math.log2(300)) + 2


def test_wider_searches_take_fewer_rounds() -> None:
    narrow, wide = Oracle(300, lambda s: 17 in s), Oracle(300, lambda s: 17 in s)
    assert needed(300, narrow, width=1) == needed(300, wide, width=4) == [17]
    assert wide.rounds < narrow.rounds


def test_a_test_that_passes_alone_needs_nothing() -> None:
    probe = Oracle(50, lambda s: True)
    assert needed(50, probe, known_failing_alone=False) == []
    assert probe.calls == 1


def test_either_of_two_providers_gives_one_of_them() -> None:
    """Two earlier tests write the same file: either will do, and one is named."""
    probe = Oracle(20, lambda s: 4 in s or 12 in s)
    assert needed(20, probe) in ([4], [12])


def test_a_prerequisite_that_needs_its_own_prerequisite_comes_with_it() -> None:
    # 9 passes only after 3; the test needs 9 to have passed.
    probe = Oracle(20, lambda s: 9 in s and 3 in s)
    assert needed(20, probe) == [3, 9]


def test_a_probe_may_stop_the_search() -> None:
    def stop(subsets: Sequence[Sequence[int]]) -> list[bool]:
        raise SearchStopped

    with pytest.raises(SearchStopped):
        needed(10, stop)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_the_result_is_one_minimal_and_passes(data: st.DataObject) -> None:
    """For any monotone rule (an OR of ANDs), the result passes and no test can go."""
    size = data.draw(st.integers(1, 60))
    clauses = data.draw(st.lists(
        st.frozensets(st.integers(0, size - 1), min_size=1, max_size=4), min_size=1,
        max_size=3))
    width = data.draw(st.integers(1, 4))

    def rule(s: frozenset[int]) -> bool:
        return any(c <= s for c in clauses)

    probe = Oracle(size, rule)
    found = needed(size, probe, width=width, known_failing_alone=False)
    assert rule(frozenset(found))
    if found:
        assert not rule(frozenset())
    for k in found:
        assert not rule(frozenset(found) - {k}), (found, clauses)
    # Deterministic: the same answers give the same result.
    assert needed(size, Oracle(size, rule), width=width, known_failing_alone=False) == found


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 200), st.data())
def test_a_fixed_set_is_found_exactly_whatever_its_place(size: int, data: st.DataObject) -> None:
    needs = data.draw(st.frozensets(st.integers(0, size - 1), min_size=1, max_size=5))
    probe = Oracle(size, lambda s: needs <= s)
    width = data.draw(st.integers(1, 4))
    assert needed(size, probe, width=width) == sorted(needs)
    # m findings cost about m searches of the prefix (a round each step), plus
    # the minimality check.
    steps = math.ceil(math.log(size, width + 1)) + 2
    assert probe.rounds <= len(needs) * steps + len(needs)
    assert probe.calls <= width * len(needs) * steps + len(needs)


# -- what the findings imply ------------------------------------------------------------


def test_an_edge_another_edge_implies_is_dropped() -> None:
    # 2 needs 0 and 1; 1 needs 0: 2 -> 0 follows from 2 -> 1 -> 0.
    assert implied({2: [0, 1], 1: [0]}, [[], [], []]) == {2: [1], 1: [0]}


def test_a_declared_edge_implies_too() -> None:
    assert implied({2: [0, 1]}, [[], [0], []]) == {2: [1]}


def test_an_edge_kept_for_its_process_state_stays() -> None:
    assert implied({2: [0, 1], 1: [0]}, [[], [], []],
                   keep=lambda t, p: t == 2) == {2: [0, 1], 1: [0]}


def test_independent_edges_all_stay() -> None:
    assert implied({3: [0, 1]}, [[], [], [], []]) == {3: [0, 1]}


def test_pairs_that_share_a_written_path_and_no_edge_are_candidates() -> None:
    touches = [
        Touches(writes=frozenset({"/r/out.txt"})),
        Touches(writes=frozenset({"/r/out.txt"})),
        Touches(writes=frozenset({"/r/out.txt"})),
        Touches(reads=frozenset({"/r/out.txt", "/r/other"})),
        Touches(writes=frozenset({"/r/db"}), reads=frozenset({"/r/other"})),
        Touches(writes=frozenset({"/r/db"})),
    ]
    linked = ordered([[], [0], [], [], [], []])  # 1 -> 0 is an edge: they never overlap
    # Ranked: the path fewer tests write first.
    assert conflict_candidates(touches, linked, 100) == [
        (4, 5, "/r/db"), (0, 2, "/r/out.txt"), (1, 2, "/r/out.txt")]
    assert conflict_candidates(touches, linked, 1) == [(4, 5, "/r/db")]
    assert conflict_candidates(touches, linked, 100, per_path=1) == [
        (4, 5, "/r/db"), (0, 2, "/r/out.txt")]


def test_ordered_follows_paths_either_way() -> None:
    linked = ordered([[], [0], [1], []])
    assert linked(0, 2) and linked(2, 0)
    assert not linked(0, 3)


def test_a_resource_is_named_after_the_path_below_the_rootdir() -> None:
    assert resource_name("/proj/out/report.txt", "/proj") == "out_report.txt"
    assert resource_name("/tmp/shared.db", "/proj") == "tmp_shared.db"
    assert resource_name("/proj", "/proj") == "proj"


def test_a_test_that_fails_whatever_ran_before_it_is_not_reproducible() -> None:
    # The serial run passed it after the whole prefix, but no probe does (a
    # database no probe resets): no set of tests is the answer.
    asked: list[Sequence[int]] = []

    def never(subsets: Sequence[Sequence[int]]) -> list[bool]:
        asked.extend(subsets)
        return [False for _ in subsets]

    with pytest.raises(NotReproducible):
        needed(40, never)
    # One bisection, then the whole prefix once: not a bisection per test below.
    assert len(asked) <= math.ceil(math.log2(40)) + 1, len(asked)
