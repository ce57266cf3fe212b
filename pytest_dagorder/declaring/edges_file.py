"""The edges file (``--dag-edges PATH``): declarations kept beside the suite, not in it.

``--dag-find-missing`` writes what it found here; every later run reads it,
so a suite becomes safe for ``-n`` without editing its tests.  The file is
JSON, committed like the durations file::

    {"version": 1,
     "edges": [{"test": "tests/test_b.py::test_read",
                "after": "tests/test_a.py::test_write",
                "same_process": false}],
     "resources": [{"name": "out_report.txt",
                    "tests": ["tests/test_x.py::test_a", "tests/test_y.py::test_b"]}],
     "groups": [{"name": "tests/test_db.py",
                 "tests": ["tests/test_db.py::test_a", "tests/test_db.py::test_b"]}],
     "verdicts": [{"test": "tests/test_b.py::test_login",
                   "after": "tests/test_b.py::test_signup", "separable": true,
                   "probe": "", "fingerprint": "3f0c..."}],
     "fences": [{"test": "tests/test_c.py::test_last", "free": true, "why": "",
                 "fingerprint": "9a1e..."}]}

An edge is ordering only (``run_after``: the serial order the suite relied
on, whatever the prerequisite's outcome); ``same_process`` says the test
read state its prerequisite left in the process (a module global, an
environment variable), so the two also run on one worker (an
``xdist_group``).  A resource is a ``dag_resource`` of each test named; a
group, an ``xdist_group`` of its tests (those that share one fixture
instance that sets up a file or service at a fixed place: the module stays
whole on one worker).
Entries naming a test this session did not collect are left out, and
counted.  A file that cannot be read is a usage error, never written over.

A verdict is evidence about a declared edge (``declaring/evidence.py`` reads
it): whether the test passed in a fresh process after its prerequisites
ran in another (``separable``), or which probe failed (``probe``: the
test's id and outcome), with a fingerprint of the files the probe rested on;
a verdict whose fingerprint no longer matches is void.

A fence verdict is evidence about a test's place in pytest-order's order
(``decide.fences``): whether the test passed with none of the tests sorted
before it run first but its declared prerequisites (``free``), or why not
(``why``), with a fingerprint of its own module and ``conftest.py`` files.
Files without the key read as before: every fence holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest

from ..options.markers import RESOURCE, RUN_AFTER

VERSION: Final = 1
#: The ``xdist_group`` label prefix of tests the file joins on one worker.
GROUP_PREFIX: Final = "dag-edges:"


@dataclass(frozen=True, slots=True)
class FileEdge:
    test: str
    after: str
    same_process: bool = False


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a probe showed about the declared edge ``after -> test``."""

    test: str
    after: str
    #: The test passed in a fresh process after ``after`` ran in another.
    separable: bool
    #: Why not: the probe that failed ("" when separable).
    probe: str
    #: Of the files the probe rested on (``evidence.fingerprint``).
    fingerprint: str


@dataclass(frozen=True, slots=True)
class FenceVerdict:
    """What the screening showed about the test's pytest-order fences."""

    test: str
    #: The test passed with no test sorted before it run first but its declared
    #: prerequisites, and leaves nothing an earlier test could read (see
    #: ``finder/find_missing.py``): no fence need hold it.
    free: bool
    #: Why not ("" when free).
    why: str
    #: Of the files the screening rested on (``evidence.fingerprint``).
    fingerprint: str


@dataclass
class EdgesFile:
    edges: list[FileEdge] = field(default_factory=list)
    #: Resource name -> the tests that use it, in file order.
    resources: dict[str, list[str]] = field(default_factory=dict)
    verdicts: list[Verdict] = field(default_factory=list)
    #: Group name -> its tests (an ``xdist_group`` each), in file order.
    groups: dict[str, list[str]] = field(default_factory=dict)
    fences: list[FenceVerdict] = field(default_factory=list)

    def merged(self, other: EdgesFile) -> EdgesFile:
        """This file's entries, then ``other``'s new ones (each edge and test once);
        ``other``'s verdicts replace this file's on the same edge, its fence
        verdicts this file's on the same test (newer evidence)."""
        seen = {(e.test, e.after) for e in self.edges}
        edges = [*self.edges, *(e for e in other.edges if (e.test, e.after) not in seen)]
        resources = {name: list(tests) for name, tests in self.resources.items()}
        for name, tests in other.resources.items():
            have = resources.setdefault(name, [])
            have.extend(t for t in tests if t not in have)
        newer = {(v.test, v.after) for v in other.verdicts}
        verdicts = [*(v for v in self.verdicts if (v.test, v.after) not in newer),
                    *other.verdicts]
        groups = {name: list(tests) for name, tests in self.groups.items()}
        for name, tests in other.groups.items():
            have = groups.setdefault(name, [])
            have.extend(t for t in tests if t not in have)
        newest = {v.test for v in other.fences}
        fences = [*(v for v in self.fences if v.test not in newest), *other.fences]
        return EdgesFile(edges, resources, verdicts, groups, fences)


class EdgesFileError(ValueError):
    """The file exists but is not an edges file; ``path`` names it."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"--dag-edges {path}: {why}; fix or delete the file "
                         "(pytest --dag-find-missing --dag-edges PATH writes a new one)")
        self.path = path


def read(path: Path) -> EdgesFile:
    """The file's entries (an empty file record when it does not exist yet)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return EdgesFile()
    except OSError as exc:
        raise EdgesFileError(path, f"cannot be read ({exc.strerror})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise EdgesFileError(path, f"is not JSON ({exc})") from None
    return _parse(path, data)


def _parse(path: Path, data: Any) -> EdgesFile:
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise EdgesFileError(path, f"is not a version {VERSION} edges file")
    out = EdgesFile()
    for entry in data.get("edges", []):
        if (not isinstance(entry, dict) or not isinstance(entry.get("test"), str)
                or not isinstance(entry.get("after"), str)):
            raise EdgesFileError(path, f"edge {entry!r} needs a 'test' and an 'after' node id")
        out.edges.append(FileEdge(entry["test"], entry["after"],
                                  bool(entry.get("same_process", False))))
    for entry in data.get("resources", []):
        if (not isinstance(entry, dict) or not isinstance(entry.get("name"), str)
                or not isinstance(entry.get("tests"), list)
                or not all(isinstance(t, str) for t in entry["tests"])):
            raise EdgesFileError(path, f"resource {entry!r} needs a 'name' and a list of "
                                       "'tests'")
        out.resources.setdefault(entry["name"], []).extend(entry["tests"])
    for entry in data.get("groups", []):
        if (not isinstance(entry, dict) or not isinstance(entry.get("name"), str)
                or not isinstance(entry.get("tests"), list)
                or not all(isinstance(t, str) for t in entry["tests"])):
            raise EdgesFileError(path, f"group {entry!r} needs a 'name' and a list of 'tests'")
        out.groups.setdefault(entry["name"], []).extend(entry["tests"])
    for entry in data.get("verdicts", []):
        if (not isinstance(entry, dict)
                or not all(isinstance(entry.get(k), str)
                           for k in ("test", "after", "probe", "fingerprint"))
                or not isinstance(entry.get("separable"), bool)):
            raise EdgesFileError(path, f"verdict {entry!r} needs 'test', 'after', 'probe' and "
                                       "'fingerprint' strings and a boolean 'separable'")
        out.verdicts.append(Verdict(entry["test"], entry["after"], entry["separable"],
                                    entry["probe"], entry["fingerprint"]))
    for entry in data.get("fences", []):
        if (not isinstance(entry, dict)
                or not all(isinstance(entry.get(k), str) for k in ("test", "why", "fingerprint"))
                or not isinstance(entry.get("free"), bool)):
            raise EdgesFileError(path, f"fence verdict {entry!r} needs 'test', 'why' and "
                                       "'fingerprint' strings and a boolean 'free'")
        out.fences.append(FenceVerdict(entry["test"], entry["free"], entry["why"],
                                       entry["fingerprint"]))
    return out


def write(path: Path, found: EdgesFile) -> None:
    """Write ``found`` (merged with what the file holds) through a temporary file."""
    whole = read(path).merged(found)
    doc = {
        "version": VERSION,
        "edges": [{"test": e.test, "after": e.after, "same_process": e.same_process}
                  for e in whole.edges],
        "resources": [{"name": name, "tests": tests} for name, tests in whole.resources.items()],
        "groups": [{"name": name, "tests": tests} for name, tests in whole.groups.items()],
        "verdicts": [{"test": v.test, "after": v.after, "separable": v.separable,
                      "probe": v.probe, "fingerprint": v.fingerprint}
                     for v in whole.verdicts],
    }
    if whole.fences:  # only where the suite has pytest-order ordinals
        doc["fences"] = [{"test": v.test, "free": v.free, "why": v.why,
                          "fingerprint": v.fingerprint} for v in whole.fences]
    path.parent.mkdir(parents=True, exist_ok=True)
    spare = path.with_name(path.name + ".tmp")
    spare.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    spare.replace(path)


def apply(path: Path, items: Sequence[pytest.Item]) -> tuple[str, bool, int, int, int]:
    """Add the file's declarations to ``items`` as markers; what it added (see
    ``facts.EdgesFileNote``)."""
    if not path.exists():
        return str(path), False, 0, 0, 0
    try:
        found = read(path)
    except EdgesFileError as exc:
        raise pytest.UsageError(str(exc)) from None
    by_id = {it.nodeid: it for it in items}
    edges = stale = 0
    own = {nid: label for nid, it in by_id.items()
           if (label := _own_group(it)) is not None}
    labelled: dict[str, str] = {}  # a file group's tests without a label of their own
    for name, tests in found.groups.items():
        present = [t for t in tests if t in by_id]
        stale += len(tests) - len(present)
        for nid in present:
            if nid not in own:
                own[nid] = labelled[nid] = GROUP_PREFIX + name
    groups = {**labelled,
              **_groups([e for e in found.edges if e.same_process], list(by_id), own)}
    for e in found.edges:
        item = by_id.get(e.test)
        if item is None or e.after not in by_id:
            stale += 1
            continue
        item.add_marker(getattr(pytest.mark, RUN_AFTER)(e.after))
        edges += 1
    for nodeid, label in groups.items():
        # Put first, so that it is the closest: a test's own xdist_group joins
        # the group (its label, or the group's, as :func:`_groups` chose).
        by_id[nodeid].add_marker(pytest.mark.xdist_group(label), append=False)
    resources = 0
    for name, tests in found.resources.items():
        users = [by_id[t] for t in tests if t in by_id]
        stale += len(tests) - len(users)
        for item in users:
            item.add_marker(getattr(pytest.mark, RESOURCE)(name))
        resources += bool(users)
    return str(path), True, edges, resources, stale


def _own_group(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def _groups(edges: Iterable[FileEdge], order: Sequence[str],
            own: Mapping[str, str] = {}) -> dict[str, str]:
    """Node id -> group label, for the tests joined by same-process edges (both
    collected) and the tests that share an ``xdist_group`` (``own``) with one of them.

    A group holding tests with their own ``xdist_group`` takes the first such
    label (in collection order), and every test of the labels it joined gets it:
    a same-process edge is kept whatever labels its two tests carry.  Tests whose
    label does not change are left out.
    """
    rank = {nid: k for k, nid in enumerate(order)}
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    def join(x: str, y: str) -> None:
        a, b = sorted((root(x), root(y)), key=rank.__getitem__)
        parent.setdefault(a, a)
        parent[b] = a

    first: dict[str, str] = {}  # own label -> its first test
    for nid in order:
        label = own.get(nid)
        if label is not None:
            first.setdefault(label, nid)
    joined = False
    for e in edges:
        if e.test in rank and e.after in rank:
            join(e.test, e.after)
            joined = True
    if not joined:
        return {}
    touched = {label for nid, label in own.items() if nid in parent}
    for nid, label in own.items():
        if nid in rank and label in touched:
            join(nid, first[label])
    members = sorted(parent, key=rank.__getitem__)
    name: dict[str, str] = {}
    for nid in members:  # collection order: the first own label names the group
        r = root(nid)
        if r not in name and nid in own:
            name[r] = own[nid]
    out: dict[str, str] = {}
    for nid in members:
        label = name.get(root(nid), GROUP_PREFIX + root(nid))
        if own.get(nid) != label:
            out[nid] = label
    return out


def edge_pairs(path: Path) -> frozenset[tuple[str, str]]:
    """``(prerequisite, dependent)`` node ids of the file's edges (none if it is unreadable)."""
    try:
        found = read(path)
    except EdgesFileError:
        return frozenset()
    return frozenset((e.after, e.test) for e in found.edges)
