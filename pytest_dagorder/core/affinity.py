"""Affinity groups: which tests must share one worker, contiguously.

Pure (no pytest): tests connected by dependency edges *inside one scope*
(module or class) form a group, so state one test leaves in its process
(module globals, class attributes, module/class fixtures) is there for the
next.  Explicit labels (``xdist_group``) join their tests too.  Edges that
cross scopes never join groups: different modules still run in parallel.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def document_files(modules: Sequence[str | None], ids: Sequence[str]) -> dict[str, list[int]]:
    """The tests (in index order) of each file that is not a Python test module
    and holds two or more of them, by the file's node id.

    Items a plugin collects from one document (doctest text files, Sybil
    documents, YAML or notebook test files) share the document's namespace
    and expect to run in file order, in one process, as ``--dist loadfile``
    runs them.  Such an item has no module scope; its file is its node id's
    first part.
    """
    by_file: dict[str, list[int]] = {}
    for k, module in enumerate(modules):
        if module is None:
            by_file.setdefault(ids[k].split("::", 1)[0], []).append(k)
    return {path: members for path, members in by_file.items() if len(members) > 1}


def kept_whole(dist: str, affinity: str, ids: Sequence[str], modules: Sequence[str | None],
               classes: Sequence[str | None]) -> dict[str, list[int]]:
    """Scopes whose tests run on one worker in collection order, by label, in index order.

    ``--dist loadfile``: every file; ``--dist loadscope``: every class, and
    every module for the tests outside classes (as xdist's own modes send
    them).  Otherwise, unless the affinity is ``none``, the documents (see
    :func:`document_files`).  Scopes of one test are left out.
    """
    if dist == "loadfile":
        scopes = [nid.split("::", 1)[0] for nid in ids]
    elif dist == "loadscope":
        scopes = [c or m or nid.split("::", 1)[0]
                  for nid, m, c in zip(ids, modules, classes, strict=True)]
    elif affinity == "none":
        return {}
    else:
        return {f"document {path}": ks for path, ks in document_files(modules, ids).items()}
    by_scope: dict[str, list[int]] = {}
    for k, scope in enumerate(scopes):
        by_scope.setdefault(scope, []).append(k)
    return {f"{dist} {scope}": ks for scope, ks in by_scope.items() if len(ks) > 1}


def affinity_groups(
    scopes: Sequence[str | None],
    requires: Sequence[Sequence[int]],
    after: Sequence[Sequence[int]],
    explicit: Sequence[str | None] = (),
) -> list[str | None]:
    """A group label per task (None: free), over tasks ``0 .. len(scopes) - 1``.

    Labels are the id of the group's first task, so they are stable across
    runs and independent of hashing.
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
    roots = sets.roots()
    size: dict[int, int] = {}
    for r in roots:
        size[r] = size.get(r, 0) + 1
    explicit_roots = {roots[i] for i in first_with.values()}
    return [f"group-{r}" if size[r] > 1 or r in explicit_roots else None for r in roots]
