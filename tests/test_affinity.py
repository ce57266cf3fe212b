"""Tier 1: affinity groups, a pure function (which tests must share one worker)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import pytest
from helpers import outputs_under_hash_seeds
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dagorder.core.affinity import affinity_groups, shared_keys, state_groups
from pytest_dagorder.core.state_writes import module_writes

Edges = list[list[int]]


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


# ---------------------------------------------------------------- shared state


SHOP = frozenset({"session fixture 'shop'"})
NONE: frozenset[str] = frozenset()


@pytest.mark.parametrize(
    ("modules", "requires", "shared", "opaque", "expected"),
    [
        pytest.param(["m", "m", "m"], {1: [0], 2: [0]}, [NONE] * 3, (),
                     ["edges inside m"] * 3, id="every-in-module-edge-joins"),
        pytest.param(["m1", "m2"], {1: [0]}, [NONE] * 2, (), [None, None],
                     id="cross-module-edge-sharing-nothing-is-free"),
        pytest.param(["m1", "m2"], {1: [0]}, [SHOP, SHOP], (),
                     ["session fixture 'shop'"] * 2, id="one-session-fixture-joins-modules"),
        pytest.param(["m1", "m2", "m3"], {1: [0], 2: [1]}, [SHOP, NONE, SHOP], (),
                     ["session fixture 'shop'"] * 3, id="the-tests-between-join-too"),
        pytest.param(["m1", "m2", "m3"], {1: [0], 2: [1]}, [SHOP, SHOP, NONE], (),
                     ["session fixture 'shop'"] * 2 + [None], id="past-the-last-user-is-free"),
        pytest.param(["m1", "m2", "m3", "m4"], {1: [0], 3: [2]}, [SHOP] * 4, (),
                     ["session fixture 'shop'"] * 4, id="two-chains-two-groups"),
        pytest.param(["m1", "m2"], {1: [0]}, [NONE] * 2, ["m1 writes", None],
                     ["m1 writes"] * 2, id="an-opaque-prerequisite-joins"),
        pytest.param(["m1", "m2"], {1: [0]}, [NONE] * 2, [None, "m2 writes"],
                     [None, None], id="an-opaque-dependent-leaves-nothing-behind"),
        pytest.param(["m1", "m1", "m2"], {1: [0], 2: [1]}, [SHOP, NONE, SHOP], (),
                     ["edges inside m1; session fixture 'shop'"] * 3,
                     id="reasons-add-up"),
        pytest.param(["m1", "m2", "m1"], {1: [0], 2: [0, 1]}, [NONE] * 3, (),
                     ["edges inside m1; on a path between two tests of the group"] * 3,
                     id="a-path-out-of-a-group-and-back-joins-it"),
    ],
)
def test_state_groups(modules: list[str | None], requires: dict[int, list[int]],
                      shared: list[frozenset[str]], opaque: list[str | None],
                      expected: list[str | None]) -> None:
    n = len(modules)
    assert state_groups(modules, edges(n, requires), edges(n), shared, opaque) == expected


@pytest.mark.parametrize(
    ("quiet", "shared", "expected"),
    [
        pytest.param([True, True, False], [NONE] * 3, [None, None, None],
                     id="a-quiet-end-frees-the-in-module-edges"),
        pytest.param([False, False, True], [NONE] * 3, ["edges inside m"] * 2 + [None],
                     id="others-still-join"),
        pytest.param([True, True, True], [SHOP, SHOP, NONE],
                     ["session fixture 'shop'"] * 2 + [None],
                     id="a-fixture-they-request-still-joins"),
    ],
)
def test_quiet_tests(quiet: list[bool], shared: list[frozenset[str]],
                     expected: list[str | None]) -> None:
    # 0 <- 1 <- 2, in one module.
    assert state_groups(["m"] * 3, edges(3, {1: [0], 2: [1]}), edges(3), shared, (),
                        quiet) == expected


def test_a_quiet_prerequisites_opaque_module_joins_nothing() -> None:
    assert state_groups(["m1", "m2"], edges(2, {1: [0]}), edges(2), [NONE] * 2,
                        ["m1 writes", None], [True, False]) == [None, None]


def test_two_chains_sharing_a_fixture_are_two_groups() -> None:
    labels = state_groups(["m1", "m2", "m3", "m4"], edges(4, {1: [0], 3: [2]}), edges(4),
                          [SHOP] * 4)
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
@given(case=inputs())
def test_no_path_leaves_a_state_group_and_comes_back(
    case: tuple[list[str | None], Edges, Edges, list[str | None]],
) -> None:
    scopes, requires, after = acyclic(case)
    n = len(scopes)
    labels = affinity_groups(
        state_groups(scopes, requires, after, [SHOP if i % 4 == 0 else NONE for i in range(n)]),
        requires, after)
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
    by_state = affinity_groups(
        state_groups(scopes, requires, after, [SHOP if i % 3 == 0 else NONE for i in range(n)]),
        requires, after)
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


WRITES = [
    pytest.param("STATE = {}\ndef test_a():\n    STATE['x'] = 1\n", True, set(),
                 id="item-of-a-module-name"),
    pytest.param("X = 0\ndef test_a():\n    global X\n    X = 1\n", True, set(), id="global"),
    pytest.param("SEEN = []\ndef test_a():\n    SEEN.append(1)\n", True, set(), id="mutator-call"),
    pytest.param("import os\ndef test_a():\n    os.environ['A'] = '1'\n", True, set(),
                 id="imported-module"),
    pytest.param("class TestA:\n    def test_a(self):\n        TestA.x = 1\n", True, set(),
                 id="class-attribute-by-name"),
    pytest.param("class TestA:\n    def test_a(self):\n        type(self).x = 1\n", True, set(),
                 id="class-attribute-through-type"),
    pytest.param("class TestA:\n    def test_a(self):\n        self.__class__.x = 1\n", True,
                 set(), id="class-attribute-through-dunder-class"),
    pytest.param("class TestA:\n    store = {}\n    def test_a(self):\n"
                 "        self.store['k'] = 1\n", True, set(),
                 id="class-container-through-self"),
    pytest.param("def test_a(request):\n    request.module.x = 1\n", True, set(),
                 id="request-module"),
    pytest.param("def test_a(request):\n    setattr(request.cls, 'x', 1)\n", True, set(),
                 id="setattr-on-a-class"),
    pytest.param("class TestA:\n    def test_a(self):\n        self.x = 1\n", False, set(),
                 id="instance-attribute-is-the-tests-own"),
    pytest.param("def test_a():\n    d = {}\n    d['x'] = 1\n    d.update(y=2)\n", False, set(),
                 id="local-object"),
    pytest.param("def test_a(shared):\n    shared['id'] = 1\n", False, {"shared"},
                 id="written-into-a-parameter"),
    pytest.param("def test_a(client):\n    client.put('/x')\n    client.post('/y')\n", False,
                 set(), id="http-calls-are-not-mutators"),
    pytest.param("def test_a():\n    out = []\n    def add():\n        out.append(1)\n    add()\n",
                 False, set(), id="nested-function-writes-an-enclosing-local"),
    pytest.param("def test_a():\n    f = lambda x: x.append(1)\n    f([])\n", False, set(),
                 id="lambda-argument"),
    pytest.param("DATA = [1, 2]\ndef test_a():\n    assert sorted(DATA) == DATA\n", False, set(),
                 id="reads-only"),
]


@pytest.mark.parametrize(("source", "module_state", "params"), WRITES)
def test_module_writes(source: str, module_state: bool, params: set[str]) -> None:
    found = module_writes(source)
    assert found is not None
    assert (found.module_state, set(found.into_params)) == (module_state, params)


def test_module_writes_of_unparsable_source_is_unknown() -> None:
    assert module_writes("def (:\n") is None
