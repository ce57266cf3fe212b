"""The partition behind --dag-shard (pure core) and the durations file it balances on."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest
from helpers import outputs_under_hash_seeds
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dagorder.core.shards import (
    ShardSpecError,
    components,
    parse_spec,
    partition,
)
from pytest_dagorder.deciding.decide import decide_xdist
from pytest_dagorder.declaring.notes import ShardNote
from pytest_dagorder.drivers.distributed import wire
from pytest_dagorder.features.durations import Suite, merged, read_file, write_file
from pytest_dagorder.options.settings import Settings
from pytest_dagorder.planning.facts import Facts

# -- the K/N value -----------------------------------------------------------------


@pytest.mark.parametrize("spec, want", [("1/1", (1, 1)), ("2/4", (2, 4)), (" 4/4 ", (4, 4)),
                                        ("10/12", (10, 12))])
def test_a_shard_spec_is_read(spec: str, want: tuple[int, int]) -> None:
    assert parse_spec(spec) == want


@pytest.mark.parametrize("spec", ["0/4", "5/4", "x", "", "2", "2/", "/4", "1/0", "-1/4",
                                  "2/4/8", "a/b", "1.5/4"])
def test_a_bad_shard_spec_names_the_value(spec: str) -> None:
    with pytest.raises(ShardSpecError) as info:
        parse_spec(spec)
    assert info.value.spec == spec
    assert repr(spec) in str(info.value)


# -- components and balance -------------------------------------------------------


def test_edges_and_labels_join_tests_and_outside_edges_do_not() -> None:
    ids = ["m::a", "m::b", "m::c", "m::d", "m::e", "m::f"]
    requires = [(), (0,), (), (), (6,), (6,)]  # 6: a prerequisite outside the run
    after = [(), (), (1,), (), (), ()]
    labels = [None, None, None, "g", None, "g"]
    comps = components(ids, requires, after, labels)
    assert sorted(c.members for c in comps) == [(0, 1, 2), (3, 5), (4,)]
    # Named by the smallest node id.
    assert {c.members: c.key for c in comps}[(3, 5)] == "m::d"


def test_longest_first_into_the_lightest_part() -> None:
    ids = [f"t{i}" for i in range(6)]
    rec = {"t0": 5.0, "t1": 4.0, "t2": 3.0, "t3": 3.0, "t4": 2.0, "t5": 1.0}
    split = partition(ids, [()] * 6, [()] * 6, 2, recorded=rec)
    assert sorted(split.loads) == [9.0, 9.0]


def test_tests_without_a_record_count_as_the_mean() -> None:
    ids = ["a", "b", "c", "d"]
    split = partition(ids, [()] * 4, [()] * 4, 2, recorded={"a": 3.0, "b": 1.0})
    # c and d count 2.0 each.
    assert split.total == 8.0
    assert sorted(split.loads) == [4.0, 4.0]


def test_an_oversized_component_gets_a_part_to_itself() -> None:
    ids = ["big1", "big2", "s1", "s2", "s3"]
    requires = [(), (0,), (), (), ()]
    split = partition(ids, requires, [()] * 5, 2,
                      recorded={"big1": 50, "big2": 50, "s1": 1, "s2": 1, "s3": 1})
    assert split.part[0] == split.part[1]
    assert all(split.part[i] != split.part[0] for i in (2, 3, 4))
    assert split.largest is not None and split.largest.key == "big1"


def test_more_parts_than_components_leaves_parts_empty() -> None:
    split = partition(["a", "b"], [(), (0,)], [(), ()], 4)
    assert split.part[0] == split.part[1]
    assert sorted(split.loads) == [0.0, 0.0, 0.0, 2.0]


# -- properties ---------------------------------------------------------------------


#: The words of 1 to 4 letters of "abcxyz", numbered shortest first.
WORDS = sum(6**length for length in range(1, 5))


def word(k: int) -> str:
    """The ``k``-th of the :data:`WORDS` (one draw of an int: a drawn text is a draw a letter)."""
    length = 1
    while k >= 6**length:
        k -= 6**length
        length += 1
    return "".join("abcxyz"[k // 6**e % 6] for e in reversed(range(length)))


@st.composite
def suites(draw: st.DrawFn) -> tuple[list[str], list[list[int]], list[list[int]],
                                     list[str | None], dict[str, float], int]:
    n = draw(st.integers(1, 40))
    names = [word(k) for k in draw(st.lists(st.integers(0, WORDS - 1), min_size=n, max_size=n,
                                             unique=True))]
    ids = [f"tests/test_{k % 3}.py::test_{name}" for k, name in enumerate(names)]
    requires: list[list[int]] = []
    after: list[list[int]] = []
    for i in range(n):
        # Edges point back (a DAG); half of them lead outside the run (index n):
        # drawn from 0 .. 2i - 1, the upper half outside (a strategy of fixed
        # bounds is built once; ``st.integers(...) | st.just(n)`` was built per task).
        requires.append([p if p < i else n
                         for p in draw(st.lists(st.integers(0, 2 * i - 1), max_size=2))]
                        if i else [])
        after.append(draw(st.lists(st.integers(0, i - 1), max_size=1)) if i else [])
    labels = draw(st.lists(st.sampled_from([None, None, None, "g1", "g2"]), min_size=n,
                           max_size=n))
    recorded = {nid: draw(st.floats(0, 100, allow_nan=False)) for nid in ids
                if draw(st.booleans())}
    parts = draw(st.integers(1, 6))
    return ids, requires, after, labels, recorded, parts


@settings(max_examples=200, deadline=None)
@given(suites(), st.randoms(use_true_random=False))
def test_parts_are_disjoint_complete_keep_components_whole_and_ignore_order(
        suite: tuple[list[str], list[list[int]], list[list[int]], list[str | None],
                     dict[str, float], int],
        rnd: random.Random) -> None:
    ids, requires, after, labels, recorded, parts = suite
    n = len(ids)
    split = partition(ids, requires, after, parts, labels=labels, recorded=recorded)
    # Every test in exactly one part, a valid one.
    assert len(split.part) == n
    assert all(0 <= p < parts for p in split.part)
    assert sorted(i for k in range(parts) for i in split.members(k)) == list(range(n))
    # Every edge and every label inside one part.
    for i in range(n):
        for p in (*requires[i], *after[i]):
            if p < n:
                assert split.part[i] == split.part[p]
    for i in range(n):
        for j in range(n):
            if labels[i] is not None and labels[i] == labels[j]:
                assert split.part[i] == split.part[j]
    # Balance: no part above max(fair share, largest component) by more than
    # the greedy bound (a component's weight).
    largest = split.largest
    assert largest is not None
    assert max(split.loads) <= split.total / parts + largest.weight + 1e-9
    # The same split, by node id, whatever the collection order.
    order = list(range(n))
    rnd.shuffle(order)
    pos = {old: new for new, old in enumerate(order)}
    moved = {nid: k for k, nid in enumerate(ids)}
    shuffled = partition(
        [ids[i] for i in order],
        [[pos[p] if p < n else p for p in requires[i]] for i in order],
        [[pos[p] for p in after[i]] for i in order],
        parts, labels=[labels[i] for i in order], recorded=dict(reversed(recorded.items())))
    assert {ids[i]: shuffled.part[pos[i]] for i in range(n)} == {
        nid: split.part[moved[nid]] for nid in ids}
    assert shuffled.loads == split.loads


SCRIPT = """
import json, random
from pytest_dagorder.core.shards import partition
rnd = random.Random(7)
ids = [f"tests/test_{i % 9}.py::test_{i}" for i in range(600)]
requires = [[i - 1 - rnd.randrange(i % 10)] if i % 10 and rnd.random() < 0.5 else []
            for i in range(600)]
labels = [rnd.choice(["a", "b", "c"]) if rnd.random() < 0.01 else None for _ in ids]
rec = {nid: rnd.random() * 10 for nid in ids if rnd.random() < 0.8}
# Sets and dicts built in hash order, as a careless implementation would.
split = partition(ids, requires, [[] for _ in ids], 4, labels=labels, recorded=rec)
print(json.dumps([split.part, split.loads, split.largest.weight]))
"""


def test_the_split_is_the_same_under_hash_seeds() -> None:
    outs = outputs_under_hash_seeds(SCRIPT)
    assert outs[0] == outs[1] == outs[2]
    part, loads, largest = outs[0]
    assert len(set(part)) == 4 and max(loads) <= 1.05 * max(sum(loads) / 4, largest)


# -- the durations file -------------------------------------------------------------


def test_a_missing_file_is_a_first_run(tmp_path: Path) -> None:
    read = read_file(tmp_path / "nope.json")
    assert (read.records, read.problem, read.exists) == ({}, None, False)


@pytest.mark.parametrize("text, why", [
    ("{not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    ("\udcff", None),
])
def test_a_malformed_file_is_one_line_naming_it(tmp_path: Path, text: str,
                                                  why: str | None) -> None:
    path = tmp_path / "d.json"
    if why is None:
        path.write_bytes(b"\xff\xfe{")
    else:
        path.write_text(text, encoding="utf-8")
    read = read_file(path)
    assert read.records == {} and not read.whole
    assert read.problem is not None and "\n" not in read.problem
    if why is not None:
        assert why in read.problem


def test_pytest_splits_file_is_read_as_is_and_bad_entries_left_out(tmp_path: Path) -> None:
    path = tmp_path / ".test_durations"
    path.write_text(json.dumps({"t.py::a": 1.5, "t.py::b": 2, "t.py::c": "x", "t.py::d": -1,
                                "t.py::e": True}), encoding="utf-8")
    read = read_file(path)
    assert (read.records, read.problem) == ({"t.py::a": 1.5, "t.py::b": 2.0}, None)
    assert read.dropped == ("t.py::c", "t.py::d", "t.py::e") and not read.whole


@pytest.mark.parametrize("text", [
    '{\n\t"a::x": 1.0,\n\t"b::y": 2\n}\n',
    '{\n    "a::x": 1.0,\n    "b::y": 2\n}',
    '\ufeff{\n  "a::x": 1.0,\n  "b::y": 2\n}\n',
    '[\n    [\n        "a::x",\n        1.0\n    ],\n    [\n        "b::y",\n        2\n    ]\n]',
], ids=["tabs", "pytest-split", "bom", "pairs"])
def test_a_rewrite_of_what_was_read_gives_the_file_back(tmp_path: Path, text: str) -> None:
    path = tmp_path / "d.json"
    path.write_bytes(text.encode("utf-8"))
    read = read_file(path)
    assert read.whole and read.records == {"a::x": 1.0, "b::y": 2.0}
    assert write_file(path, merged(read.records, {}, None), read.layout) is None
    assert path.read_bytes() == text.replace(": 2\n", ": 2.0\n").replace(
        "2\n    ]", "2.0\n    ]").encode("utf-8")


def test_a_file_on_one_line_is_rewritten_one_entry_a_line(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text('{"b::y": 2.5, "a::x": 1.0}', encoding="utf-8")
    read = read_file(path)
    write_file(path, merged(read.records, {}, None), read.layout)
    assert path.read_text(encoding="utf-8") == '{\n  "a::x": 1.0,\n  "b::y": 2.5\n}\n'


def test_merging_keeps_other_tests_unless_the_whole_suite_ran() -> None:
    old = {"t.py::gone": 1.0, "t.py::a": 2.0, "other/t.py::x": 3.0}
    measured = {"t.py::a": 2.123456789, "t.py::new": 0.5}
    assert merged(old, measured, None) == {
        "other/t.py::x": 3.0, "t.py::a": 2.1235, "t.py::gone": 1.0, "t.py::new": 0.5}
    # The whole suite under "t.py" ran: what it did not collect there is gone;
    # other/ was not looked at.
    suite = Suite(frozenset({"t.py::a", "t.py::new"}), ("t.py",))
    assert merged(old, measured, suite) == {
        "other/t.py::x": 3.0, "t.py::a": 2.1235, "t.py::new": 0.5}
    everything = Suite(frozenset({"t.py::a", "t.py::new"}), ("",))
    assert list(merged(old, measured, everything)) == ["t.py::a", "t.py::new"]


def test_the_file_is_sorted_one_entry_a_line_and_rewrites_stably(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "d.json"
    rec = merged({}, {"b::x": 1.0, "a::y": 0.25}, None)
    # A folder that is not there is never made (a typo would write elsewhere).
    assert "not written" in str(write_file(path, rec))
    assert not path.parent.exists()
    path.parent.mkdir()
    assert write_file(path, rec) is None
    text = path.read_text(encoding="utf-8")
    assert text.splitlines() == ["{", '  "a::y": 0.25,', '  "b::x": 1.0', "}"]
    # A re-run where one test changed changes one line.
    write_file(path, merged(read_file(path).records, {"b::x": 1.5}, None))
    changed = [a for a, b in zip(text.splitlines(), path.read_text().splitlines(), strict=True)
               if a != b]
    assert changed == ['  "b::x": 1.0']
    assert not list(path.parent.glob(".*.tmp"))


SETTINGS = Settings(affinity="module", on_failure="skip", with_prerequisites=False,
                    ignore_durations=False, automark_dependency=False,
                    ignore_unknown_dependency=False)


def test_the_selection_facts_travel_and_the_controller_decides_what_they_mean() -> None:
    facts = Facts(["t.py::a"], [("t.py", 0, "a")], ["t.py"], [None],
                  shard=ShardNote(1, 2, 1, 2, 1.0, None, True, False),
                  complete=True, deselected=3, shard_left=1)
    back = wire.decode(wire.encode(facts))
    assert back == facts
    # A reordered collection (a hook reordered session.items after planning) keeps them.
    two = dataclasses.replace(facts, ids=["t.py::a", "t.py::b"],
                              locations=[("t.py", 0, "a"), ("t.py", 1, "b")],
                              module_scopes=["t.py"] * 2, class_scopes=[None] * 2)
    moved = two.in_order(["t.py::b", "t.py::a"])
    assert moved.ids == ["t.py::b", "t.py::a"]
    assert (moved.shard, moved.complete, moved.deselected, moved.shard_left) == (
        facts.shard, True, 3, 1)
    # The part left tests to others: not the whole suite, for a durations file.
    decided = decide_xdist(facts, SETTINGS, {})
    assert (decided.whole, decided.empty_part) == (False, False)
    assert decided.header[1] == "dagorder: shard 1/2: 1 of 2 tests, about 1.0 s recorded"
    assert decide_xdist(dataclasses.replace(facts, shard_left=0), SETTINGS, {}).whole
    empty = Facts([], [], [], [], complete=True, shard_left=2)
    assert decide_xdist(empty, SETTINGS, {}).empty_part


def test_the_header_line_reads_as_documented() -> None:
    from pytest_dagorder.core import wording

    assert wording.shard_header(2, 4, 1234, 5000, 192.0, None) == (
        "dagorder: shard 2/4: 1,234 of 5,000 tests, about 3 min 12 s recorded")
    assert wording.shard_header(1, 2, 3, 4, None, None).endswith(
        "no durations recorded (split by test count)")
    assert wording.shard_header(6, 6, 0, 6, 0.0, None).endswith(
        ": 0 of 6 tests: fewer groups of tests that must stay together than parts; "
        "nothing to run, so the part passes")
    assert "passes" not in wording.shard_header(1, 2, 0, 0, None, None)
    assert wording.shard_header(2, 3, 0, 8, None, None, selected_elsewhere=True) == (
        "dagorder: shard 2/3: 0 of 8 selected tests: they all lie in other parts; nothing "
        "to run, so the part passes")
    assert wording.about(3725) == "1 h 2 min" and wording.about(2.25) == "2.2 s"
