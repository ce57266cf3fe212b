"""Tier 1: the pure graph - validation, stable order, critical paths."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dagorder.core.errors import (
    CycleError,
    DependencyError,
    DuplicateTaskError,
    SelfDependencyError,
    UnknownDependencyError,
)
from pytest_dagorder.core.graph import (
    DEFAULT_DURATION,
    Edges,
    Graph,
    cycle_breaks,
    prerequisites_of,
    stable_order,
)

Pairs = list[tuple[Hashable, list[Hashable]]]


def build(spec: Mapping[str, str], after: Mapping[str, str] | None = None) -> Graph:
    """``{"b": "a c"}``: task b requires a and c; tasks appear in key order."""
    return Graph.build(
        [(t, deps.split()) for t, deps in spec.items()],
        after={t: deps.split() for t, deps in (after or {}).items()},
    )


def assert_cycle(seq: Sequence[Hashable], cycle: Sequence[Hashable]) -> None:
    """Like graphlib's test helper: ``cycle`` is ``seq`` closed, up to rotation."""
    assert len(cycle) >= 2
    assert cycle[0] == cycle[-1], f"{cycle!r} is not closed"
    body = list(cycle[:-1])
    assert len(body) == len(seq), f"{cycle!r} is not a rotation of {seq!r}"
    assert len(set(body)) == len(body), f"{cycle!r} visits a node twice"
    k = body.index(seq[0]) if seq[0] in body else -1
    assert k >= 0 and body[k:] + body[:k] == list(seq), f"{cycle!r} != rotation of {seq!r}"


def assert_real_cycle(graph_spec: Mapping[str, str], after: Mapping[str, str],
                      cycle: Sequence[Hashable]) -> None:
    """Each element of ``cycle`` really depends on the next one."""
    edges = {(t, d) for t, deps in graph_spec.items() for d in deps.split()}
    edges |= {(t, d) for t, deps in after.items() for d in deps.split()}
    for a, b in itertools.pairwise(cycle):
        assert (a, b) in edges, f"{a} does not depend on {b}"


def errors_of(exc: DependencyError) -> tuple[DependencyError, ...]:
    return exc.errors


# ---------------------------------------------------------------- valid graphs


def test_empty_graph() -> None:
    g = Graph.build([])
    assert len(g) == 0
    assert g.topo == ()
    assert g.critical_path() == ()
    assert g.longest_chain() == 0
    assert g.edge_count == 0


def test_indices_and_adjacency() -> None:
    g = build({"a": "", "b": "a", "c": "a", "d": "b c"}, after={"c": "b"})
    assert g.ids == ("a", "b", "c", "d")
    assert g.index == {"a": 0, "b": 1, "c": 2, "d": 3}
    assert g.requires == ((), (0,), (0,), (1, 2))
    assert g.after == ((), (), (1,), ())
    assert g.dependents == ((1, 2), (3,), (3,), ())
    assert g.followers == ((), (2,), (), ())
    assert g.topo == (0, 1, 2, 3)
    assert g.edge_count == 5


def test_repeated_prerequisite_counted_once() -> None:
    g = Graph.build([("a", []), ("b", ["a", "a", "a"])], after={"b": ["a"]})
    assert g.requires == ((), (0,))
    # An edge that is both "requires" and "after" is just "requires".
    assert g.after == ((), ())
    assert g.dependents == ((1,), ())
    assert g.followers == ((), ())
    assert g.edge_count == 1


def test_after_edges_deduplicated() -> None:
    g = Graph.build([("a", []), ("b", [])], after={"b": ["a", "a"]})
    assert g.after == ((), (0,))
    assert g.followers == ((1,), ())


def test_ids_may_be_any_hashable() -> None:
    g = Graph.build([(1, []), ((2, "x"), [1]), (None, [(2, "x")])])
    assert g.topo == (0, 1, 2)
    with pytest.raises(UnknownDependencyError) as info:
        Graph.build([(1, [2])])
    assert info.value.missing == {2: (1,)}
    assert "2 (required by 1)" in str(info.value)


@pytest.mark.parametrize(
    ("spec", "after", "expected"),
    [
        # No edges: collection order.
        ({"a": "", "b": "", "c": ""}, {}, "a b c"),
        # Reverse chain: forced order.
        ({"c": "b", "b": "a", "a": ""}, {}, "a b c"),
        # Among free tasks the lowest index goes first, even after a release.
        ({"x": "z", "y": "", "z": ""}, {}, "y z x"),
        ({"d": "a", "c": "", "b": "", "a": ""}, {}, "c b a d"),
        # After-edges order too.
        ({"a": "", "b": ""}, {"a": "b"}, "b a"),
        # A released task with a lower index than the queued ones jumps ahead.
        ({"b": "e", "c": "", "d": "", "e": ""}, {}, "c d e b"),
        ({"p": "", "a": "p", "q": "", "r": ""}, {}, "p a q r"),
    ],
)
def test_stable_topological_order(spec: dict[str, str], after: dict[str, str],
                                  expected: str) -> None:
    g = build(spec, after)
    assert [g.ids[i] for i in g.topo] == expected.split()


def test_critical_path_with_durations() -> None:
    #   a(1) -> b(5) -> d(1)
    #   a(1) -> c(2) -> d(1);  e(3) after c
    g = Graph.build(
        [("a", []), ("b", ["a"]), ("c", ["a"]), ("d", ["b", "c"]), ("e", [])],
        after={"e": ["c"]},
        durations={"a": 1.0, "b": 5.0, "c": 2.0, "d": 1.0, "e": 3.0},
    )
    crit = dict(zip(g.ids, g.critical_path(), strict=True))
    assert crit == {"d": 1.0, "e": 3.0, "b": 6.0, "c": 5.0, "a": 7.0}
    assert g.critical_path() is g.critical_path()  # computed once


def test_missing_durations_use_the_mean_of_known_ones() -> None:
    g = Graph.build([("a", []), ("b", ["a"]), ("c", [])],
                    durations={"a": 2.0, "b": None, "c": 4.0, "unknown": 9.0})
    assert g.durations == (2.0, 3.0, 4.0)
    assert g.critical_path() == (5.0, 3.0, 4.0)


def test_no_durations_use_the_default() -> None:
    g = build({"a": "", "b": "a", "c": "b"})
    assert g.durations == (DEFAULT_DURATION,) * 3
    assert g.critical_path() == (3 * DEFAULT_DURATION, 2 * DEFAULT_DURATION, DEFAULT_DURATION)


@pytest.mark.parametrize(
    ("spec", "after", "chain"),
    [
        ({}, {}, 0),
        ({"a": ""}, {}, 1),
        ({"a": "", "b": ""}, {}, 1),
        ({"a": "", "b": "a", "c": "b", "d": "a"}, {}, 3),
        ({"a": "", "b": "a", "c": ""}, {"c": "b"}, 3),
        ({"a": "", "b": "a", "c": "a", "d": "b c", "e": "d"}, {}, 4),
    ],
)
def test_longest_chain(spec: dict[str, str], after: dict[str, str], chain: int) -> None:
    assert build(spec, after).longest_chain() == chain


def test_prerequisites_of() -> None:
    # What the planner pulls back for a selection: both kinds of edge, transitively.
    g = build({"a": "", "b": "a", "c": "", "d": "b", "e": "c"}, after={"d": "c"})
    assert prerequisites_of([3], g.requires, g.after) == {0, 1, 2}
    assert prerequisites_of([4], g.requires, g.after) == {2}
    assert prerequisites_of([0], g.requires, g.after) == set()
    assert prerequisites_of([3, 4], g.requires, g.after) == {0, 1, 2}
    assert prerequisites_of([1, 3], g.requires, g.after) == {0, 1, 2}  # a root another waits for


# ---------------------------------------------------------------- validation


def test_duplicates() -> None:
    with pytest.raises(DuplicateTaskError) as info:
        build_pairs([("a", []), ("b", []), ("a", []), ("b", []), ("a", [])])
    assert info.value.duplicates == ("a", "b")
    assert info.value.errors == (info.value,)
    assert "duplicate task ids: a, b" in str(info.value)


def build_pairs(pairs: Pairs, after: Mapping[Hashable, list[Hashable]] | None = None) -> Graph:
    return Graph.build(pairs, after=after)


def test_unknown_lists_every_requester_in_order() -> None:
    with pytest.raises(UnknownDependencyError) as info:
        build({"a": "x", "b": "y x", "c": "a"}, after={"c": "z"})
    err = info.value
    assert err.missing == {"x": ("a", "b"), "y": ("b",), "z": ("c",)}
    assert isinstance(err, ValueError)
    text = str(err)
    assert "unknown prerequisites" in text
    assert "x (required by a, b)" in text
    assert "z (required by c)" in text


def test_unknown_single() -> None:
    with pytest.raises(UnknownDependencyError,
                       match=r"unknown prerequisite: nope \(required by a\)"):
        build({"a": "nope"})


def test_self_dependency() -> None:
    with pytest.raises(SelfDependencyError) as info:
        build({"a": "", "b": "b a"})
    assert info.value.cycle == ("b", "b")
    assert isinstance(info.value, CycleError)
    assert "b depends on itself" in str(info.value)


def test_self_dependency_through_after() -> None:
    with pytest.raises(SelfDependencyError) as info:
        build({"a": ""}, after={"a": "a"})
    assert info.value.cycle == ("a", "a")


CYCLES = [
    # (spec, after, expected cycle bodies - each element depends on the next)
    ({"a": "b", "b": "a"}, {}, [["a", "b"]]),
    ({"a": "c", "b": "a", "c": "b"}, {}, [["a", "c", "b"]]),
    # A cycle behind a healthy prefix and with a tail hanging off it.
    ({"r": "", "a": "r c", "b": "a", "c": "b", "t": "c"}, {}, [["a", "c", "b"]]),
    # After-edges close cycles too.
    ({"a": "", "b": "a"}, {"a": "b"}, [["a", "b"]]),
    ({"a": "", "b": "a", "c": "b"}, {"a": "c"}, [["a", "c", "b"]]),
    # Two separate cycles: both reported, in order of their lowest index.
    ({"a": "b", "b": "a", "c": "", "d": "e", "e": "d"}, {}, [["a", "b"], ["d", "e"]]),
    # One strongly connected component with two loops: its shortest loop through
    # its lowest member is reported.
    ({"a": "b", "b": "c", "c": "a d", "d": "a"}, {}, [["a", "b", "c"]]),
    ({"a": "b", "b": "c", "c": "d", "d": "a b"}, {}, [["a", "b", "c", "d"]]),
]


@pytest.mark.parametrize(("spec", "after", "expected"), CYCLES)
def test_cycles_reported_as_paths(spec: dict[str, str], after: dict[str, str],
                                  expected: list[list[str]]) -> None:
    with pytest.raises(DependencyError) as info:
        build(spec, after)
    errs = errors_of(info.value)
    assert all(type(e) is CycleError for e in errs)
    assert len(errs) == len(expected)
    for err, seq in zip(errs, expected, strict=True):
        assert isinstance(err, CycleError)
        assert_cycle(seq, err.cycle)
        assert_real_cycle(spec, after, err.cycle)
        assert " -> ".join(str(t) for t in err.cycle) in str(err)
    if len(expected) == 1:
        assert type(info.value) is CycleError
    else:
        assert type(info.value) is DependencyError
        assert f"{len(expected)} problems in the dependency graph" in str(info.value)


def test_several_problems_at_once() -> None:
    with pytest.raises(DependencyError) as info:
        build({"a": "ghost", "b": "b", "c": "d", "d": "c"})
    err = info.value
    assert type(err) is DependencyError
    kinds = [type(e) for e in err.errors]
    assert kinds == [UnknownDependencyError, SelfDependencyError, CycleError]
    unknown, selfdep, cycle = err.errors
    assert isinstance(unknown, UnknownDependencyError)
    assert unknown.missing == {"ghost": ("a",)}
    assert isinstance(selfdep, SelfDependencyError)
    assert selfdep.cycle == ("b", "b")
    assert isinstance(cycle, CycleError)
    assert_cycle(["c", "d"], cycle.cycle)
    text = str(err)
    assert text.startswith("3 problems in the dependency graph:")
    for e in err.errors:
        assert str(e) in text


def test_duplicates_and_unknown_together() -> None:
    with pytest.raises(DependencyError) as info:
        build_pairs([("a", []), ("a", ["zz"])])
    kinds = [type(e) for e in info.value.errors]
    assert kinds == [DuplicateTaskError, UnknownDependencyError]


def test_nothing_is_built_from_invalid_input() -> None:
    calls: list[str] = []

    def pairs() -> Pairs:
        calls.append("read")
        return [("a", ["b"]), ("b", ["a"])]

    with pytest.raises(CycleError):
        Graph.build(pairs())
    assert calls == ["read"]


def test_long_chain_and_long_cycle_do_not_recurse() -> None:
    n = 50_000
    g = Graph.build([(i, [i - 1] if i else []) for i in range(n)])
    assert g.longest_chain() == n
    assert g.critical_path()[0] == n * DEFAULT_DURATION
    with pytest.raises(CycleError) as info:
        Graph.build([(i, [(i - 1) % n]) for i in range(n)])
    assert len(info.value.cycle) == n + 1
    assert_cycle([(-k) % n for k in range(n)], info.value.cycle)


# ---------------------------------------------------------------- properties


DAG_SIZE = 25
#: The edges of the task at position k (1 .. DAG_SIZE - 1) of :func:`dags`' hidden
#: order, built once: looking a strategy up in hypothesis' cache by its
#: arguments at each draw cost a fifth of drawing a DAG.
DAG_REQUIRES = [st.lists(st.integers(0, k - 1), max_size=3) for k in range(1, DAG_SIZE)]
DAG_AFTER = [st.lists(st.integers(0, k - 1), max_size=2) for k in range(1, DAG_SIZE)]


@st.composite
def dags(draw: st.DrawFn) -> tuple[Pairs, dict[Hashable, list[Hashable]]]:
    """A random DAG in a random collection order: edges go from a higher to a
    lower position in a hidden order, then the tasks are shuffled."""
    n = draw(st.integers(0, DAG_SIZE))
    perm = draw(st.permutations(range(n)))
    requires: dict[int, list[int]] = {}
    after: dict[Hashable, list[Hashable]] = {}
    for k in range(n):
        if k:
            req = draw(DAG_REQUIRES[k - 1])
            aft = draw(DAG_AFTER[k - 1])
        else:
            req, aft = [], []
        requires[perm[k]] = [perm[j] for j in req]
        if aft:
            after[perm[k]] = [perm[j] for j in aft]
    pairs: Pairs = [(t, list(requires[t])) for t in sorted(requires)]
    return pairs, after


@settings(max_examples=200, deadline=None)
@given(dags())
def test_topo_respects_every_edge(data: tuple[Pairs, dict[Hashable, list[Hashable]]]) -> None:
    pairs, after = data
    g = Graph.build(pairs, after=after)
    assert sorted(g.topo) == list(range(len(pairs)))
    pos = {i: k for k, i in enumerate(g.topo)}
    for i in range(len(g)):
        for p in (*g.requires[i], *g.after[i]):
            assert pos[p] < pos[i]
        assert list(g.dependents[i]) == sorted(g.dependents[i])
        assert len(set(g.requires[i])) == len(g.requires[i])
    # The critical path of a task covers any of its successors plus itself.
    crit = g.critical_path()
    for i in range(len(g)):
        for d in (*g.dependents[i], *g.followers[i]):
            assert crit[i] >= crit[d] + g.durations[i] - 1e-9
    assert 1 <= g.longest_chain() <= len(g) or len(g) == 0
    # Built for a caller that wants the stable order at once: the same graph.
    s = Graph.build(pairs, after=after, stable=True)
    assert (s.topo, s.critical_path(), s.dependents) == (g.topo, crit, g.dependents)
    with pytest.raises(DependencyError):
        Graph.build([*pairs, ("x", ["y"]), ("y", ["x"])], after=after, stable=True)


def _outcome(make: Callable[[], Graph]) -> object:
    """What a construction gives: the graph's contents, or its error's type and text."""
    try:
        g = make()
    except DependencyError as exc:
        return type(exc), str(exc), [(type(e), str(e)) for e in exc.errors]
    return (g.ids, g.requires, g.after, g.dependents, g.followers, g.durations, g.topo,
            g.critical_path())


@st.composite
def position_edges(draw: st.DrawFn) -> tuple[list[list[int]], dict[int, list[int]]]:
    """Edges over positions, well-formed or not: out of range, to itself, twice, cycles."""
    n = draw(st.integers(0, 12))
    near = st.integers(-1, n)
    back = st.integers(0, max(n - 1, 0))
    edge = near if draw(st.booleans()) else back
    requires = [draw(st.lists(edge if k else near, max_size=3)) for k in range(n)]
    after = draw(st.dictionaries(st.integers(0, n) if n else st.just(0),
                                 st.lists(edge, max_size=3), max_size=3))
    return requires, after


@settings(max_examples=400, deadline=None)
@given(position_edges(), st.booleans(), st.data())
def test_of_positions_is_build_over_positions(
    edges: tuple[list[list[int]], dict[int, list[int]]], stable: bool, draw: st.DataObject
) -> None:
    requires, after = edges
    evens = range(0, len(requires), 2)
    durations: dict[Hashable, float] = dict(zip(evens, draw.draw(
        st.lists(st.floats(0, 5), min_size=len(evens), max_size=len(evens))), strict=True))
    if draw.draw(st.booleans()):
        durations[draw.draw(st.sampled_from([True, 1.0, -1, len(requires), "x"]))] = 1.5
    assert _outcome(lambda: Graph.of_positions(
        requires, after=after, durations=durations, stable=stable)) == _outcome(
        lambda: Graph.build(enumerate(requires), after=after, durations=durations,
                            stable=stable))


@settings(max_examples=400, deadline=None)
@given(position_edges())
def test_stable_order_checks_and_orders_as_the_graph_would(
    edges: tuple[list[list[int]], dict[int, list[int]]]
) -> None:
    # A collection orders its edges without building a graph; the graph the
    # scheduler runs is built from them unchecked: both must be the graph's.
    requires, after = edges
    want = _outcome(lambda: Graph.of_positions(requires, after=after, stable=True))
    try:
        order = stable_order(requires, after=after)
    except DependencyError as exc:
        assert (type(exc), str(exc), [(type(e), str(e)) for e in exc.errors]) == want
        return
    assert isinstance(want, tuple) and len(want) == 8
    assert (tuple(order.topo), tuple(order.requires), tuple(order.after)) == (
        want[6], want[1], want[2])
    assert _outcome(lambda: Graph.of_checked(Edges(order.requires, order.after))) == want


@settings(max_examples=200, deadline=None)
@given(dags())
def test_of_positions_on_valid_dags(data: tuple[Pairs, dict[Hashable, list[Hashable]]]) -> None:
    pairs, after = data
    requires = [list(map(int, deps)) for _, deps in pairs]
    ints = {int(k): list(map(int, v)) for k, v in after.items()}  # type: ignore[call-overload]
    assert _outcome(lambda: Graph.of_positions(requires, after=ints, stable=True)) == _outcome(
        lambda: Graph.build(pairs, after=after, stable=True))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=3), unique=True, max_size=30))
def test_no_edges_keeps_collection_order(ids: list[str]) -> None:
    g = Graph.build([(t, []) for t in ids])
    assert g.topo == tuple(range(len(ids)))
    assert g.longest_chain() == (1 if ids else 0)


@settings(max_examples=200, deadline=None)
@given(dags(), st.data())
def test_an_added_back_edge_is_reported_as_a_real_cycle(
    data: tuple[Pairs, dict[Hashable, list[Hashable]]], draw: st.DataObject
) -> None:
    pairs, after = data
    g = Graph.build(pairs, after=after)
    # Pick an edge i -> p (i depends on p) and close it with p -> ... -> i.
    edges = [(i, p) for i in range(len(g)) for p in (*g.requires[i], *g.after[i])]
    if not edges:
        return
    i, p = draw.draw(st.sampled_from(edges))
    pid, iid = g.ids[p], g.ids[i]
    new_pairs = [(t, [*deps, iid] if t == pid else deps) for t, deps in pairs]
    with pytest.raises(DependencyError) as info:
        Graph.build(new_pairs, after=after)
    errs = info.value.errors
    assert errs and all(isinstance(e, CycleError) for e in errs)
    depends = {(a, b) for a, deps in new_pairs for b in deps}
    depends |= {(a, b) for a, deps in after.items() for b in deps}
    for e in errs:
        assert isinstance(e, CycleError)
        assert e.cycle[0] == e.cycle[-1]
        assert len(set(e.cycle[:-1])) == len(e.cycle) - 1
        for a, b in itertools.pairwise(e.cycle):
            assert (a, b) in depends


def test_permuted_keeps_every_edge_under_new_indices() -> None:
    g = Graph.build([("a", []), ("b", ["a"]), ("c", ["a", "b"])])
    p = g.permuted([2, 0, 1])
    assert p.ids == ("c", "a", "b")
    assert p.requires == ((1, 2), (), (1,))
    assert p.dependents == ((), (0, 2), (0,))
    h = Graph.build([("a", []), ("b", []), ("c", [])], after={"c": ["a"]})
    q = h.permuted([2, 1, 0])
    assert q.after == ((2,), (), ())
    assert q.topo == (1, 2, 0)


def test_permuted_in_the_same_order_is_the_graph_itself() -> None:
    g = Graph.build([("a", []), ("b", ["a"])])
    assert g.permuted([0, 1]) is g
    assert g.permuted((1, 0)).ids == ("b", "a")


@st.composite
def any_edges(draw: st.DrawFn) -> list[list[int]]:
    """Edges by dependent over 0..n-1, cycles and all (no self-loops)."""
    n = draw(st.integers(0, 10))
    # Any task but i: 0 .. n - 2, the ones from i up shifted past it (a filter
    # would build and retry a strategy per task).
    return [[p + (p >= i) for p in draw(st.lists(st.integers(0, n - 2), max_size=3))]
            if n > 1 else [] for i in range(n)]


@settings(max_examples=300, deadline=None)
@given(any_edges())
def test_cycle_breaks_leave_no_cycle_and_drop_only_forward_edges_on_cycles(
    requires: list[list[int]],
) -> None:
    breaks = cycle_breaks(requires)
    kept = [list(ps) for ps in requires]
    for i, p, cycle in breaks:
        assert p > i  # a prerequisite that comes later: pytest-dependency skips i
        assert cycle[0] == cycle[-1] == i and cycle[1] == p
        for a, b in itertools.pairwise(cycle):  # a closed path of real edges
            assert b in requires[a]
        kept[i] = [q for q in kept[i] if q != p]
    Graph.of_positions(kept)  # no cycle left (it raises on one)
    # Only edges on a cycle are dropped: without cycles nothing is.
    try:
        Graph.of_positions(requires)
    except DependencyError:
        assert breaks
    else:
        assert not breaks
