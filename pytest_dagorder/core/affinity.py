"""Affinity groups: which tests must share one worker, contiguously.

Pure (no pytest): tests connected by dependency edges *inside one scope*
(module or class) form a group, so state one test leaves in its process
(module globals, class attributes, module/class fixtures) is there for the
next.  Explicit labels (``xdist_group``) join their tests too.  Edges that
cross scopes never join groups: different modules still run in parallel.

Under ``--dag-affinity=state`` (the default) an edge inside a module joins
its two tests only when they may share process state: both use one
fixture instance wider than function scope (see :func:`state_keys`), or the
module's code writes module-level state (see ``state_writes.py``).  Edges
between tests that share nothing leave them free, to run on any worker.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def document_files(ids: Sequence[str],
                   kinds: Sequence[DocumentKind | None]) -> dict[str, list[int]]:
    """The tests (in index order) of each document that holds two or more of
    them, by the file's path (its node id's first part), in index order of
    the files.

    The items a plugin makes of one document share the document's namespace
    and expect to run in file order, in one process, as ``--dist loadfile``
    runs them; whatever collector stands above them (Sybil's stands for a
    module), what tells is that they are not test functions.  The examples
    of a module's docstrings run against the module, whose state its test
    functions share: the module's tests stay with them, in file order.
    """
    by_file: dict[str, list[int]] = {}
    with_tests: set[str] = set()
    for k, kind in enumerate(kinds):
        if kind is not None:
            path = ids[k].split("::", 1)[0]
            by_file.setdefault(path, []).append(k)
            if kind == "module":
                with_tests.add(path)
    if with_tests:
        for k, kind in enumerate(kinds):
            if kind is None and (path := ids[k].split("::", 1)[0]) in with_tests:
                by_file[path].append(k)
        for members in by_file.values():
            members.sort()
    return {path: members for path, members in by_file.items() if len(members) > 1}


def kept_whole(dist: str, affinity: str, ids: Sequence[str], modules: Sequence[str | None],
               classes: Sequence[str | None],
               kinds: Sequence[DocumentKind | None] = ()) -> dict[str, list[int]]:
    """Scopes whose tests run on one worker in collection order, by label, in index order.

    ``--dist loadfile``: every file; ``--dist loadscope``: every class, and
    every module for the tests outside classes (as xdist's own modes send
    them).  Otherwise, unless the affinity is ``none``, the documents (see
    :func:`document_files`; ``kinds`` empty: every test is a test function).
    Scopes of one test are left out.
    """
    if dist == "loadfile":
        scopes = [nid.split("::", 1)[0] for nid in ids]
    elif dist == "loadscope":
        scopes = [c or m or nid.split("::", 1)[0]
                  for nid, m, c in zip(ids, modules, classes, strict=True)]
    elif affinity == "none" or not kinds:
        return {}
    else:
        return {f"{DOCUMENT} {path}": ks for path, ks in document_files(ids, kinds).items()}
    by_scope: dict[str, list[int]] = {}
    for k, scope in enumerate(scopes):
        by_scope.setdefault(scope, []).append(k)
    return {f"{dist} {scope}": ks for scope, ks in by_scope.items() if len(ks) > 1}


#: The label :func:`kept_whole` gives a document, before its path.
DOCUMENT = "document"


#: The state key of every test of a module whose code writes module-level
#: state (or whose fixtures could not be read): such tests share with each other.
MODULE_STATE = "module state"


def state_keys(fixtures: Sequence[tuple[str, str, str]] | None, *, module_state: bool,
               written: frozenset[str] = frozenset(),
               per_worker: frozenset[str] = frozenset(),
               class_id: str | None = None) -> frozenset[str]:
    """What process state one test may share with others of its module, as keys.

    Two tests of one module whose keys meet share state.  ``fixtures``: the
    test's fixtures wider than function scope as (name, scope, where
    defined), None if unknown.  A class- or module-scoped (or package-scoped)
    fixture is one instance for the tests of its class or module: its key
    counts.  A session-scoped one is shared by every module and is usually
    a service or a connection; it counts only when the module's code writes
    into it (``written``: parameter names written into, see
    ``state_writes.py``), as a dict that passes ids from test to test, or
    when its value is the worker's own directory (``per_worker``: made with
    ``tmp_path_factory``), whose files a test on another worker cannot see.
    ``module_state``: the module's code writes module-level state, so all
    its tests share (so do they when ``fixtures`` is unknown).
    """
    keys = {MODULE_STATE} if module_state or fixtures is None else set()
    for name, scope, where in fixtures or ():
        if scope == "class":
            keys.add(f"class {class_id} {where} {name}")
        elif scope in ("module", "package") or name in written or name in per_worker:
            keys.add(f"{scope} {where} {name}")
    return frozenset(keys)


def affinity_groups(
    scopes: Sequence[str | None],
    requires: Sequence[Sequence[int]],
    after: Sequence[Sequence[int]],
    explicit: Sequence[str | None] = (),
    state: Sequence[frozenset[str]] | None = None,
) -> list[str | None]:
    """A group label per task (None: free), over tasks ``0 .. len(scopes) - 1``.

    ``state`` (one key set per task, see :func:`state_keys`): an edge inside
    a scope joins its tasks only when their keys meet; None: every such edge
    does.  Labels are the id of the group's first task, so they are stable
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
            if p < n and scopes[p] == scope and (state is None or state[i] & state[p]):
                union(i, p)
    first_with = sets.join_labels(explicit)
    roots = sets.roots()
    size: dict[int, int] = {}
    for r in roots:
        size[r] = size.get(r, 0) + 1
    explicit_roots = {roots[i] for i in first_with.values()}
    return [f"group-{r}" if size[r] > 1 or r in explicit_roots else None for r in roots]
