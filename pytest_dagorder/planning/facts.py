"""What a collection found, as plain values: the facts every decision is made from.

A collection (the serial process's, or an xdist worker's) turns its items
into :class:`Facts`; :func:`pytest_dagorder.deciding.decide.decide` derives every
decision from them and the settings (the graph the core runs, the affinity
groups, the files kept whole, whether the run needs the DAG machinery at
all, the header).  Under xdist the facts cross the process boundary
(``drivers/distributed/wire.py``), so every field is of the types execnet carries
as they are: lists, tuples and dicts of str, int, bool and None.

What changes the collection itself stays a collection step on the side
that collected, and the facts are what it left: the declared edges as the
collection resolved them (targets matched to tests, prerequisites pulled
back into the run by ``--dag-with-prerequisites``, the tests
``--dag-shard`` left to other parts deselected), the declaration problems
as found, the count of tests deselected.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pytest

from ..declaring.notes import EdgesFileNote, EvidenceNote, FenceNote, ShardNote
from ..declaring.resources import NONE
from ..live_run.dag_fixture import uses_dag
from ..migration import ORDER_MARK, fail_checks, ordering_failed
from ..migration.runtime import RuntimeUsers
from ..options.markers import SHARES_NOTHING
from ..options.settings import settings_of
from ..shims.late_loading import Later
from ..shims.pytest_internals import requested_fixtures, wide_fixtures
from . import time_limits

if TYPE_CHECKING:
    from ..core import affinity
    from ..core import graph as core_graph
    from ..core.affinity import DocumentKind
    from ..declaring import evidence
    from ..features import sharding
    from ..migration import order
    from .plan import Plan
else:
    affinity = Later("pytest_dagorder.core.affinity")  # see shims/late_loading.py
    core_graph = Later("pytest_dagorder.core.graph")  # only where a suite declares an edge
    evidence = Later("pytest_dagorder.declaring.evidence")  # only where an edges file is read
    order = Later("pytest_dagorder.migration.order")  # only where a test has an order mark
    sharding = Later("pytest_dagorder.features.sharding")  # only where a test has xdist_group

Location = tuple[str, int | None, str]


@dataclass(frozen=True)
class Census:
    """The few facts whether a run needs the DAG machinery depends on (see
    :func:`~pytest_dagorder.deciding.decide.plain_run`): counts of tests, the
    widest file, scope and document.  Small: every xdist worker's hello
    carries it."""

    #: The collection made a graph (a test declares, or ``--dag-shard`` or a
    #: durations file asked for one).
    graph: bool = False
    problems: int = 0
    #: Tests that use a resource or run alone.
    needs: int = 0
    grouped: int = 0
    dag_users: int = 0
    runtime_depends: int = 0
    #: The most tests of one file, of one ``--dist loadscope`` scope, of one
    #: document (see ``core/affinity.document_files``).
    widest_file: int = 0
    widest_scope: int = 0
    widest_document: int = 0


@dataclass(frozen=True)
class Facts:
    """A collection, as facts (see the module docstring).

    Per-test fields hold one entry per test of ``ids``, in that order (the
    order the tests run from; xdist's indices); an empty list where no test
    has the property.  Graph positions ``0 .. len(ids) - 1`` are the tests of
    ``ids``, the positions past them the prerequisites the selection left out
    (``outside``, by node id).
    """

    ids: list[str]
    #: (path, line, domain) of each test (None: unknown, see ``location_of``).
    locations: list[Location | None]
    module_scopes: list[str | None]
    class_scopes: list[str | None]
    #: The collection made a graph; then ``requires`` and ``after`` hold the
    #: declared edges of every position (``depends_on`` and ``run_after``, the
    #: foreign markers that become edges), as the collection resolved them
    #: (``after`` empty: no test has a ``run_after`` edge; see :meth:`afters`).
    graph: bool = False
    requires: list[tuple[int, ...]] = field(default_factory=list)
    after: list[tuple[int, ...]] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    #: Declaration problems as found, (node id, message): they end the session.
    problems: list[tuple[str, str]] = field(default_factory=list)
    #: Under ``--continue-on-collection-errors``: problems of tests left out
    #: of the run (reported, and the rest runs).
    errors: list[tuple[str, str]] = field(default_factory=list)
    #: pytest-order's ``--fail-all-on-failed-ordering`` message ("" if none).
    ordering_failure: str = ""
    #: pytest-depends' ``--failed-dependency-action=fail``: by node id, the
    #: prerequisites that must have passed.
    fail_checks: list[tuple[str, list[str]]] = field(default_factory=list)
    #: Per test: its ``xdist_group`` label (None: none).
    xdist_groups: list[str | None] = field(default_factory=list)
    #: Per test: the resources it names (``dag_resource``), whether it runs
    #: alone (``dag_exclusive``), whether it says it shares nothing
    #: (``dag_shares_nothing``).
    resources: list[list[str]] = field(default_factory=list)
    exclusive: list[bool] = field(default_factory=list)
    shares_nothing: list[bool] = field(default_factory=list)
    #: Per test: its module (or a fixture it uses) calls pytest-dependency's
    #: runtime ``depends()``; it requests the ``dag`` fixture.
    runtime_depends: list[bool] = field(default_factory=list)
    dag_users: list[bool] = field(default_factory=list)
    #: Per test: None for a test function, else the kind of document it is an
    #: item of (see ``core/affinity.document_files``).
    documents: list[DocumentKind | None] = field(default_factory=list)
    #: Per test: it uses a fixture of module or package scope (a module
    #: switch tears it down; unknown counts as yes).
    module_fixtures: list[bool] = field(default_factory=list)
    #: Per test: its pytest-order ordinal (``order(-1)``, ``"last"``; None:
    #: none), where some test has one: where the plan put it is kept in
    #: hand-out (see ``decide.fences``).
    ordinals: list[int | None] = field(default_factory=list)
    #: Per test, where some test has an ordinal and the edges file holds fence
    #: verdicts: what a valid one says ("" free: no fence holds the test; else
    #: why its fences hold; None: none, or stale: they hold), see
    #: ``declaring/evidence.unfenced``.
    fence_verdicts: list[str | None] = field(default_factory=list)
    #: Per test with an edge: the fixtures wider than function scope it
    #: requests, (name, scope, where defined); None: unknown.  Gathered only
    #: under ``--dag-affinity=state``, for what is said about a group (no
    #: group rests on it).
    fixtures: list[list[tuple[str, str, str]] | None] = field(default_factory=list)
    #: Per test: its pytest-timeout limit in seconds where the timer ends the
    #: process (the thread method; None: none), for a crash's reason
    #: (``planning/time_limits.py``).
    time_limits: list[float | None] = field(default_factory=list)
    #: How many collected tests the collection deselected (``-k``, ``-m``,
    #: ``--dag-shard``, ...), and how many of those ``--dag-shard`` left to
    #: other parts.
    deselected: int = 0
    shard_left: int = 0
    #: The session collected every test under its arguments (no node id in
    #: them, no ``--lf``) and nothing deselected any.
    complete: bool = False
    #: How many prerequisites ``--dag-with-prerequisites`` pulled back.
    pulled_back: int = 0
    #: What the collection steps found to announce: tests ``--lf`` runs again
    #: because a prerequisite blocked them, the edges file, the ``--dag-shard``
    #: part (see :class:`EdgesFileNote` and :class:`ShardNote`).
    lf_blocked: int = 0
    edges_file: EdgesFileNote | None = None
    shard: ShardNote | None = None
    #: Declared edges (prerequisite, dependent) by position that evidence in the
    #: edges file showed separable (``declaring/evidence.py``): not joined by the rule.
    lifted: tuple[tuple[int, int], ...] = ()
    #: What the edges file's verdicts said (None: it holds none).
    evidence: EvidenceNote | None = None
    #: What the edges file's fence verdicts said (None: it holds none, or no
    #: test has an ordinal).
    fence_evidence: FenceNote | None = None

    def afters(self) -> Sequence[tuple[int, ...]]:
        """The ``run_after`` edges of every position (none where ``after`` is empty)."""
        return self.after or [()] * len(self.requires)

    def census(self) -> Census:
        """The facts the plain-or-not decision reads (what a hello carries)."""
        return census_of(self.ids, self.module_scopes, self.class_scopes, self.documents,
                         graph=self.graph, problems=len(self.problems),
                         needs=needing(self.resources, self.exclusive),
                         grouped=sum(g is not None for g in self.xdist_groups),
                         dag_users=sum(self.dag_users),
                         runtime_depends=sum(self.runtime_depends))

    def in_order(self, ids: Sequence[str]) -> Facts:
        """The same facts, indexed in the order of ``ids`` (what xdist will run).

        A ``pytest_collection_finish`` of a conftest or plugin may reorder
        ``session.items`` after the facts were gathered; xdist's ids list is the
        order the controller's indices refer to.  Repeated node ids (with
        ``--keep-duplicates``) pair up by occurrence.  ValueError if ``ids``
        names other tests.
        """
        if list(ids) == self.ids:
            return self
        if sorted(ids) != sorted(self.ids):
            raise ValueError("the workers collected other tests than they planned")
        slots: dict[str, list[int]] = {}
        for j, nid in enumerate(ids):
            slots.setdefault(nid, []).append(j)
        taken: dict[str, int] = {}
        new = [0] * len(self.ids)  # old index -> new index
        for k, nid in enumerate(self.ids):
            n = taken.get(nid, 0)
            new[k] = slots[nid][n]
            taken[nid] = n + 1
        old = core_graph.inverse(new)
        moved: dict[str, Any] = {
            name: [getattr(self, name)[k] for k in old]
            for name in PER_TEST_FIELDS if getattr(self, name)}
        if self.graph:
            # Prerequisites outside the run (positions past it) keep theirs.
            m = len(self.requires)
            to = [*new, *range(len(new), m)]
            back = [*old, *range(len(old), m)]
            moved["requires"] = core_graph.renumbered(self.requires, back, to)
            if self.after:
                moved["after"] = core_graph.renumbered(self.after, back, to)
            if self.lifted:
                moved["lifted"] = tuple((to[p], to[d]) for p, d in self.lifted)
            if self.evidence is not None and self.evidence.kept:
                moved["evidence"] = self.evidence._replace(kept=tuple(
                    (to[p], to[d], why) for p, d, why in self.evidence.kept))
        return replace(self, **moved)


#: The :class:`Facts` fields that hold one entry per test, in ``ids`` order
#: (``in_order`` reorders them; the graph's lists follow the positions).
PER_TEST_FIELDS = ("ids", "locations", "module_scopes", "class_scopes", "xdist_groups",
                   "resources", "exclusive", "shares_nothing", "runtime_depends", "dag_users",
                   "documents", "module_fixtures", "fixtures", "ordinals", "fence_verdicts",
                   "time_limits")


def census_of(ids: Sequence[str], modules: Sequence[str | None],
              classes: Sequence[str | None], documents: Sequence[DocumentKind | None], *,
              graph: bool, problems: int, needs: int, grouped: int, dag_users: int,
              runtime_depends: int) -> Census:
    """The :class:`Census` of a collection from its per-test columns (one
    function, so a hello and the full facts count alike)."""
    files: dict[str, int] = {}
    scopes: dict[str, int] = {}
    for nid, module, cls in zip(ids, modules, classes, strict=True):
        path = file_of(nid)
        files[path] = files.get(path, 0) + 1
        scope = cls or module or path
        scopes[scope] = scopes.get(scope, 0) + 1
    docs = (affinity.document_files([file_of(nid) for nid in ids], documents)
            if any(documents) else {})
    return Census(graph=graph, problems=problems, needs=needs, grouped=grouped,
                  dag_users=dag_users, runtime_depends=runtime_depends,
                  widest_file=max(files.values(), default=0),
                  widest_scope=max(scopes.values(), default=0),
                  widest_document=max(map(len, docs.values()), default=0))


def file_of(nodeid: str) -> str:
    """A test's file: its node id's first part."""
    return nodeid.split("::", 1)[0]


#: The label :func:`kept_whole` gives a document, before its path.
DOCUMENT = "document"


def kept_whole(dist: str, affinity_mode: str, ids: Sequence[str],
               modules: Sequence[str | None], classes: Sequence[str | None],
               kinds: Sequence[DocumentKind | None] = ()) -> dict[str, list[int]]:
    """Scopes whose tests run on one worker in collection order, by label, in index order.

    ``--dist loadfile``: every file; ``--dist loadscope``: every class, and
    every module for the tests outside classes (as xdist's own modes send
    them).  Otherwise, unless the affinity is ``none``, the documents (see
    ``core/affinity.document_files``; ``kinds`` empty: every test is a test
    function).  Scopes of one test are left out.  The xdist side of the
    core's :func:`~..core.affinity.shared_scopes`: the mode and node ids
    stay here.
    """
    files = [file_of(nid) for nid in ids]
    if dist == "loadfile":
        scopes = files
    elif dist == "loadscope":
        scopes = [c or m or f for f, m, c in zip(files, modules, classes, strict=True)]
    elif affinity_mode == "none" or not kinds:
        return {}
    else:
        return {f"{DOCUMENT} {path}": ks
                for path, ks in affinity.document_files(files, kinds).items()}
    return {f"{dist} {scope}": ks for scope, ks in affinity.shared_scopes(scopes).items()}


def needing(resources: Sequence[Sequence[str]], exclusive: Sequence[bool]) -> int:
    """How many tests use a resource or run alone (the census's ``needs``; a
    column is empty where no test has it)."""
    return sum(bool(resources and resources[k]) or bool(exclusive and exclusive[k])
               for k in range(max(len(resources), len(exclusive))))


def _needs_of(plan: Plan, planned: Sequence[pytest.Item]) -> tuple[list[list[str]], list[bool]]:
    """The resources and exclusivity of each of ``planned`` (empty: no test has any)."""
    if not plan.needs:
        return [], []
    needs = [plan.needs.get(id(it), NONE) for it in planned]
    return [list(x.resources) for x in needs], [x.exclusive for x in needs]


def location_of(nodeid: str) -> Location:
    """A location from the node id alone, where none is known (no line)."""
    path, _, rest = nodeid.partition("::")
    return path, None, rest.replace("::", ".")


# -- gathering, from a collection -------------------------------------------------


def scopes(items: Sequence[pytest.Item], kind: type[pytest.Collector]) -> list[str | None]:
    """Per item, the node id of its closest ``kind`` collector (looked up once per parent)."""
    by_parent: dict[int, str | None] = {}
    out: list[str | None] = []
    for item in items:
        key = id(item.parent)
        if key not in by_parent:
            node = item.getparent(kind)
            by_parent[key] = None if node is None else node.nodeid
        out.append(by_parent[key])
    return out


def documents(items: Sequence[pytest.Item]) -> list[DocumentKind | None]:
    """Per item, None for a test function, else what document it is an item of.

    ``"module"``: the collector above it stands for a Python module
    (``--doctest-modules``' items, Sybil's on any file: ``getparent(pytest.Module)``
    finds one), whose docstrings it runs; ``"file"``: any other item a plugin
    collects from a file (YAML tests, a lint check).
    """
    out: list[DocumentKind | None] = []
    by_parent: dict[int, DocumentKind] = {}
    for item in items:
        if isinstance(item, pytest.Function):
            out.append(None)
            continue
        key = id(item.parent)
        kind = by_parent.get(key)
        if kind is None:
            kind = by_parent[key] = "file" if item.getparent(pytest.Module) is None else "module"
        out.append(kind)
    return out


#: Fixture scopes a move to another module tears down (a session's stays).
_MODULE_WIDE = frozenset({"module", "package"})


def module_fixture_users(items: Sequence[pytest.Item]) -> list[bool]:
    """Per item, whether it uses a fixture of module or package scope (its own
    or an autouse one; unknown: assumed so)."""
    out: list[bool] = []
    for item in items:
        wide = wide_fixtures(item)
        out.append(wide is None or any(scope in _MODULE_WIDE for _, scope, _ in wide))
    return out


def inner_edges(requires: Sequence[Sequence[int]], after: Sequence[Sequence[int]],
                n: int) -> Iterator[tuple[int, int]]:
    """Every edge ``(prerequisite, dependent)`` between two tests of the run
    (positions below ``n``; those past it are outside the run), by dependent."""
    for i in range(n):
        for p in (*requires[i], *after[i]):
            if p < n:
                yield p, i


def state_facts(items: Sequence[pytest.Item], requires: Sequence[Sequence[int]],
                after: Sequence[Sequence[int]]) -> list[list[tuple[str, str, str]] | None]:
    """Per test of ``items`` (graph positions ``0 .. len(items) - 1``), the
    fixtures it requests, for tests with an edge (others: none): what is said
    about a group under ``--dag-affinity=state`` (no group rests on it)."""
    n = len(items)
    touched: set[int] = set()
    for p, i in inner_edges(requires, after, n):
        touched.update((i, p))
    fixtures: list[list[tuple[str, str, str]] | None] = [[] for _ in range(n)]
    for i in sorted(touched):
        fixtures[i] = requested_fixtures(items[i])
    return fixtures


def graph_of(plan: Plan, planned: Sequence[pytest.Item], ids: Sequence[str]) -> tuple[
        list[tuple[int, ...]], list[tuple[int, ...]], list[str]]:
    """The plan's edges by position of ``planned`` (``ids``: their node ids),
    and the node ids of the prerequisites outside the run."""
    g = plan.graph
    assert g is not None
    outside = [it.nodeid for it in plan.deselected]
    requires = [tuple(r) for r in g.requires]
    # execnet writes each value of a message one by one: no list of empty ones.
    after = [tuple(a) for a in g.after] if any(g.after) else []
    if plan.items != planned:
        # A hook reordered the items after the plan: positions follow ``planned``.
        n = len(planned)
        where = {id(it): k for k, it in enumerate(plan.items)}
        if len(where) != n or any(id(it) not in where for it in planned):
            raise ValueError("the items changed after the plan was made")
        # Prerequisites outside the run (positions past it) keep theirs.
        back = [*(where[id(it)] for it in planned), *range(n, len(g))]
        to = core_graph.inverse(back)
        requires = core_graph.renumbered(requires, back, to)
        if after:
            after = core_graph.renumbered(after, back, to)
    return requires, after, outside


def collect_facts(config: pytest.Config, plan: Plan | None, planned: Sequence[pytest.Item],
                  ids: Sequence[str], *, affinity: str, full: bool = True) -> Facts:
    """The facts of a collection: ``planned`` (node ids ``ids``) are the tests in
    the order they will run, ``plan`` what the planner made of them.

    ``full``: also what only the xdist controller reads (locations, module
    and class scopes, fixture use, shares-nothing marks, ``xdist_group``
    labels, the columns of :func:`_add_controller_columns`); a serial run
    needs none of it.
    ValueError if a hook added or removed tests after the plan was made.
    """
    n = len(planned)
    ids = list(ids)
    modules: list[str | None] = scopes(planned, pytest.Module) if full else [None] * n
    fields: dict[str, Any] = {}
    if plan is not None:
        fields.update(
            problems=[(p.nodeid, p.message) for p in plan.problems],
            errors=[(p.nodeid, p.message) for p in plan.errors],
            deselected=plan.dropped, shard_left=plan.shard_left, complete=plan.whole,
            pulled_back=len(plan.pulled_back), lf_blocked=plan.lf_blocked,
            edges_file=plan.edges_file, shard=plan.shard)
        if plan.graph is not None and not plan.problems:
            _add_graph_columns(fields, config, plan, planned, ids, affinity=affinity, full=full)
        if plan.needs:
            resources, exclusive = _needs_of(plan, planned)
            fields.update(resources=resources, exclusive=exclusive)
        if full and ORDER_MARK in plan.marker_names:
            ordinals = [order.ordinal_of(it) for it in planned]
            if any(o is not None for o in ordinals):
                fields.update(ordinals=ordinals)
                _add_fence_evidence(fields, config, ids)
        if full and SHARES_NOTHING in plan.marker_names:
            fields.update(shares_nothing=[
                it.get_closest_marker(SHARES_NOTHING) is not None for it in planned])
    if full and (plan is None or "xdist_group" in plan.marker_names):
        groups = [sharding.xdist_group(it) for it in planned]
        if any(g is not None for g in groups):
            fields.update(xdist_groups=groups)
    if usage := ordering_failed(config):
        fields.update(ordering_failure=usage)
    if checks := fail_checks(config):
        fields.update(fail_checks=[(nid, list(ps)) for nid, ps in checks.items()])
    if full:
        _add_controller_columns(fields, planned)
        marked = plan is None or time_limits.TIMEOUT_MARK in plan.marker_names
        if limits := time_limits.thread_limits(config, planned, marked=marked):
            fields.update(time_limits=limits)
    return Facts(
        ids=ids,
        # Computed in bulk by the planner (internals.fill_locations).
        locations=[_location(it) for it in planned] if full else [],
        module_scopes=modules,
        class_scopes=scopes(planned, pytest.Class) if full else [None for _ in range(n)],
        **fields,
    )


def _add_graph_columns(fields: dict[str, Any], config: pytest.Config, plan: Plan,
                       planned: Sequence[pytest.Item], ids: Sequence[str], *,
                       affinity: str, full: bool) -> None:
    """The graph of a plan without problems, and (``full``) what rests on it:
    the fixtures that hold ``--dag-affinity=state`` groups together, and the
    edges the edges file's evidence lifts."""
    requires, after, outside = graph_of(plan, planned, ids)
    fields.update(graph=True, requires=requires, after=after, outside=outside)
    if full and affinity == "state":
        fixtures = state_facts(planned, requires, after or [()] * len(requires))
        if any(f != [] for f in fixtures):
            fields.update(fixtures=fixtures)
    edges_path = settings_of(config).edges_path
    if full and edges_path is not None and edges_path.is_file():
        lifted, note = evidence.lifted(edges_path, config.rootpath, ids, requires,
                                       after or [()] * len(requires))
        fields.update(lifted=lifted, evidence=note)


def _add_fence_evidence(fields: dict[str, Any], config: pytest.Config,
                        ids: Sequence[str]) -> None:
    """What the edges file's fence verdicts say of each test (some test has an
    ordinal: pytest-order's fences hold where no valid verdict frees a test)."""
    edges_path = settings_of(config).edges_path
    if edges_path is None or not edges_path.is_file():
        return
    verdicts, note = evidence.unfenced(edges_path, config.rootpath, ids)
    if note is not None:
        fields.update(fence_verdicts=verdicts, fence_evidence=note)


def _add_controller_columns(fields: dict[str, Any], planned: Sequence[pytest.Item]) -> None:
    """The per-test columns only the xdist controller's decisions read: document
    items, module-fixture use, ``dag`` users, pytest-dependency's runtime
    ``depends()`` (each left out where no test has it)."""
    if any(kinds := documents(planned)):
        fields.update(documents=kinds)
    if any(keeps := module_fixture_users(planned)):
        fields.update(module_fixtures=keeps)
    if any(users := [uses_dag(it) for it in planned]):
        fields.update(dag_users=users)
    uses = RuntimeUsers()
    if any(runtime := [uses(it) for it in planned]):
        fields.update(runtime_depends=runtime)


def census(plan: Plan | None, planned: Sequence[pytest.Item], ids: Sequence[str]) -> Census:
    """The :class:`Census` of a collection, without the rest of its facts (every
    xdist worker says it; only one is asked for the facts)."""
    grouped = 0
    if plan is None or "xdist_group" in plan.marker_names:
        grouped = sum(sharding.xdist_group(it) is not None for it in planned)
    uses = RuntimeUsers()
    return census_of(
        ids, scopes(planned, pytest.Module), scopes(planned, pytest.Class), documents(planned),
        graph=plan is not None and plan.graph is not None,
        problems=0 if plan is None else len(plan.problems),
        needs=0 if plan is None else needing(*_needs_of(plan, planned)),
        grouped=grouped, dag_users=sum(map(uses_dag, planned)),
        runtime_depends=sum(map(uses, planned)))


def _location(item: pytest.Item) -> Location:
    path, line, domain = item.location
    return str(path), line, str(domain)


def no_facts(message: str) -> Facts:
    """Facts that say only that the collection cannot be followed."""
    return Facts([], [], [], [], problems=[("", message)])
