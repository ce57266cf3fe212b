"""Tier 1: affinity groups, a pure function (which tests must share one worker)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from helpers import outputs_under_hash_seeds
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dagorder.core.affinity import affinity_groups, shared_keys, state_partition

Edges = list[list[int]]


def state_groups(*args: Any, **kwargs: Any) -> list[str | None]:
    """The labels of :func:`state_partition` (what these tests compare)."""
    return state_partition(*args, **kwargs)[0]


def edges(n: int, spec: Mapping[int, Sequence[int]] | None = None) -> Edges:
    """Per-task prerequisite lists: ``{1: [0]}`` means task 1 has an edge to task 0."""
    return [list((spec or {}).get(i, ())) for i in range(n)]


# ---------------------------------------------------------------- table


@pytest.mark.parametrize(
    ("scopes", "requires", "after", "explicit", "expected"),
    [
        pytest.param(["m", "m", "m"], {1: [0]}, {}, (), ["group-0", "group-0", None],
                     id="requires-edge-inside-a-module"),
        pytest.param(["m", "m"], {}, {1: [0]}, (), ["group-0", "group-0"],
                     id="after-edge-joins-too"),
        pytest.param(["m1", "m2"], {1: [0]}, {}, (), [None, None],
                     id="cross-module-edge-never-joins"),
        pytest.param(["m1", "m2"], {}, {1: [0]}, (), [None, None],
                     id="cross-module-after-edge-never-joins"),
        pytest.param(["m1", "m2", "m1"], {1: [0], 2: [1]}, {}, (), [None, None, None],
                     id="same-module-through-another-module-is-not-joined"),
        pytest.param([None, None], {1: [0]}, {1: [0]}, (), [None, None],
                     id="no-scope-never-joins"),
        pytest.param(["m", "m", "m"], {2: [1], 1: [0]}, {}, (), ["group-0"] * 3,
                     id="transitive-chain"),
        pytest.param(["m", "m", "m", "m"], {1: [0], 3: [2]}, {}, (),
                     ["group-0", "group-0", "group-2", "group-2"], id="two-chains-two-groups"),
        pytest.param(["m"], {0: [1, 5]}, {0: [3]}, (), [None],
                     id="edges-to-deselected-prerequisites-are-ignored"),
        pytest.param(["m", "m", "m"], {}, {}, (), [None, None, None],
                     id="single-tests-stay-free"),
        pytest.param(["m1", "m2", "m3"], {}, {}, ["db", None, "db"],
                     ["group-0", None, "group-0"], id="explicit-label-joins-across-modules"),
        pytest.param(["m", "m"], {}, {}, [None, "x"], [None, "group-1"],
                     id="lone-explicit-test-gets-a-label"),
        pytest.param([None, None], {}, {}, ["x", "y"], ["group-0", "group-1"],
                     id="different-labels-different-groups"),
        pytest.param(["m", "m", "n"], {1: [0]}, {}, [None, "g", "g"], ["group-0"] * 3,
                     id="explicit-label-merges-with-an-edge-group"),
        pytest.param(["a", "m", "b", "m", "c"], {3: [1]}, {}, [None, None, None, "g", "g"],
                     [None, "group-1", None, "group-1", "group-1"],
                     id="label-is-the-first-index-of-the-merged-group"),
        pytest.param(["m", "n", "m"], {0: [2]}, {}, (), ["group-0", None, "group-0"],
                     id="edge-to-a-later-index"),
    ],
)
def test_affinity_groups(
    scopes: list[str | None],
    requires: dict[int, list[int]],
    after: dict[int, list[int]],
    explicit: Sequence[str | None],
    expected: list[str | None],
) -> None:
    n = len(scopes)
    assert affinity_groups(scopes, edges(n, requires), edges(n, after), explicit) == expected


def test_explicit_labels_are_optional() -> None:
    assert affinity_groups(["m", "m"], edges(2, {1: [0]}), edges(2)) == ["group-0", "group-0"]


def test_no_tests() -> None:
    assert affinity_groups([], [], [], []) == []


def test_inputs_are_not_modified() -> None:
    scopes: list[str | None] = ["m", "m", "n"]
    requires = edges(3, {1: [0], 2: [1]})
    after = edges(3, {2: [0]})
    explicit: list[str | None] = ["x", None, "x"]
    copies = [list(scopes), [list(r) for r in requires], [list(a) for a in after], list(explicit)]
    affinity_groups(scopes, requires, after, explicit)
    assert [scopes, requires, after, explicit] == copies


# ---------------------------------------------------------------- stability

HASHSEED_SCRIPT = textwrap.dedent(
    """
    import json
    from pytest_dagorder.core.affinity import affinity_groups

    n = 60
    scopes = [f"tests/test_mod{i % 7}.py" for i in range(n)]
    requires = [[j for j in range(i) if (i * 31 + j * 17) % 11 == 0] for i in range(n)]
    after = [[j for j in range(i) if (i * 13 + j * 7) % 23 == 0] for i in range(n)]
    explicit = [f"label{i % 5}" if i % 4 == 0 else None for i in range(n)]
    print(json.dumps(affinity_groups(scopes, requires, after, explicit)))
    """
)


def test_labels_do_not_depend_on_hash_seed() -> None:
    outputs = outputs_under_hash_seeds(HASHSEED_SCRIPT)
    assert any(label is not None for label in outputs[0]), "the script formed no group"
    assert outputs[0] == outputs[1] == outputs[2]


# ---------------------------------------------------------------- properties


@st.composite
def inputs(draw: st.DrawFn) -> tuple[list[str | None], Edges, Edges, list[str | None]]:
    n = draw(st.integers(0, 14))
    scopes = draw(st.lists(st.sampled_from([None, "m1", "m2", "m3"]), min_size=n, max_size=n))
    # Prerequisites may point past the run (deselected ones): index n or n + 1.
    index = st.integers(0, n + 1)
    requires = draw(st.lists(st.lists(index, max_size=3), min_size=n, max_size=n))
    after = draw(st.lists(st.lists(index, max_size=2), min_size=n, max_size=n))
    # A validated graph has no self-dependencies.
    requires = [[p for p in ps if p != i] for i, ps in enumerate(requires)]
    after = [[p for p in ps if p != i] for i, ps in enumerate(after)]
    explicit = draw(st.lists(st.sampled_from([None, None, "x", "y"]), min_size=n, max_size=n))
    return scopes, requires, after, explicit


def components(scopes: Sequence[str | None], requires: Edges, after: Edges,
               explicit: Sequence[str | None]) -> list[set[int]]:
    """Reference: connected components over intra-scope edges and shared labels."""
    n = len(scopes)
    adj: list[set[int]] = [set() for _ in range(n)]
    for i in range(n):
        for p in (*requires[i], *after[i]):
            if p < n and scopes[i] is not None and scopes[i] == scopes[p]:
                adj[i].add(p)
                adj[p].add(i)
        for j in range(i):
            if explicit[i] is not None and explicit[i] == explicit[j]:
                adj[i].add(j)
                adj[j].add(i)
    seen: set[int] = set()
    out: list[set[int]] = []
    for start in range(n):
        if start in seen:
            continue
        comp = {start}
        todo = [start]
        while todo:
            for k in adj[todo.pop()]:
                if k not in comp:
                    comp.add(k)
                    todo.append(k)
        seen |= comp
        out.append(comp)
    return out


@settings(max_examples=300, deadline=None)
@given(case=inputs())
def test_groups_are_the_components_of_intra_scope_edges_and_labels(
    case: tuple[list[str | None], Edges, Edges, list[str | None]],
) -> None:
    scopes, requires, after, explicit = case
    labels = affinity_groups(scopes, requires, after, explicit)
    n = len(scopes)
    assert len(labels) == n
    # Two tests joined by an intra-scope edge always share a label.
    for i in range(n):
        for p in (*requires[i], *after[i]):
            if p < n and scopes[i] is not None and scopes[i] == scopes[p]:
                assert labels[i] is not None and labels[i] == labels[p], (i, p, labels)
    # Tests with one explicit label share one group label.
    for i in range(n):
        for j in range(i):
            if explicit[i] is not None and explicit[i] == explicit[j]:
                assert labels[i] is not None and labels[i] == labels[j], (i, j, labels)
    # Every group is exactly one component: connected through intra-scope edges
    # or shared labels, never through a cross-scope edge; its label is its
    # first index; a lone test is free unless it has an explicit label.
    by_label: dict[str, set[int]] = {}
    for i, label in enumerate(labels):
        if label is not None:
            by_label.setdefault(label, set()).add(i)
    for comp in components(scopes, requires, after, explicit):
        first = min(comp)
        if len(comp) == 1 and explicit[first] is None:
            assert labels[first] is None, (first, labels)
        else:
            assert by_label.get(f"group-{first}") == comp, (comp, labels)
    assert len(by_label) == sum(
        1 for comp in components(scopes, requires, after, explicit)
        if len(comp) > 1 or explicit[min(comp)] is not None
    )


@settings(max_examples=100, deadline=None)
@given(case=inputs())
def test_cross_scope_edges_change_nothing(
    case: tuple[list[str | None], Edges, Edges, list[str | None]],
) -> None:
    scopes, requires, after, explicit = case
    n = len(scopes)

    def intra(lists: Edges) -> Edges:
        return [[p for p in ps if p < n and scopes[i] is not None and scopes[i] == scopes[p]]
                for i, ps in enumerate(lists)]

    assert affinity_groups(scopes, requires, after, explicit) == affinity_groups(
        scopes, intra(requires), intra(after), explicit)


# ---------------------------------------------------------------- the rule: every edge


SHOP = frozenset({"session fixture 'shop'"})
IN_M = "edges inside m"


@pytest.mark.parametrize(
    ("modules", "requires", "after", "expected"),
    [
        pytest.param(["m", "m", "m"], {1: [0], 2: [0]}, {}, [IN_M] * 3,
                     id="every-in-module-edge-joins"),
        pytest.param(["m1", "m2"], {1: [0]}, {}, ["edges from m1 to m2"] * 2,
                     id="a-cross-module-edge-joins-whatever-they-share"),
        pytest.param(["m1", "m2"], {}, {1: [0]}, ["edges from m1 to m2"] * 2,
                     id="an-ordering-only-edge-joins-too"),
        pytest.param(["m1", "m2", "m1"], {1: [0], 2: [1]}, {},
                     ["edges from m1 to m2; edges from m2 to m1"] * 3,
                     id="a-chain-through-a-third-module-is-one-group"),
        pytest.param([None, "m"], {1: [0]}, {}, ["edges between tests of no module"] * 2,
                     id="a-test-of-no-module-joins"),
        pytest.param(["m1", "m1", "m2", "m2"], {1: [0], 3: [2]}, {},
                     ["edges inside m1"] * 2 + ["edges inside m2"] * 2,
                     id="two-chains-two-labels"),
        pytest.param(["m", "m"], {1: [0, 5]}, {}, [IN_M] * 2,
                     id="edges-to-deselected-prerequisites-are-ignored"),
        pytest.param(["m", "m"], {}, {}, [None, None], id="no-edge-no-group"),
    ],
)
def test_state_groups(modules: list[str | None], requires: dict[int, list[int]],
                      after: dict[int, list[int]], expected: list[str | None]) -> None:
    n = len(modules)
    assert state_groups(modules, edges(n, requires), edges(n, after)) == expected


@pytest.mark.parametrize(
    ("quiet", "lifted", "expected"),
    [
        pytest.param([True, False, False], (), [None, IN_M, IN_M],
                     id="a-quiet-test-is-joined-by-none-of-its-edges"),
        pytest.param([False, True, False], (), [None, None, None],
                     id="a-quiet-middle-frees-both-edges"),
        pytest.param([False, False, False], [(0, 1)], [None, IN_M, IN_M],
                     id="a-lifted-edge-joins-nothing"),
        pytest.param([False, False, False], [(1, 0)], [IN_M] * 3,
                     id="lifted-pairs-are-prerequisite-then-dependent"),
        pytest.param([False, False, False], [(0, 1), (1, 2)], [None] * 3,
                     id="every-edge-lifted"),
    ],
)
def test_only_statements_and_evidence_lift_an_edge(
        quiet: list[bool], lifted: list[tuple[int, int]], expected: list[str | None]) -> None:
    # 0 <- 1 <- 2, in one module.
    assert state_groups(["m"] * 3, edges(3, {1: [0], 2: [1]}), edges(3), quiet,
                        lifted=lifted) == expected


def test_a_lifted_edge_on_a_path_between_two_tests_of_a_group_joins_again() -> None:
    # 0 -> 1 -> 2 and 0 -> 2: lifting both edges of 1 leaves it on a path
    # between 0 and 2, which another edge joins: the group could never start
    # without it (it would wait for 1, which waits for it).
    labels = state_groups(["m"] * 3, edges(3, {1: [0], 2: [0, 1]}), edges(3),
                          lifted=[(0, 1), (1, 2)])
    assert labels == [f"{IN_M}; on a path between two tests of the group"] * 3


def test_a_group_keeps_the_stretch_of_a_module_whose_fixtures_it_holds() -> None:
    # m1: 0 1 2 (module fixtures), m2: 3, which depends on 0.  Serially 1 and
    # 2 ran between 0 and 3 with 0's module fixture instance: they join.
    modules = ["m1", "m1", "m1", "m2"]
    requires = edges(4, {3: [0]})
    why = "edges from m1 to m2; module fixtures of m1 between two tests of the group"
    assert state_groups(modules, requires, edges(4), keeps=[True] * 4) == [why] * 4
    # Without module fixtures (or marked as sharing nothing) they stay free.
    assert state_groups(modules, requires, edges(4), keeps=[True, False, True, False]) == [
        why, None, why, why]
    assert state_groups(modules, requires, edges(4), [False, False, True, False],
                        keeps=[True] * 4) == [why, why, None, why]
    # Past the group's last test, a module's tests are not its concern.
    assert state_groups(["m1", "m2", "m1"], edges(3, {1: [0]}), edges(3),
                        keeps=[True] * 3) == ["edges from m1 to m2"] * 2 + [None]


def test_two_chains_are_two_groups() -> None:
    labels = state_groups(["m1", "m2", "m1", "m2"], edges(4, {1: [0], 3: [2]}), edges(4))
    # Equal reasons, but no edge between the chains: affinity_groups keeps them apart.
    assert affinity_groups(labels, edges(4, {1: [0], 3: [2]}), edges(4)) == [
        "group-0", "group-0", "group-2", "group-2"]


def acyclic(case: tuple[list[str | None], Edges, Edges, list[str | None]]) -> tuple[
        list[str | None], Edges, Edges]:
    """The case's edges that point to an earlier task (a validated graph has no cycle)."""
    scopes, requires, after, _ = case
    return (scopes, [[p for p in ps if p < i] for i, ps in enumerate(requires)],
            [[p for p in ps if p < i] for i, ps in enumerate(after)])


@settings(max_examples=200, deadline=None)
@given(case=inputs(), data=st.data())
def test_every_edge_not_lifted_joins_and_no_path_leaves_a_group_and_comes_back(
    case: tuple[list[str | None], Edges, Edges, list[str | None]], data: st.DataObject,
) -> None:
    scopes, requires, after = acyclic(case)
    n = len(scopes)
    every = [(p, i) for i in range(n) for p in (*requires[i], *after[i])]
    # Drawn by index: st.integers of the same bounds is built once, where a
    # st.sampled_from of this case's edges would be built for this draw.
    lifted = {every[k] for k in data.draw(
        st.sets(st.integers(0, len(every) - 1)) if every else st.just(set[int]()))}
    quiet = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    labels = affinity_groups(state_groups(scopes, requires, after, quiet, lifted=lifted),
                             requires, after)
    for p, i in every:
        if (p, i) not in lifted and not quiet[i] and not quiet[p]:
            assert labels[i] is not None and labels[i] == labels[p], (p, i, labels)
    # Reference: every task between two tasks of one group is in it.
    reach = [{i} for i in range(n)]
    for i in range(n):
        for p in (*requires[i], *after[i]):
            reach[i] |= reach[p]  # ancestors, p < i
    for a in range(n):
        for b in range(n):
            if labels[a] is None or labels[a] != labels[b] or a not in reach[b]:
                continue
            for m in range(n):
                if a in reach[m] and m in reach[b]:
                    assert labels[m] == labels[a], (a, m, b, labels)


@settings(max_examples=100, deadline=None)
@given(case=inputs())
def test_state_keeps_at_least_what_module_keeps(
    case: tuple[list[str | None], Edges, Edges, list[str | None]],
) -> None:
    scopes, requires, after, _ = case
    n = len(scopes)
    by_module = affinity_groups(scopes, requires, after)
    by_state = affinity_groups(state_groups(scopes, requires, after), requires, after)
    for i in range(n):
        for j in range(n):
            if by_module[i] is not None and by_module[i] == by_module[j]:
                assert by_state[i] is not None and by_state[i] == by_state[j]


@pytest.mark.parametrize(
    ("fixtures", "expected"),
    [
        pytest.param([("shop", "session", "")], {"session fixture 'shop'"}, id="session"),
        pytest.param([("pkg", "package", "tests")], {"package fixture 'pkg' of tests"},
                     id="package"),
        pytest.param([("box", "module", "tests/test_m.py"), ("c", "class", "")], set(),
                     id="module-and-class-instances-stay-in-their-module"),
    ],
)
def test_shared_keys(fixtures: list[tuple[str, str, str]], expected: set[str]) -> None:
    assert shared_keys(fixtures) == expected


def test_shared_keys_of_a_quiet_test_name_module_and_class_instances() -> None:
    fix = [("box", "module", "t.py"), ("c", "class", "t.py")]
    assert shared_keys(fix, class_id="t.py::A", narrow=True) == {
        "module fixture 'box' of t.py", "class fixture 'c' of t.py::A"}
