"""declaring/evidence.py and the edges file's verdicts and groups: which declared edges
valid evidence lifts, what voids it, and how the file's groups join a test's own
``xdist_group``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_dagorder.deciding.decide import note_lines
from pytest_dagorder.declaring import edges_file, evidence
from pytest_dagorder.declaring.edges_file import FileEdge, _groups
from pytest_dagorder.declaring.notes import EvidenceNote, FenceNote


def suite(root: Path) -> tuple[list[str], list[tuple[int, ...]]]:
    (root / "pkg").mkdir()
    (root / "conftest.py").write_text("# top\n")
    (root / "pkg" / "conftest.py").write_text("# pkg\n")
    (root / "pkg" / "test_a.py").write_text("def test_a(): pass\ndef test_b(): pass\n")
    (root / "test_c.py").write_text("def test_c(): pass\n")
    ids = ["pkg/test_a.py::test_a", "pkg/test_a.py::test_b", "test_c.py::test_c"]
    return ids, [(), (0,), (1,)]


def verdicts(root: Path, ids: list[str], separable: dict[tuple[int, int], bool]) -> Path:
    prints = evidence.Fingerprints(root)
    path = root / "edges.json"
    edges_file.write(path, edges_file.EdgesFile(verdicts=[
        edges_file.Verdict(ids[d], ids[p], free, "" if free else f"{ids[d]} failed",
                           prints.of((ids[p], ids[d])))
        for (p, d), free in separable.items()]))
    return path


def test_valid_separable_verdicts_lift_their_edges(tmp_path: Path) -> None:
    ids, requires = suite(tmp_path)
    path = verdicts(tmp_path, ids, {(0, 1): True, (1, 2): False})
    lifted, note = evidence.lifted(path, tmp_path, ids, requires, [()] * 3)
    assert lifted == ((0, 1),)
    assert note == ("edges.json", 1, 2, 0, ((1, 2, "test_c.py::test_c failed"),))
    assert evidence.header_line(note) == "dagorder: 1 of 2 edges free by evidence from edges.json"


def test_a_changed_module_or_conftest_on_the_path_voids_the_verdict(tmp_path: Path) -> None:
    ids, requires = suite(tmp_path)
    path = verdicts(tmp_path, ids, {(0, 1): True, (1, 2): True})
    (tmp_path / "pkg" / "conftest.py").write_text("# pkg, changed\n")
    lifted, note = evidence.lifted(path, tmp_path, ids, requires, [()] * 3)
    # Both edges rest on pkg/conftest.py (test_b's path); neither is lifted.
    assert lifted == ()
    assert note is not None and note[1:4] == (0, 2, 2)
    assert "2 stale" in evidence.header_line(note)
    assert "renew with pytest --dag-find-missing -n 2 --dag-edges=edges.json" in \
        evidence.header_line(note)


def test_a_file_outside_the_tests_paths_does_not_void_it(tmp_path: Path) -> None:
    ids, requires = suite(tmp_path)
    path = verdicts(tmp_path, ids, {(0, 1): True})
    (tmp_path / "test_c.py").write_text("def test_c(): assert 1\n")
    lifted, _ = evidence.lifted(path, tmp_path, ids, requires, [()] * 3)
    assert lifted == ((0, 1),)


def test_a_file_without_verdicts_says_nothing(tmp_path: Path) -> None:
    ids, requires = suite(tmp_path)
    path = tmp_path / "edges.json"
    path.write_text(json.dumps({"version": 1, "edges": [], "resources": []}))
    assert evidence.lifted(path, tmp_path, ids, requires, [()] * 3) == ((), None)


def test_newer_verdicts_replace_older_ones_on_the_same_edge(tmp_path: Path) -> None:
    path = tmp_path / "edges.json"
    edges_file.write(path, edges_file.EdgesFile(verdicts=[
        edges_file.Verdict("b", "a", True, "", "1"), edges_file.Verdict("c", "b", True, "", "2")]))
    edges_file.write(path, edges_file.EdgesFile(verdicts=[
        edges_file.Verdict("b", "a", False, "b failed", "3")]))
    assert [(v.test, v.separable) for v in edges_file.read(path).verdicts] == [
        ("c", True), ("b", False)]


def test_the_header_carries_the_evidence_line() -> None:
    from pytest_dagorder.planning.facts import Facts

    facts = Facts(["a", "b"], [None, None], [None, None], [None, None],
                  evidence=EvidenceNote("e.json", 3, 5, 1, ()))
    assert note_lines(facts) == [
        "dagorder: 3 of 5 edges free by evidence from e.json (1 stale: a file they rest on "
        "changed; renew with pytest --dag-find-missing -n 2 --dag-edges=e.json)"]


def test_lifted_positions_cross_the_wire_and_follow_a_reorder() -> None:
    from pytest_dagorder.drivers.distributed import wire
    from pytest_dagorder.planning.facts import Facts

    facts = Facts(["a", "b", "c"], [None] * 3, [None] * 3, [None] * 3, graph=True,
                  requires=[(), (0,), (1,)], lifted=((0, 1),),
                  evidence=EvidenceNote("e.json", 1, 2, 0, ((1, 2, "c failed"),)))
    assert wire.decode(wire.encode(facts)) == facts
    moved = facts.in_order(["b", "a", "c"])
    assert moved.lifted == ((1, 0),)
    assert moved.evidence is not None and moved.evidence[4] == ((0, 2, "c failed"),)


def test_a_same_process_edge_joins_the_dependents_own_xdist_group() -> None:
    order = ["a", "b", "c", "d"]
    # b carries its own label "db", shared with d; the file joins a -> b in one process.
    got = _groups([FileEdge("b", "a", True)], order, {"b": "db", "d": "db"})
    assert got == {"a": "db"}
    # Without a label, the group is named after its first test.
    assert _groups([FileEdge("c", "a", True)], order) == {
        "a": "dag-edges:a", "c": "dag-edges:a"}


def fence_file(root: Path, ids: list[str], free: dict[int, bool]) -> Path:
    prints = evidence.Fingerprints(root)
    path = root / "edges.json"
    edges_file.write(path, edges_file.EdgesFile(fences=[
        edges_file.FenceVerdict(ids[k], ok, "" if ok else "failed in the screening",
                                prints.of((ids[k],)))
        for k, ok in free.items()]))
    return path


def test_fence_verdicts_free_their_tests_while_their_files_are_unchanged(
        tmp_path: Path) -> None:
    ids, _ = suite(tmp_path)
    path = fence_file(tmp_path, ids, {0: True, 1: False, 2: True})
    assert evidence.unfenced(path, tmp_path, ids) == (
        ["", "failed in the screening", ""], FenceNote("edges.json", 0))
    # test_c's module changed: its verdict is void (its fences hold), the others stand.
    (tmp_path / "test_c.py").write_text("def test_c(): assert 1\n")
    assert evidence.unfenced(path, tmp_path, [*ids, "test_d.py::test_d"]) == (
        ["", "failed in the screening", None, None], FenceNote("edges.json", 1))
    assert evidence.fence_line(FenceNote("edges.json", 1), 1, 2) == (
        "dagorder: 1 of 2 fenced tests free by evidence from edges.json (1 stale: a file "
        "they rest on changed; renew with pytest --dag-find-missing -n 2 "
        "--dag-edges=edges.json)")


def test_an_edges_file_without_fence_verdicts_reads_as_before_and_frees_nothing(
        tmp_path: Path) -> None:
    ids, _ = suite(tmp_path)
    path = tmp_path / "edges.json"
    path.write_text(json.dumps({"version": 1, "edges": [], "resources": [], "verdicts": []}))
    assert edges_file.read(path).fences == []
    assert evidence.unfenced(path, tmp_path, ids) == ([], None)
    # Written again, a file with no fence verdict gets no "fences" key.
    edges_file.write(path, edges_file.EdgesFile())
    assert "fences" not in json.loads(path.read_text())


def test_newer_fence_verdicts_replace_older_ones_and_a_bad_one_is_refused(
        tmp_path: Path) -> None:
    path = tmp_path / "edges.json"
    edges_file.write(path, edges_file.EdgesFile(fences=[
        edges_file.FenceVerdict("a", True, "", "1"), edges_file.FenceVerdict("b", True, "", "2")]))
    edges_file.write(path, edges_file.EdgesFile(fences=[
        edges_file.FenceVerdict("a", False, "failed", "3")]))
    assert [(v.test, v.free) for v in edges_file.read(path).fences] == [
        ("b", True), ("a", False)]
    path.write_text(json.dumps({"version": 1, "fences": [{"test": "a", "free": "yes"}]}))
    with pytest.raises(edges_file.EdgesFileError, match=r"fence verdict .* boolean 'free'"):
        edges_file.read(path)


def test_fence_verdicts_cross_the_wire_and_follow_a_reorder() -> None:
    from pytest_dagorder.drivers.distributed import wire
    from pytest_dagorder.planning.facts import Facts

    facts = Facts(["a", "b", "c"], [None] * 3, [None] * 3, [None] * 3, ordinals=[1, 2, -1],
                  fence_verdicts=["", None, "failed"], fence_evidence=FenceNote("e.json", 1))
    assert wire.decode(wire.encode(facts)) == facts
    assert facts.in_order(["c", "a", "b"]).fence_verdicts == ["failed", "", None]
