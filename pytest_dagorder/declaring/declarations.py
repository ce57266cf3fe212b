"""From collected items and their markers to plain edges between item indices.

This is the only place that knows how a target string names tests.  The
result is plain data (indices and messages) so that a worker can ship it to
the controller and the graph is built and validated by the pure core.

Lookup rules for a string target, from the item that declares it: the
item's class (``TestA::test_x`` style names below it), then its module, then
the rootdir (a full node id).  The first scope where the name matches wins.
A name matches an item's node id, every instance of a parametrized test
(``test_x`` for ``test_x[1]``, ``test_x[2]``), or a collector (a module,
class or directory: every test below it).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import pytest

from ..core import wording
from ..options.markers import DEPENDS_ON, RUN_AFTER
from ..shims.late_loading import Later
from ..shims.pytest_internals import wide_fixtures

if TYPE_CHECKING:
    import pytest_dagorder.declaring.foreign_wording as foreign_wording

    from ..core import graph as core_graph
else:
    core_graph = Later("pytest_dagorder.core.graph")  # only where a cycle may be
    # Only pytest-dependency's reader gives lenient edges: the migration layer is loaded.
    foreign_wording = Later("pytest_dagorder.declaring.foreign_wording")


@dataclass
class Problem:
    """A declaration that cannot be honoured, reported against ``nodeid``.

    ``shared`` marks a problem that many tests can have alike (a typo in a
    module-wide ``pytestmark``): ``(lead, tail)`` with ``message`` being
    ``f"{lead} {nodeid}: {tail}"``; :func:`merge_shared` reports those once.
    """

    nodeid: str
    message: str
    shared: tuple[str, str] | None = None


def merge_shared(problems: Sequence[Problem]) -> list[Problem]:
    """One problem per distinct shared problem, naming every test that has it.

    Reported against the first such test, in place of it; the others are dropped.
    """
    tests: dict[tuple[str, str], list[str]] = {}
    for p in problems:
        if p.shared is not None:
            tests.setdefault(p.shared, []).append(p.nodeid)
    out: list[Problem] = []
    for p in problems:
        if p.shared is None:
            out.append(p)
            continue
        names = tests.pop(p.shared, None)
        if names is None:
            continue  # merged into the first one
        lead, tail = p.shared
        out.append(Problem(p.nodeid, f"{lead} {wording.some_of(names)}: {tail}", p.shared))
    return out


@dataclass(frozen=True)
class Uncollectable:
    """Why the planner could not collect a module a target names.

    ``skipped``: the module skipped itself at import (``pytest.importorskip``,
    ``pytest.skip(..., allow_module_level=True)``), ``reason`` is its reason;
    otherwise it raised (or exited) and ``reason`` names the exception.
    """

    skipped: bool
    reason: str


@dataclass
class Declared:
    """What one reader found on one item: edges (indices into the index's items) and more.

    ``unknown`` lists the string targets that named nothing (the planner may
    collect more files and read again); ``skip`` is a reason to skip the
    test at run time, where the original plugin would have.  A reader
    returns this and touches nothing else: not the item, not the index.
    """

    requires: list[int] = field(default_factory=list)
    after: list[int] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    skip: str | None = None


@dataclass
class DeclaredEdges:
    """Edges over ``items`` (indices into it), plus every problem found."""

    requires: list[list[int]]
    after: list[list[int]]
    problems: list[Problem] = field(default_factory=list)
    declared: int = 0  # number of markers seen: zero means "no DAG here"
    unknown: list[str] = field(default_factory=list)  # string targets that named nothing
    skips: dict[int, str] = field(default_factory=dict)  # item index -> run-time skip reason
    #: The skips a foreign reader or a cycle it skips through decided (ini dag_strict).
    foreign: set[int] = field(default_factory=set)


class ForeignReader(Protocol):
    """Reader of another plugin's markers (pytest-dependency and friends, see
    the migration package): one :class:`Declared` per item."""

    #: The marker it reads: a session where no item carries it skips the reader.
    marker: str
    #: Whether a cycle among its edges skips tests instead of stopping the run
    #: (a plugin that never reorders skips a test whose prerequisite comes later).
    skips_cycles: bool

    def __call__(self, item: pytest.Item, index: Index, /) -> Declared: ...


class MarkerCensus:
    """Every item's markers, walked once: the marker names the session uses,
    and each item's ``depends_on`` / ``run_after`` markers (own or inherited).

    The markers of a test's collectors are read once per parent (siblings
    share them) instead of once per test as ``iter_markers_with_node`` does,
    in the same order (the test's own first, then upwards).  The planner asks
    :attr:`names` to skip readers of markers no test carries.
    """

    def __init__(self, items: Iterable[pytest.Item] = ()) -> None:
        self.names: set[str] = set()
        self._ours: dict[int, list[tuple[bool, pytest.Mark]]] = {}  # by id(item)
        self._above: dict[int, list[tuple[bool, pytest.Mark]]] = {}  # by id(parent)
        for item in items:
            self.ours(item)

    def ours(self, item: pytest.Item) -> list[tuple[bool, pytest.Mark]]:
        """``(on the item itself, marker)`` for each of its declarations, closest first."""
        found = self._ours.get(id(item))
        if found is None:
            found = self._ours[id(item)] = (
                self._read(item.own_markers, True) + self._inherited(item))
        return found

    def _inherited(self, item: pytest.Item) -> list[tuple[bool, pytest.Mark]]:
        above = self._above.get(id(item.parent))
        if above is None:
            above = []
            node = item.parent
            while node is not None:
                above += self._read(node.own_markers, False)
                node = node.parent
            self._above[id(item.parent)] = above
        return above

    def _read(self, marks: Iterable[pytest.Mark], own: bool) -> list[tuple[bool, pytest.Mark]]:
        out: list[tuple[bool, pytest.Mark]] = []
        for mark in marks:
            name = mark.name
            self.names.add(name)
            if name in (DEPENDS_ON, RUN_AFTER):
                out.append((own, mark))
        return out


class Index:
    """Every way a target can name items, over one list of items."""

    def __init__(self, items: Sequence[pytest.Item],
                 uncollectable: Mapping[str, Uncollectable] | None = None) -> None:
        self.items = items
        #: The items' node ids, read once (pytest makes the string on every read).
        self.ids = [item.nodeid for item in items]
        #: Node ids collected more than once (--keep-duplicates): naming one is ambiguous.
        self.repeated: set[str] = set()
        seen: set[str] = set()
        for nodeid in self.ids:
            (self.repeated if nodeid in seen else seen).add(nodeid)
        self.uncollectable = uncollectable or {}
        self.by_key: dict[str, list[int]] = {}
        # Suggestions by (scopes, target): a typo in a module-wide pytestmark
        # is looked up once, not once per test (difflib is the slow part).
        self._suggested: dict[tuple[tuple[str, ...], str], list[str]] = {}
        self._names: dict[tuple[str, ...], list[str]] = {}
        self._test_keys: set[str] | None = None  # the items' own keys, for suggest
        # By id of an item's parent: the keys of the collectors above it
        # (node ids, and their escaped spellings), and the prefixes a
        # relative name is tried under (the same for siblings).
        self._chains: dict[int, list[str]] = {}
        self._scopes: dict[int, list[str]] = {}
        self._by_function: dict[int, list[int]] | None = None  # see by_function
        self._params: dict[int, dict[tuple[str, str], int]] = {}  # see _wide_params
        by_key = self.by_key
        # Plain loops: this runs for every collected test in every process.
        for i, item in enumerate(items):
            for key in (*self._own_keys(item, self.ids[i]), *self._chain(item)):
                bucket = by_key.get(key)
                if bucket is None:
                    by_key[key] = [i]
                elif bucket[-1] != i:
                    bucket.append(i)

    @property
    def by_function(self) -> dict[int, list[int]]:
        """Items by ``id()`` of their test function (made on first use: only a
        target given as a function object needs it)."""
        if self._by_function is None:
            self._by_function = {}
            for i, item in enumerate(self.items):
                fn = getattr(item, "function", None)
                if fn is not None:
                    self._by_function.setdefault(id(fn), []).append(i)
        return self._by_function

    def _own_keys(self, item: pytest.Item, nodeid: str) -> list[str]:
        keys = [nodeid]
        if "@" in nodeid:
            suffix = _xdist_group_suffix(item)
            if suffix and nodeid.endswith(suffix):
                # Under --dist loadgroup xdist appends "@<groups>" to node ids;
                # names written without it must still find the test.
                keys.append(nodeid[: -len(suffix)])
        original = getattr(item, "originalname", None)
        if original and item.parent is not None and item.name != original:
            keys.append(f"{item.parent.nodeid}::{original}")
        return _with_escaped(keys)

    def _chain(self, item: pytest.Item) -> list[str]:
        """Keys of the collectors between the session and ``item``."""
        parent = item.parent
        chain = self._chains.get(id(parent))
        if chain is None:
            chain = _with_escaped(
                [node.nodeid for node in item.listchain()[1:-1] if node.nodeid])
            self._chains[id(parent)] = chain
        return chain

    def same_repetition(self, i: int, hit: list[int]) -> list[int]:
        """Of the items a bare target names from item ``i``, those of ``i``'s repetition.

        Under pytest-repeat, ``test_a[2-3]`` depending on ``test_b`` means
        ``test_b[2-3]``, as a repeat user expects: each repetition of the
        dependent depends on the same repetition of the target.  Items that
        are not repeated stay; if the target has no such repetition (other
        counts), every instance is meant, as without pytest-repeat.
        """
        step = _repetition(self.items[i])
        if step is None:
            return hit
        same = [j for j in hit if _repetition(self.items[j]) in (step, None)]
        if len(same) == len(hit) or all(_repetition(self.items[j]) != step for j in hit):
            return hit
        return same

    def same_instance(self, i: int, hit: list[int]) -> list[int]:
        """Of the items a bare target names from item ``i``, those ``i`` is paired with:
        the same repetition (:meth:`same_repetition`), and the same parameter
        of every fixture wider than function scope that both are
        parametrized by.

        ``test_count[pg]`` depending on ``test_insert``, both using a
        module-scoped ``db`` fixture with params ``sqlite`` and ``pg``,
        means ``test_insert[pg]``: pytest runs each fixture instance's tests
        together, and the dependent reads what its target left in that
        instance.  If no target has ``i``'s parameters, every instance is meant.
        """
        hit = self.same_repetition(i, hit)
        mine = self._wide_params(i)
        if not mine or len(hit) < 2:
            return hit
        same = [j for j in hit if _same_params(mine, self._wide_params(j))]
        return same or hit

    def _wide_params(self, i: int) -> dict[tuple[str, str], int]:
        """Item ``i``'s parameter index per parametrized fixture wider than function
        scope, keyed by (name, where defined); made on first use."""
        found = self._params.get(i)
        if found is None:
            item = self.items[i]
            indices = getattr(getattr(item, "callspec", None), "indices", None)
            found = {}
            if isinstance(indices, dict) and indices:
                for name, scope, where in wide_fixtures(item) or ():
                    if name in indices and scope != "function":
                        found[(name, where)] = indices[name]
            self._params[i] = found
        return found

    def lookup(self, key: str) -> list[int] | None:
        return self.by_key.get(key)

    def unreachable(self, target: str) -> tuple[str, Uncollectable] | None:
        """The collector (a module skipped or broken at import) holding ``target``, if any."""
        for nodeid, why in self.uncollectable.items():
            if target == nodeid or target.startswith(nodeid + "::"):
                return nodeid, why
        return None

    def scopes(self, item: pytest.Item) -> list[str]:
        """Prefixes a relative name is tried under, innermost first."""
        out = self._scopes.get(id(item.parent))
        if out is None:
            out = []
            cls = item.getparent(pytest.Class)
            if cls is not None:
                out.append(cls.nodeid + "::")
            mod = item.getparent(pytest.Module)
            if mod is not None:
                out.append(mod.nodeid + "::")
            out.append("")
            self._scopes[id(item.parent)] = out
        return out

    def resolve(self, item: pytest.Item, target: str) -> list[int] | None:
        """The items ``target`` names as seen from ``item`` (None: nothing)."""
        spellings = (target,) if target.isascii() else dict.fromkeys((target, escaped_id(target)))
        for prefix in self.scopes(item):
            for spelling in spellings:
                hit = self.lookup(prefix + spelling)
                if hit is not None:
                    return hit
        return None

    def find(self, item: pytest.Item, target: object) -> list[int] | None:
        """The items a ``@depends_on`` target names, seen from ``item`` (None: nothing).

        A string by :meth:`resolve`, a test function (or a method of it) by
        identity.  The one lookup both declarations and ``dag.result`` use.
        """
        if isinstance(target, str):
            target = target.strip()
            return self.resolve(item, target) if target else None
        if callable(target):
            return self.by_function.get(id(getattr(target, "__func__", target)))
        return None

    def suggest(self, item: pytest.Item, target: str, *, itself: bool = False) -> list[str]:
        """Close names of other tests, written the way the target was written.

        Only tests: a directory, module or class is a valid target, but one
        that names a typo's neighbour by accident ('tests' for 'test_x') is no
        help; nor is the test that wrote the target (``itself``: a target
        inherited from a module or class, written for all of its tests, may).
        """
        scopes = tuple(self.scopes(item))
        found = self._suggested.get((scopes, target))
        if found is None:
            names = self._names.get(scopes)
            if names is None:
                if self._test_keys is None:
                    self._test_keys = {key for i, it in enumerate(self.items)
                                       for key in self._own_keys(it, self.ids[i])}
                seen: dict[str, None] = {}
                for prefix in scopes:
                    for key in self.by_key:
                        if key not in self._test_keys:
                            continue
                        if prefix and key.startswith(prefix):
                            seen[key[len(prefix):]] = None
                        elif not prefix:
                            seen[key] = None
                names = self._names[scopes] = list(seen)
            # One more than shown: the test itself may be among them.
            found = difflib.get_close_matches(target, names, n=4, cutoff=0.6)
            self._suggested[(scopes, target)] = found
        if itself:
            return found[:3]
        return [name for name in found
                if [self.items[j] for j in self.resolve(item, name) or ()] != [item]][:3]


#: The parameter pytest-repeat gives each repetition (0-based; its id is "N-M").
REPEAT_PARAM = "__pytest_repeat_step_number"


def _repetition(item: pytest.Item) -> int | None:
    """Which repetition of its test ``item`` is under pytest-repeat (None: not repeated)."""
    callspec = getattr(item, "callspec", None)  # pytest.Function's parameter set
    if callspec is None:
        return None
    step = callspec.params.get(REPEAT_PARAM)
    return step if isinstance(step, int) else None


def _same_params(mine: Mapping[tuple[str, str], int],
                 theirs: Mapping[tuple[str, str], int]) -> bool:
    """No fixture parametrizes both with different parameters."""
    return all(theirs.get(key, k) == k for key, k in mine.items())


def _with_escaped(keys: list[str]) -> list[str]:
    """``keys``, each followed by its escaped spelling where that differs.

    With disable_test_id_escaping_and_forfeit_all_rights_to_community_support
    set, a test's node id keeps non-ascii characters; the escaped spelling
    must find the test too.  Nearly always all are ASCII: ``keys`` itself.
    """
    if "".join(keys).isascii():
        return keys
    out: list[str] = []
    for key in keys:
        out.append(key)
        if not key.isascii():
            out.append(escaped_id(key))
    return out


def escaped_id(name: str) -> str:
    """``name`` with its parametrize id written as pytest writes it in node ids.

    pytest escapes non-ascii ids (``test_p[ünï]`` is ``test_p[\\xfcn\\xef]``)
    with ``unicode_escape``; names before the ``[`` are never escaped.
    """
    head, bracket, ids = name.partition("[")
    if not bracket or ids.isascii():
        return name
    return head + bracket + ids.encode("unicode_escape").decode("ascii")


def _xdist_group_suffix(item: pytest.Item) -> str:
    """The "@name" suffix xdist's loadgroup mode gives this item's node id ("" if none)."""
    names = {
        str(m.args[0] if m.args else m.kwargs.get("name", "default"))
        for m in item.iter_markers("xdist_group")
    }
    return "@" + "_".join(sorted(names)) if names else ""


def resolve_items(
    items: Sequence[pytest.Item],
    readers: Sequence[ForeignReader] = (),
    uncollectable: Mapping[str, Uncollectable] | None = None,
    census: MarkerCensus | None = None,
) -> DeclaredEdges:
    """Read every item's declarations and resolve them against ``items``.

    ``uncollectable``: collectors (by node id) the planner failed to collect;
    a target below one of them is not "unknown" but skipped or broken.
    ``census``: the markers walked already (items it has not seen are walked here).
    """
    index = Index(items, uncollectable)
    res = DeclaredEdges([[] for _ in items], [[] for _ in items])
    unknown: dict[str, None] = {}
    lenient: dict[int, list[int]] = {}  # edges of readers that skip cycles, by dependent
    census = census if census is not None else MarkerCensus()
    ours = [census.ours(item) for item in items]
    # A foreign reader with nothing to read never builds its tables.
    readers = [r for r in readers if r.marker in census.names]
    for i, item in enumerate(items):
        for name, bucket in ((DEPENDS_ON, res.requires), (RUN_AFTER, res.after)):
            for own, mark in ours[i]:
                if mark.name != name:
                    continue
                res.declared += 1
                found = _resolve_mark(index, i, item, name, mark, own)
                bucket[i].extend(found.requires)
                if found.problems or found.unknown or found.skip is not None:
                    res.problems.extend(found.problems)
                    if found.skip is not None and i not in res.skips:
                        res.skips[i] = found.skip
                    unknown.update(dict.fromkeys(found.unknown))
        for reader in readers:
            found = reader(item, index)
            if found.requires or found.after or found.problems:
                res.declared += 1
            res.requires[i].extend(found.requires)
            if reader.skips_cycles and found.requires:
                lenient.setdefault(i, []).extend(found.requires)
            res.after[i].extend(found.after)
            res.problems.extend(found.problems)
            unknown.update(dict.fromkeys(found.unknown))
            if found.skip is not None and i not in res.skips:
                res.skips[i] = found.skip
                res.foreign.add(i)
    res.unknown = list(unknown)
    if lenient:
        _skip_cycles(res, lenient, index)
    return res


def _skip_cycles(res: DeclaredEdges, lenient: Mapping[int, list[int]], index: Index) -> None:
    """Drop the edges of ``lenient`` (by dependent) that close a cycle, skipping
    their dependents, as pytest-dependency skips a test whose prerequisite
    has not run yet; a cycle that needs another reader's edges stays an error."""
    ids = index.ids
    edges: list[list[int]] = [lenient.get(i, []) for i in range(len(ids))]
    for i, p, cycle in core_graph.cycle_breaks(edges):
        for _ in range(edges[i].count(p)):  # a name may be given twice
            res.requires[i].remove(p)
        if i not in res.skips:
            res.skips[i] = foreign_wording.foreign_cycle(
                index.items[i].name, ids[p], [ids[k] for k in cycle])
            res.foreign.add(i)


def _resolve_mark(
    index: Index,
    i: int,
    item: pytest.Item,
    name: str,
    mark: pytest.Mark,
    own: bool,
) -> Declared:
    """The targets of one marker, as a requires list (the caller files them by kind)."""
    if not mark.kwargs and mark.args:
        # The common case, every target a name that resolves: no message is
        # worded (any other case starts over below).
        edges = _all_named(index, i, item, mark.args, own)
        if edges is not None:
            return Declared(edges)
    reading = _Reading(index, i, item, name, own)
    if mark.kwargs:
        reading.problem(
            f"unexpected keyword {'argument' if len(mark.kwargs) == 1 else 'arguments'} "
            f"{', '.join(sorted(mark.kwargs))}; {name} takes test names or test functions only")
    if not mark.args:
        reading.problem(f"no target given; name at least one test, e.g. @{name}('test_create')")
    for target in mark.args:
        if isinstance(target, str) and target.strip():
            hit = reading.named(target)
        elif callable(target) and not isinstance(target, str):
            hit = reading.function(target)
        else:
            reading.problem(f"{target!r} is not a test name or test function; "
                            "pass strings such as 'test_create' or 'TestA::test_x'")
            continue
        if hit is not None:
            reading.add(target, hit)
    return reading.found


def _all_named(index: Index, i: int, item: pytest.Item, targets: Sequence[object],
               own: bool) -> list[int] | None:
    """The edges of ``targets`` if each is a name that resolves to tests
    collected once; None: some is not (the caller words why)."""
    edges: list[int] = []
    for target in targets:
        spelled = target.strip() if type(target) is str else None
        hit = index.resolve(item, spelled) if spelled else None
        if hit is None or (index.repeated and not index.repeated.isdisjoint(
                [index.ids[j] for j in hit])):
            return None
        if len(hit) > 1 and spelled and "[" not in spelled:
            hit = index.same_instance(i, hit)
        edges.extend(hit if own else [j for j in hit if j != i])
    return edges


@dataclass
class _Reading:
    """One marker of test ``i`` read target by target: what it found, and
    its problems worded alike (``@depends_on on ID: ...``)."""

    index: Index
    i: int
    item: pytest.Item
    name: str
    #: The test's own marker (else one of its class or module).
    own: bool
    found: Declared = field(default_factory=Declared)

    @property
    def nodeid(self) -> str:
        return self.index.ids[self.i]

    @property
    def lead(self) -> str:
        return f"@{self.name} on" if self.own else f"@{self.name} inherited by"

    def problem(self, tail: str, *, shared: bool = False) -> None:
        """A problem with the marker; ``shared``: many tests may have it alike
        (a module-wide marker), reported once (see :class:`Problem`)."""
        self.found.problems.append(Problem(self.nodeid, f"{self.lead} {self.nodeid}: {tail}",
                                           (self.lead, tail) if shared else None))

    def named(self, target: str) -> list[int] | None:
        """The tests a name targets (None: it names none, said why)."""
        index, item = self.index, self.item
        hit = index.find(item, target)
        if hit is not None and len(hit) > 1 and "[" not in target:
            hit = index.same_instance(self.i, hit)
        if hit is None and (gone := index.unreachable(target.strip())) is not None:
            module, why = gone
            if not why.skipped:
                self.problem(wording.target_uncollectable(target, module, why.reason),
                             shared=True)
            elif self.name == DEPENDS_ON:
                # Its tests never exist; after-edges to them are simply void.
                self.found.skip = self.found.skip or wording.prerequisite_module_skipped(
                    module, why.reason)
            return None
        if hit is None:
            self.found.unknown.append(target.strip())
            hint = index.suggest(item, target.strip(), itself=not self.own)
            extra = f"; did you mean {', '.join(map(repr, hint))}?" if hint else (
                "; use a test name, Class::test, or a node id relative to the rootdir")
            tail = f"target {target!r} matches no collected test{extra}"
            if _names_a_path(target.strip()):
                tail += wording.relative_to_rootdir(str(item.config.rootpath))
            self.problem(tail, shared=True)
        return hit

    def function(self, target: object) -> list[int] | None:
        """The test a function targets (None: not one collected test, said why)."""
        index = self.index
        fn = getattr(target, "__func__", target)
        hit = index.find(self.item, target)
        if hit is None:
            self.problem(f"{getattr(fn, '__qualname__', fn)!r} is not a collected test "
                         "function; pass a test function or its name")
            return None
        places = list(dict.fromkeys(
            p.nodeid for j in hit if (p := index.items[j].parent) is not None))
        if len(places) > 1:
            # The same function object collected in several modules or
            # classes (imported, or inherited by subclasses).
            self.problem(f"{getattr(fn, '__qualname__', fn)!r} is ambiguous: it is "
                         f"collected in {' and '.join(places)}; name the test by its node id")
            return None
        return index.same_instance(self.i, hit) if len(hit) > 1 else hit

    def add(self, target: object, hit: list[int]) -> None:
        """The edges to ``hit``, unless a test it names was collected twice."""
        index = self.index
        twice = sorted({index.ids[j] for j in hit} & index.repeated) if index.repeated else []
        if twice:
            self.problem(f"{target!r} is ambiguous: {', '.join(twice)} was collected more "
                         "than once (--keep-duplicates, or a collector yielding a name "
                         "twice); collect it once to depend on it")
            return
        if not self.own:
            # A class or module marker that names a member of itself applies to
            # the other members: the named test is not its own prerequisite.
            hit = [j for j in hit if j != self.i]
        self.found.requires.extend(hit)


def _names_a_path(target: str) -> bool:
    """Whether ``target`` is spelled as a node id (a file's path), which is
    read relative to the rootdir."""
    path = target.split("::", 1)[0]
    return "/" in path or path.endswith(".py")
