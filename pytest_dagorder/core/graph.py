"""The dependency graph: plain ids in, validated integer adjacency out.

Pure: no pytest, no threads.  Ids are any hashable values; inside the graph a
task is its position in the input (its *index*), which is also the order used
to break every tie (collection order for pytest).

Two kinds of edge:

* ``requires``: the prerequisite must *pass* before the dependent may run;
  if it does not, the dependent is skipped.
* ``after``: ordering only; the dependent waits for the other task to reach
  any terminal state.

Validation (duplicates, unknown ids, self-dependencies, cycles) is one pass of
Kahn's algorithm (none when every edge leads to a lower index: index order is
then topological) plus, only when a cycle exists, Tarjan's strongly connected
components to report each cycle as a path: O(V + E) either way.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, cast, final

from .errors import (
    CycleError,
    DependencyError,
    DuplicateTaskError,
    SelfDependencyError,
    UnknownDependencyError,
)


class _CycleFound(Exception):
    """Raised by the constructor when the edges are not acyclic (build() then reports)."""


#: Duration assumed for a task with no estimate when others have none either.
DEFAULT_DURATION = 1.0


@final
class Graph:
    """A validated DAG over task indices ``0 .. len(ids) - 1``.

    ``requires[i]`` / ``after[i]``: prerequisites of task ``i`` (deduplicated,
    in declaration order).  ``dependents[i]`` / ``followers[i]``: the reverse
    edges, in index order.  ``topo`` is a topological order in which, among
    tasks that are free to go, the lowest index comes first.

    ``checked[i]``: the third edge kind, by task (only tasks that have one):
    ordering edges whose prerequisite must have passed when task ``i`` is
    released, else ``i`` fails without running (pytest-depends'
    ``--failed-dependency-action=fail``; see :meth:`checking`).
    """

    __slots__ = (
        "_critical",
        "_order",
        "_topo",
        "after",
        "checked",
        "dependents",
        "durations",
        "followers",
        "ids",
        "index",
        "requires",
    )

    def __init__(
        self,
        ids: Sequence[Hashable],
        requires: Sequence[Sequence[int]],
        after: Sequence[Sequence[int]],
        durations: Sequence[float | None],
        *,
        order: Sequence[int] | None = None,
        stable: bool = False,
    ) -> None:
        # Use Graph.build: this constructor trusts that its input is valid
        # (and ``order``, if given, to be a topological order of it).
        n = len(ids)
        self.ids: tuple[Hashable, ...] = tuple(ids)
        self.index: dict[Hashable, int] = {t: i for i, t in enumerate(self.ids)}
        self.requires: tuple[tuple[int, ...], ...] = tuple(tuple(r) for r in requires)
        self.after: tuple[tuple[int, ...], ...] = tuple(tuple(a) for a in after)
        dependents, followers = _reverse(self.requires, self.after)
        self.dependents: tuple[tuple[int, ...], ...] = tuple(map(tuple, dependents))
        self.followers: tuple[tuple[int, ...], ...] = tuple(map(tuple, followers))
        known = [d for d in durations if d is not None]
        fallback = sum(known) / len(known) if known else DEFAULT_DURATION
        self.durations: tuple[float, ...] = tuple(
            fallback if d is None else float(d) for d in durations
        )
        # Any topological order (a stack, no heap): the acyclicity proof, and
        # the order critical paths are computed in.  The stable order that
        # serial runs need is derived only when asked for (``topo``).
        # ``stable``: the caller will ask for ``topo`` at once; the proof then
        # uses the stable order's heap and keeps it (one pass, not two).
        self._topo: tuple[int, ...] | None = None
        if order is None:
            if _points_back(self.requires) and _points_back(self.after):
                # Every edge leads to a lower index (a suite declaring earlier
                # tests, or a graph already renumbered): index order is
                # topological, and also the stable one; no search needed.
                order = range(n)
                self._topo = tuple(order)
            else:
                order = _kahn(self.requires, self.after, dependents, followers,
                              lowest_first=stable)
                if len(order) != n:
                    raise _CycleFound
                if stable:
                    self._topo = tuple(order)
        self._order = list(order)
        self._critical: tuple[float, ...] | None = None
        self.checked: Mapping[int, tuple[int, ...]] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def permuted(self, order: Sequence[int]) -> Graph:
        """The same graph with task ``order[k]`` at index ``k`` (no revalidation needed)."""
        if list(order) == list(range(len(self))):
            return self  # immutable: nothing to copy (the common case, a suite in order)
        pos = [0] * len(order)
        for k, old in enumerate(order):
            pos[old] = k
        out = Graph(
            [self.ids[old] for old in order],
            [[pos[p] for p in self.requires[old]] for old in order],
            [[pos[p] for p in self.after[old]] for old in order],
            [self.durations[old] for old in order],
            # Renumbering keeps an order topological: no second proof needed.
            order=[pos[i] for i in self._order],
        )
        out.checked = {pos[i]: tuple(pos[p] for p in ps) for i, ps in self.checked.items()}
        return out

    def checking(self, checked: Mapping[int, Sequence[int]]) -> Graph:
        """This graph with ``checked`` edges (see the class docstring) added.

        The rest is shared, not copied: a graph never changes once built.
        """
        out = Graph.__new__(Graph)
        for slot in Graph.__slots__:
            setattr(out, slot, getattr(self, slot))
        out.checked = {**self.checked, **{i: tuple(ps) for i, ps in checked.items() if ps}}
        return out

    @property
    def topo(self) -> tuple[int, ...]:
        """The stable topological order: among tasks free to go, the lowest index first."""
        if self._topo is None:
            self._topo = tuple(_kahn(self.requires, self.after, self.dependents,
                                     self.followers, lowest_first=True))
        return self._topo

    @property
    def edge_count(self) -> int:
        return sum(map(len, self.requires)) + sum(map(len, self.after))

    @classmethod
    def build(
        cls,
        tasks: Iterable[tuple[Hashable, Iterable[Hashable]]],
        *,
        after: Mapping[Hashable, Iterable[Hashable]] | None = None,
        durations: Mapping[Hashable, float | None] | None = None,
        stable: bool = False,
    ) -> Graph:
        """Validate ``(id, prerequisites)`` pairs and build the graph.

        Raises a :class:`DependencyError` naming every problem found (see
        :mod:`pytest_dagorder.core.errors`); nothing is partially built.
        ``stable``: :attr:`topo` will be needed (computed on the way).
        """
        ids: list[Hashable] = []
        raw_requires: list[Iterable[Hashable]] = []
        index: dict[Hashable, int] = {}
        duplicates: dict[Hashable, None] = {}
        for task_id, reqs in tasks:
            if task_id in index:
                duplicates[task_id] = None
            else:
                index[task_id] = len(ids)
            ids.append(task_id)
            raw_requires.append(reqs)
        problems: list[DependencyError] = []
        if duplicates:
            problems.append(DuplicateTaskError(list(duplicates)))
        n = len(ids)
        requires, after_lists, missing, selfdeps = _resolve_edges(ids, index, raw_requires,
                                                                  after)
        if missing:
            problems.append(UnknownDependencyError(missing))
        problems.extend(SelfDependencyError(t) for t in selfdeps)
        if not problems:
            dur: list[float | None] = [None] * n
            if durations:
                for task_id, d in durations.items():
                    i = index.get(task_id)
                    if i is not None:
                        dur[i] = d
            try:
                # Proves acyclicity on the way.
                return cls(ids, requires, after_lists, dur, stable=stable)
            except _CycleFound:
                pass
        if not duplicates:
            cycles = _find_cycles(n, requires, after_lists)
            problems.extend(CycleError([ids[i] for i in c]) for c in cycles)
        raise DependencyError.combine(problems)

    @classmethod
    def of_positions(
        cls,
        requires: Sequence[Sequence[int]],
        *,
        after: Mapping[int, Sequence[int]] | None = None,
        durations: Mapping[int, float | None] | None = None,
        stable: bool = False,
    ) -> Graph:
        """:meth:`build` for tasks named by their positions ``0 .. n - 1``.

        The same graph, or the same errors, as ``build(enumerate(requires),
        ...)``; where every edge names another task once (the planner's and
        the controller's graphs always do) no id is hashed or looked up.
        """
        n = len(requires)
        after = after or {}
        durations = durations or {}
        if (_well_formed(requires, n) and _well_formed(after, n)
                and all(type(k) is int and 0 <= k < n for k in durations)):
            after_lists: list[Sequence[int]] = [() for _ in range(n)]
            for k, deps in after.items():
                if deps:
                    req = requires[k]
                    # An edge that is both "requires" and "after" is just "requires".
                    after_lists[k] = [j for j in deps if j not in req] if req else deps
            dur: list[float | None] = [None] * n
            for k, d in durations.items():
                dur[k] = d
            try:
                return cls(range(n), requires, after_lists, dur, stable=stable)
            except _CycleFound:
                pass  # build names the cycles
        # (Positions are hashable ids: the casts only widen the key type.)
        return cls.build(enumerate(requires), stable=stable,
                         after=cast(Mapping[Hashable, Sequence[int]], after),
                         durations=cast(Mapping[Hashable, float | None], durations))

    @classmethod
    def of_checked(cls, edges: Edges) -> Graph:
        """The graph over ``edges`` as :func:`stable_order` checked them: no check
        again (the order is proved on the way, where an edge leads forward)."""
        n = len(edges)
        return cls(range(n), edges.requires, edges.after, [None] * n)

    def critical_path(self) -> tuple[float, ...]:
        """Per task: the longest sum of durations from it to any sink, itself included.

        Computed once, on first use, in reverse topological order.
        """
        if self._critical is None:
            crit = list(self.durations)
            for i in reversed(self._order):
                best = 0.0
                for d in self.dependents[i]:
                    if crit[d] > best:
                        best = crit[d]
                for d in self.followers[i]:
                    if crit[d] > best:
                        best = crit[d]
                crit[i] = self.durations[i] + best
            self._critical = tuple(crit)
        return self._critical

    def longest_chain(self) -> int:
        """Number of tasks on the longest dependency chain (0 for an empty graph)."""
        depth = [1] * len(self.ids)
        for i in self._order:
            for p in (*self.requires[i], *self.after[i]):
                if depth[p] + 1 > depth[i]:
                    depth[i] = depth[p] + 1
        return max(depth, default=0)


@dataclass(frozen=True)
class Edges:
    """Edges by position, already checked (see :func:`stable_order`) and kept as they are.

    Not a :class:`Graph`: a caller that needs only the order holds these,
    and the graph the scheduler runs is built once, with the edges it adds.
    """

    requires: Sequence[tuple[int, ...]]
    after: Sequence[tuple[int, ...]]

    def __len__(self) -> int:
        return len(self.requires)

    @classmethod
    def none(cls, n: int) -> Edges:
        """``n`` tests, no edge."""
        return cls([()] * n, [()] * n)


class Order(NamedTuple):
    """Edges by position, checked and put in order, without a :class:`Graph` built."""

    #: The stable topological order (what :attr:`Graph.topo` would be).
    topo: list[int]
    #: The edges as the graph would hold them: each prerequisite once, an
    #: ``after`` edge that is also a ``requires`` one dropped.
    requires: list[tuple[int, ...]]
    after: list[tuple[int, ...]]


def inverse(order: Sequence[int]) -> list[int]:
    """The permutation that undoes ``order``: ``inverse(order)[order[k]] == k``."""
    out = [0] * len(order)
    for k, old in enumerate(order):
        out[old] = k
    return out


def renumbered(edges: Sequence[Sequence[int]], order: Sequence[int],
               to: Sequence[int] | None = None) -> list[tuple[int, ...]]:
    """``edges`` by position after the positions moved: old position
    ``order[k]`` is now ``k`` (``to``: :func:`inverse` of ``order``, where
    the caller has it).  The one place a permutation moves edges: the plan's
    topological order, a hook that reordered the items, a driver's order."""
    to = inverse(order) if to is None else to
    return [tuple(to[p] for p in edges[old]) for old in order]


def stable_order(requires: Sequence[Sequence[int]], *,
                 after: Mapping[int, Sequence[int]] | None = None) -> Order:
    """The checks and the order of :meth:`Graph.of_positions` ``(..., stable=True)``,
    for a caller that needs only the order (a collection: the graph the core
    runs is built elsewhere, once).

    Raises the same :class:`DependencyError` (each cycle named) on the same input.
    """
    n = len(requires)
    after = after or {}
    if _well_formed(requires, n) and _well_formed(after, n):
        after_lists: list[tuple[int, ...]] = [() for _ in range(n)]
        for k, deps in after.items():
            if deps:
                req = requires[k]
                after_lists[k] = tuple(j for j in deps if j not in req)
        req_lists = [tuple(r) for r in requires]
        if _points_back(req_lists) and _points_back(after_lists):
            return Order(list(range(n)), req_lists, after_lists)
        order = _kahn(req_lists, after_lists, *_reverse(req_lists, after_lists),
                      lowest_first=True)
        if len(order) == n:
            return Order(order, req_lists, after_lists)
    # Malformed or cyclic: build names every problem (or cleans the edges up).
    graph = Graph.of_positions(requires, after=after, stable=True)
    return Order(list(graph.topo), list(graph.requires), list(graph.after))


def prerequisites_of(
    roots: Iterable[int], requires: Sequence[Sequence[int]], after: Sequence[Sequence[int]]
) -> set[int]:
    """Every index that ``roots`` (transitively) wait for through either kind of edge.

    Takes plain adjacency lists, so the planner can use it before a graph is
    built.  A root is included only if another root waits for it.
    """
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        i = stack.pop()
        for p in (*requires[i], *after[i]):
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def _resolve_edges(
    ids: Sequence[Hashable],
    index: Mapping[Hashable, int],
    raw_requires: Sequence[Iterable[Hashable]],
    after: Mapping[Hashable, Iterable[Hashable]] | None,
) -> tuple[list[list[int]], list[list[int]], dict[Hashable, list[Hashable]], list[Hashable]]:
    """:meth:`Graph.build`'s edges by position: (requires, after) per task,
    each without repeats, and the problems met on the way: per unknown id,
    the tasks that name it (an unknown task of ``after`` names itself), and
    the tasks that name themselves."""
    missing: dict[Hashable, list[Hashable]] = {}
    selfdeps: list[Hashable] = []

    def resolve(i: int, deps: Iterable[Hashable]) -> list[int]:
        out: dict[int, None] = {}
        for dep in deps:
            j = index.get(dep)
            if j is None:
                missing.setdefault(dep, []).append(ids[i])
            elif j == i:
                if ids[i] not in selfdeps:
                    selfdeps.append(ids[i])
            else:
                out[j] = None
        return list(out)

    requires = [resolve(i, reqs) for i, reqs in enumerate(raw_requires)]
    after_lists: list[list[int]] = [[] for _ in ids]
    if after:
        for task_id, deps in after.items():
            i = index.get(task_id)
            if i is None:
                missing.setdefault(task_id, []).append(task_id)
                continue
            # An edge that is both "requires" and "after" is just "requires".
            req = set(requires[i])
            after_lists[i] = [j for j in resolve(i, deps) if j not in req]
    return requires, after_lists, missing, selfdeps


def _reverse(
    requires: Sequence[Sequence[int]], after: Sequence[Sequence[int]]
) -> tuple[list[list[int]], list[list[int]]]:
    """The reverse edges (dependents, followers), each list in index order."""
    n = len(requires)
    dependents: list[list[int]] = [[] for _ in range(n)]
    followers: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        for p in requires[i]:
            dependents[p].append(i)
        for p in after[i]:
            followers[p].append(i)
    return dependents, followers


def _well_formed(edges: Sequence[Sequence[int]] | Mapping[int, Sequence[int]], n: int) -> bool:
    """Whether each task in ``edges`` (a list by position, or a mapping) names
    tasks ``0 .. n - 1`` other than itself, each once."""
    if isinstance(edges, Mapping):
        if not all(type(i) is int and 0 <= i < n for i in edges):
            return False
        pairs: Iterable[tuple[int, Sequence[int]]] = edges.items()
        lists: Iterable[Sequence[int]] = edges.values()
    else:
        pairs, lists = enumerate(edges), edges
    # Plain ints only (bools and floats would be looked up, not indexed):
    # one pass in C over every edge.
    if not set(map(type, itertools.chain.from_iterable(lists))) <= {int}:
        return False
    for i, pre in pairs:
        if pre and (i in pre or min(pre) < 0 or max(pre) >= n
                    or (len(pre) > 1 and len(set(pre)) != len(pre))):
            return False
    return True


def _points_back(edges: Sequence[Sequence[int]]) -> bool:
    """Whether every task's prerequisites in ``edges`` have lower indices than it."""
    return all(not pre or max(pre) < i for i, pre in enumerate(edges))


def _kahn(
    requires: Sequence[Sequence[int]],
    after: Sequence[Sequence[int]],
    dependents: Sequence[Sequence[int]],
    followers: Sequence[Sequence[int]],
    *,
    lowest_first: bool,
) -> list[int]:
    """Kahn's algorithm: tasks in an order where each comes after its prerequisites.

    ``dependents`` / ``followers`` are the reverse edges of ``requires`` /
    ``after`` (see :func:`_reverse`).  The order is shorter than the graph
    exactly when there is a cycle: what is left out lies on a cycle or
    behind one.  ``lowest_first`` takes the lowest free index each time (a
    heap: the stable order); otherwise the most recently freed one (a plain
    stack, cheaper: any order will do).
    """
    n = len(requires)
    indegree = [len(requires[i]) + len(after[i]) for i in range(n)]
    # In index order, so already a valid heap.
    ready = [i for i in range(n) if not indegree[i]]
    pop: Callable[[list[int]], int] = heapq.heappop if lowest_first else list.pop
    push: Callable[[list[int], int], None] = heapq.heappush if lowest_first else list.append
    order: list[int] = []
    while ready:
        i = pop(ready)
        order.append(i)
        for succ in (dependents[i], followers[i]):
            for d in succ:
                indegree[d] -= 1
                if not indegree[d]:
                    push(ready, d)
    return order


def _find_cycles(
    n: int, requires: Sequence[Sequence[int]], after: Sequence[Sequence[int]]
) -> list[list[int]]:
    """One cycle per strongly connected component, each as a closed path of indices.

    Edges point from a task to its prerequisites, so a path reads "depends
    on".  The fast path (Kahn peeling) proves most graphs acyclic in O(V + E);
    Tarjan only runs on what is left.
    """
    # What Kahn cannot order lies on a cycle or behind one.
    alive = [True] * n
    ordered = _kahn(requires, after, *_reverse(requires, after), lowest_first=False)
    if len(ordered) == n:
        return []
    for i in ordered:
        alive[i] = False

    def succ(i: int) -> list[int]:
        return sorted(p for p in (*requires[i], *after[i]) if alive[p])

    components = strongly_connected((i for i in range(n) if alive[i]), succ)
    cycles = [_cycle_in(comp, succ) for comp in components]
    cycles.sort(key=lambda c: c[0])
    return cycles


def strongly_connected(
    roots: Iterable[int], succ: Callable[[int], Sequence[int]]
) -> list[list[int]]:
    """The strongly connected components with more than one node (iterative Tarjan).

    Nodes are reached from ``roots``, in the order given, and through
    ``succ`` (whose order is kept): the result is deterministic.  Shared by
    cycle reporting here and by the scheduler's check of affinity groups.
    """
    index_of: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    scc_stack: list[int] = []
    components: list[list[int]] = []
    for root in roots:
        if root in index_of:
            continue
        index_of[root] = low[root] = len(index_of)
        scc_stack.append(root)
        on_stack.add(root)
        work: list[tuple[int, Sequence[int], int]] = [(root, succ(root), 0)]
        while work:
            v, nbrs, k = work[-1]
            if k < len(nbrs):
                work[-1] = (v, nbrs, k + 1)
                w = nbrs[k]
                if w not in index_of:
                    index_of[w] = low[w] = len(index_of)
                    scc_stack.append(w)
                    on_stack.add(w)
                    work.append((w, succ(w), 0))
                elif w in on_stack:
                    low[v] = min(low[v], index_of[w])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index_of[v]:
                comp: list[int] = []
                while True:
                    w = scc_stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    components.append(comp)
    return components


def cycle_breaks(requires: Sequence[Sequence[int]]) -> list[tuple[int, int, list[int]]]:
    """The edges to drop so that no cycle is left, the way a plugin that never
    reorders drops them: every edge on a cycle whose prerequisite comes later
    than its dependent (indices are collection order).

    Each as ``(dependent, prerequisite, cycle)``, ``cycle`` a closed path
    through that edge (``[dependent, prerequisite, ..., dependent]``), in
    order of dependent, then prerequisite.  Inside a strongly connected
    component the edges kept all point to earlier tasks, so none is left on
    a cycle.
    """
    if all(p < i for i, ps in enumerate(requires) for p in ps):
        return []  # every prerequisite comes earlier (the usual case there): no cycle

    succ = [sorted(set(ps)) for ps in requires].__getitem__
    out: list[tuple[int, int, list[int]]] = []
    for comp in strongly_connected(range(len(requires)), succ):
        members = set(comp)
        for i in sorted(comp):
            for p in succ(i):
                if p in members and p > i:
                    out.append((i, p, [i, *_path_in(members, succ, p, i)]))
    out.sort(key=lambda e: (e[0], e[1]))
    return out


def _path_in(members: set[int], succ: Callable[[int], Sequence[int]],
             start: int, goal: int) -> list[int]:
    """The shortest path from ``start`` to ``goal`` inside ``members`` (BFS), both included."""
    parent: dict[int, int] = {start: start}
    frontier = [start]
    while frontier and goal not in parent:
        nxt: list[int] = []
        for v in frontier:
            for w in succ(v):
                if w in members and w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    path = [goal]
    while path[-1] != start:
        path.append(parent[path[-1]])
    return path[::-1]


def _cycle_in(component: list[int], succ: Callable[[int], list[int]]) -> list[int]:
    """The shortest cycle through the component's lowest index (BFS)."""
    members = set(component)
    start = min(component)
    parent: dict[int, int] = {start: start}
    frontier = [start]
    while frontier:
        nxt: list[int] = []
        for v in frontier:
            for w in succ(v):
                if w not in members:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    path.reverse()
                    return [*path, start]
                if w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError("a strongly connected component always holds a cycle")
