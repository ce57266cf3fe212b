"""Tier 1: affinity groups, a pure function (which tests must share one worker)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import pytest
from helpers import outputs_under_hash_seeds
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dagorder.core.affinity import MODULE_STATE, affinity_groups, state_keys
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


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        pytest.param([frozenset({"k"}), frozenset({"k"}), frozenset()],
                     ["group-0", "group-0", None], id="shared-key-joins"),
        pytest.param([frozenset({"k"}), frozenset({"j"}), frozenset({"k"})],
                     ["group-0", None, "group-0"], id="only-the-sharing-edge-joins"),
        pytest.param([frozenset(), frozenset(), frozenset()], [None, None, None],
                     id="no-state-stays-free"),
    ],
)
def test_state_joins_only_tests_that_share(state: list[frozenset[str]],
                                           expected: list[str | None]) -> None:
    # 0 <- 1 and 0 <- 2, all in one module.
    assert affinity_groups(["m"] * 3, edges(3, {1: [0], 2: [0]}), edges(3), (),
                           state) == expected


def test_state_does_not_join_across_modules() -> None:
    keys = [frozenset({MODULE_STATE})] * 2
    assert affinity_groups(["m1", "m2"], edges(2, {1: [0]}), edges(2), (), keys) == [None] * 2


FIX = ("box", "module", "tests/test_m.py")


@pytest.mark.parametrize(
    ("fixtures", "module_state", "written", "class_id", "expected"),
    [
        pytest.param([FIX], False, frozenset(), None,
                     {"module tests/test_m.py box"}, id="module-fixture-counts"),
        pytest.param([("pkg", "package", "tests")], False, frozenset(), None,
                     {"package tests pkg"}, id="package-fixture-counts"),
        pytest.param([("c", "class", "tests/test_m.py")], False, frozenset(),
                     "tests/test_m.py::T", {"class tests/test_m.py::T tests/test_m.py c"},
                     id="class-fixture-per-class"),
        pytest.param([("client", "session", "")], False, frozenset(), None, set(),
                     id="session-fixture-only-read-is-free"),
        pytest.param([("vars", "session", "")], False, frozenset({"vars"}), None,
                     {"session  vars"}, id="session-fixture-written-counts"),
        pytest.param([], True, frozenset(), None, {MODULE_STATE}, id="module-writes-state"),
        pytest.param(None, False, frozenset(), None, {MODULE_STATE},
                     id="unknown-fixtures-share-everything"),
        pytest.param([], False, frozenset(), None, set(), id="nothing"),
    ],
)
def test_state_keys(fixtures: list[tuple[str, str, str]] | None, module_state: bool,
                    written: frozenset[str], class_id: str | None, expected: set[str]) -> None:
    assert state_keys(fixtures, module_state=module_state, written=written,
                      class_id=class_id) == expected


def test_session_fixture_of_the_workers_own_directory_counts() -> None:
    fix = [("workdir", "session", ""), ("client", "session", "")]
    assert state_keys(fix, module_state=False, per_worker=frozenset({"workdir"})) == {
        "session  workdir"}


def test_class_fixture_keys_of_two_classes_differ() -> None:
    fix = [("c", "class", "tests/test_m.py")]
    a = state_keys(fix, module_state=False, class_id="tests/test_m.py::A")
    b = state_keys(fix, module_state=False, class_id="tests/test_m.py::B")
    assert a and b and not a & b


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
