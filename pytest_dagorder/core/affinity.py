"""Affinity groups: which tests must share one worker, contiguously.

Pure (no pytest): tests connected by dependency edges *inside one scope*
(module or class) form a group, so state one test leaves in its process
(module globals, class attributes, module/class fixtures) is there for the
next.  Explicit labels (a group the user named) join their tests too.

Under ``--dag-affinity=state`` (the default) the rule is safe without
reading any code (see :func:`state_partition`): every declared edge keeps its
two tests in one process, unless the user stated otherwise
(``dag_shares_nothing``; ``--dag-affinity=none`` for the whole suite) or
evidence lifted that edge.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal

from .disjoint import DisjointSets


def serial_modules(modules: Sequence[str | None],
                   flagged: Sequence[bool]) -> dict[str, list[int]]:
    """The tests (in index order) of each module holding a flagged test.

    Such a module must run on one worker in that order (pytest-dependency's
    runtime ``depends()`` looks for results in its own process).
    """
    if not flagged:
        return {}
    chosen = {modules[k] for k, flag in enumerate(flagged) if flag and modules[k] is not None}
    out: dict[str, list[int]] = {}
    for k, module in enumerate(modules):
        if module is not None and module in chosen:
            out.setdefault(module, []).append(k)
    return out


#: Per test, what it is to :func:`document_files`: None for a test function,
#: ``"file"`` for an item of a document (a file read by a plugin: a doctest
#: text file, a Sybil document, YAML tests), ``"module"`` for an item of a
#: Python module's own documentation (``--doctest-modules``, Sybil on ``.py``
#: docstrings: its collector stands for the module).
DocumentKind = Literal["file", "module"]


def document_files(files: Sequence[str],
                   kinds: Sequence[DocumentKind | None]) -> dict[str, list[int]]:
    """The tests (in index order) of each document that holds two or more of
    them, by ``files`` (each test's file, as the driver names it), in index
    order of the files.

    The items a plugin makes of one document share the document's namespace
    and expect to run in file order, in one process; whatever collector
    stands above them (Sybil's stands for a module), what tells is that they
    are not test functions.  The examples of a module's docstrings run
    against the module, whose state its test functions share: the module's
    tests stay with them, in file order.
    """
    by_file: dict[str, list[int]] = {}
    with_tests: set[str] = set()
    for k, kind in enumerate(kinds):
        if kind is not None:
            path = files[k]
            by_file.setdefault(path, []).append(k)
            if kind == "module":
                with_tests.add(path)
    if with_tests:
        for k, kind in enumerate(kinds):
            if kind is None and (path := files[k]) in with_tests:
                by_file[path].append(k)
        for members in by_file.values():
            members.sort()
    return {path: members for path, members in by_file.items() if len(members) > 1}


def shared_scopes(scopes: Sequence[str]) -> dict[str, list[int]]:
    """The tests (in index order) of each scope that holds two or more, by scope,
    in index order of the scopes: the scopes a driver keeps whole on one worker
    (its caller chooses the scope key: a file, a class or module)."""
    by_scope: dict[str, list[int]] = {}
    for k, scope in enumerate(scopes):
        by_scope.setdefault(scope, []).append(k)
    return {scope: ks for scope, ks in by_scope.items() if len(ks) > 1}


#: Scopes a fixture instance outlives every module in: one instance per
#: worker process (a package's per package, across its modules).
WIDE_SCOPES = ("session", "package")


def shared_keys(fixtures: Sequence[tuple[str, str, str]], *,
                class_id: str | None = None, narrow: bool = False) -> frozenset[str]:
    """The fixture instances one test may share with other tests, as keys.

    ``fixtures``: what the test requests (by name, directly or through other
    fixtures) as (name, scope, where defined).  A session- or package-scoped
    fixture is one instance per worker process: whatever one test leaves in
    it, a later test that uses it reads, whichever module it sits in.  With
    ``narrow``, module- and class-scoped ones count too (a class's per
    ``class_id``).  Explanation only (``--dag-explain``, the header's
    advice): no key decides a group.
    """
    keys: set[str] = set()
    for name, scope, where in fixtures:
        if scope in WIDE_SCOPES or (narrow and scope == "module"):
            keys.add(f"{scope} fixture {name!r}" + (f" of {where}" if where else ""))
        elif narrow and scope == "class":
            keys.add(f"class fixture {name!r} of {class_id or where}")
    return frozenset(keys)


def state_partition(
    modules: Sequence[str | None],
    requires: Sequence[Sequence[int]],
    after: Sequence[Sequence[int]],
    quiet: Sequence[bool] = (),
    *,
    lifted: Collection[tuple[int, int]] = (),
    keeps: Sequence[bool] = (),
) -> tuple[list[str | None], list[int | None]]:
    """Per task, its group under ``--dag-affinity=state`` as the reasons it was
    formed (None: free), over tasks ``0 .. len(modules) - 1``; and per task,
    its group's first task (None: free): labels may be equal for two groups,
    and a test joined beside the edges (a module's stretch) has no edge to
    its group, so it is the ids that say which tests form one.

    The rule: every declared edge (requires-pass or ordering-only) joins its
    two tasks, so a dependent runs in the process where its prerequisite
    ran, whatever it reads there (module globals, fixtures of any scope,
    ``request.config``, the environment, a library's state): nothing here
    reads code.  Only statements lift an edge: a ``quiet`` task (the user
    said it shares nothing) is joined by none of its edges, and an edge
    ``(prerequisite, dependent)`` in ``lifted`` (evidence showed the
    dependent passes in a fresh process) joins nothing.  Every task on a
    path between two tasks of one group then joins it too (see
    :func:`_convex`), and so does a test that holds one module-scoped
    fixture instance with a task of the group between two of its tasks in
    serial order (``keeps``: per task, it uses a fixture of module or
    package scope; see :func:`_module_stretches`).  A label lists the
    reasons of its group, sorted:
    equal for the tests of one group, readable as they are
    (``--dag-explain``).
    """
    n = len(modules)
    sets = DisjointSets(n)
    why: list[tuple[int, str]] = []
    preds = [[p for p in (*requires[i], *after[i]) if p < n] for i in range(n)]
    in_module, across, free = _join_by_edges(sets, modules, preds, quiet, lifted)
    order: list[int] | None = None
    while True:
        if free:
            order = order or _topological(preds)
            roots = _convex(sets, preds, order, why)
        else:
            roots = sets.roots()
        if not keeps or not _module_stretches(sets, roots, modules, keeps, quiet, why):
            break
        free = True  # joined beside the edges: a path may now leave a group
    labels = _group_labels(roots, modules, in_module, across, why)
    return [labels.get(r) for r in roots], [r if r in labels else None for r in roots]


def _join_by_edges(sets: DisjointSets, modules: Sequence[str | None],
                   preds: Sequence[Sequence[int]], quiet: Sequence[bool],
                   lifted: Collection[tuple[int, int]],
                   ) -> tuple[list[bool], list[tuple[int, int]], bool]:
    """Join the two tasks of every edge no statement lifts (see
    :func:`state_partition`); return per task whether an edge inside its
    module joined it, the joining edges between modules (or tests of no
    module) as (prerequisite, dependent), and whether some edge was lifted
    (then a path may leave a group and come back)."""
    lift = lifted if isinstance(lifted, (set, frozenset)) else set(lifted)
    # Joined by an edge inside its module: the reason is named once per
    # test, not once per edge (a large suite has hundreds of thousands).
    in_module = [False] * len(modules)
    across: list[tuple[int, int]] = []
    free = False
    union = sets.union
    for i, ps in enumerate(preds):
        here = modules[i]
        for p in ps:
            if (quiet and (quiet[i] or quiet[p])) or (lift and (p, i) in lift):
                free = True
                continue
            union(i, p)
            if here is not None and modules[p] == here:
                in_module[i] = in_module[p] = True
            else:
                across.append((p, i))
    return in_module, across, free


def _group_labels(roots: Sequence[int], modules: Sequence[str | None],
                  in_module: Sequence[bool], across: Sequence[tuple[int, int]],
                  why: Sequence[tuple[int, str]]) -> dict[int, str]:
    """Per root of a group, its label: the reasons its tests were joined
    (edges inside a module, edges between two modules, ``why``), sorted."""
    reasons: dict[int, set[str]] = {}
    for i, inside in enumerate(in_module):
        if inside:
            reasons.setdefault(roots[i], set()).add(f"edges inside {modules[i]}")
    named: set[tuple[int, str | None, str | None]] = set()
    for p, i in across:
        key = (roots[i], modules[p], modules[i])
        if key not in named:  # few module pairs per group, many edges
            named.add(key)
            reasons.setdefault(key[0], set()).add(_across(key[1], key[2]))
    for i, reason in why:
        reasons.setdefault(roots[i], set()).add(reason)
    return {r: "; ".join(sorted(found)) for r, found in reasons.items()}


def _across(prerequisite: str | None, dependent: str | None) -> str:
    """The reason an edge between two modules (or tests of no module) gives."""
    if prerequisite is None or dependent is None:
        return "edges between tests of no module"
    return f"edges from {prerequisite} to {dependent}"


#: Why a test joins a group it shares nothing with: a path from one of the
#: group's tests to another runs through it.
BETWEEN = "on a path between two tests of the group"


def _module_stretches(sets: DisjointSets, roots: Sequence[int], modules: Sequence[str | None],
                      keeps: Sequence[bool], quiet: Sequence[bool],
                      why: list[tuple[int, str]]) -> bool:
    """Join to each group the tests of a module it holds that run, serially,
    between the group's first test of that module and its last test; True
    if any joined.

    Serially a module's tests run in one stretch, with one instance of its
    module fixtures: a group that leaves the module for a test of another
    (a dependent that reads what the module's fixture committed in its
    teardown) would otherwise leave the module's next tests to set the
    fixture up again, elsewhere, without what the group's test put there.
    Only tests that use a fixture of module scope (``keeps``) and do not
    say they share nothing."""
    first: dict[tuple[int, str], int] = {}
    last: dict[int, int] = {}
    size: dict[int, int] = {}
    for r in roots:
        size[r] = size.get(r, 0) + 1
    for i, r in enumerate(roots):
        if size[r] < 2:
            continue
        last[r] = i
        m = modules[i]
        if m is not None and keeps[i]:
            first.setdefault((r, m), i)
    if not first:
        return False
    spans: dict[str, list[tuple[int, int, int]]] = {}
    for (r, m), start in first.items():
        if last[r] > start:
            spans.setdefault(m, []).append((start, last[r], r))
    joined = False
    for i, m in enumerate(modules):
        if m is None or not keeps[i] or (quiet and quiet[i]) or m not in spans:
            continue
        for start, end, r in spans[m]:
            if start < i < end and roots[i] != r and sets.find(i) != sets.find(r):
                sets.union(i, r)
                why.append((i, f"module fixtures of {m} between two tests of the group"))
                joined = True
    return joined


def _convex(sets: DisjointSets, preds: Sequence[Sequence[int]], order: Sequence[int],
            why: list[tuple[int, str]]) -> list[int]:
    """Join every task on a path between two tasks of one group to that group;
    the roots once no path leaves a group and comes back.

    A group starts once its prerequisites outside it have ended, so a path
    out of a group and back in would make it wait for itself (the scheduler
    would then dissolve it, and the state it keeps together would be lost);
    serially that path's tests ran between the group's anyway.  Each round
    joins at least two groups, so it ends.  ``order``: the tasks topologically.
    """
    while True:
        roots = sets.roots()
        grouped = _grouped_roots(roots)
        if not grouped:
            return roots
        bit = {r: 1 << k for k, r in enumerate(grouped)}
        own = [bit.get(r, 0) for r in roots]
        up = [0] * len(preds)  # the groups some strict ancestor belongs to
        for i in order:
            for p in preds[i]:
                up[i] |= up[p] | own[p]
        down = [0] * len(preds)  # the groups some strict descendant belongs to
        for i in reversed(order):
            for p in preds[i]:
                down[p] |= down[i] | own[i]
        joined = False
        for i in order:
            between = up[i] & down[i] & ~own[i]
            if not between:
                continue  # the usual case: no group on both sides
            for k, r in enumerate(grouped):
                if between >> k & 1:
                    sets.union(i, r)
                    why.append((i, BETWEEN))
                    joined = True
        if not joined:
            return roots


def _grouped_roots(roots: Sequence[int]) -> list[int]:
    """The roots of the sets with two or more tasks, in index order."""
    size: dict[int, int] = {}
    for r in roots:
        size[r] = size.get(r, 0) + 1
    return sorted(r for r, k in size.items() if k > 1)


def _topological(preds: Sequence[Sequence[int]]) -> list[int]:
    """Tasks with every predecessor before them (Kahn; ties by index)."""
    n = len(preds)
    waiting = [len(ps) for ps in preds]
    succs: list[list[int]] = [[] for _ in range(n)]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    ready = [i for i in range(n) if not waiting[i]]
    order: list[int] = []
    while ready:
        i = ready.pop()
        order.append(i)
        for s in succs[i]:
            waiting[s] -= 1
            if not waiting[s]:
                ready.append(s)
    return order


def affinity_groups(
    scopes: Sequence[str | None],
    requires: Sequence[Sequence[int]],
    after: Sequence[Sequence[int]],
    explicit: Sequence[str | None] = (),
    joined: Sequence[int | None] = (),
) -> list[str | None]:
    """A group label per task (None: free), over tasks ``0 .. len(scopes) - 1``.

    An edge inside a scope joins its tasks; so does an explicit label, and
    an equal entry of ``joined`` (a partition made already, see
    :func:`state_partition`).
    Labels are the id of the group's first task, so they are stable
    across runs and independent of hashing.
    """
    n = len(scopes)
    sets = DisjointSets(n)
    union = sets.union
    for i in range(n):
        scope = scopes[i]
        if scope is None:
            continue
        for p in (*requires[i], *after[i]):
            if p < n and scopes[p] == scope:
                union(i, p)
    first_with = sets.join_labels(explicit)
    if joined:
        first: dict[int, int] = {}
        for i, key in enumerate(joined):
            if key is not None:
                union(i, first.setdefault(key, i))
    roots = sets.roots()
    size: dict[int, int] = {}
    for r in roots:
        size[r] = size.get(r, 0) + 1
    explicit_roots = {roots[i] for i in first_with.values()}
    return [f"group-{r}" if size[r] > 1 or r in explicit_roots else None for r in roots]
