"""Finding what a suite does not declare: the searches, over plain values.

A test that passes in the serial order but not without the tests before
it needs some of them.  :func:`needed` finds a set of earlier tests it
needs by delta debugging over the serial prefix: a probe runs the test
after a subset of the prefix (in the serial order) and says whether it
passed.  The subset is narrowed by bisection on the prefix's length: the
shortest prefix with which the test passes ends with a test it needs; the
search then repeats below that test, keeping the ones found, until the found
tests alone suffice, and a last pass drops any found test the others make
unnecessary.  The result is 1-minimal (leaving out any one of its tests
makes the probe fail) for any probe, and exactly the needed tests when
the test needs all of a fixed set; a run of ``m`` findings costs about
``m * log2(prefix)`` probes.

The probe is a callback (the driver runs a pytest process), and the search
asks for several probes at once where it can use them (``width``): a k-ary
search instead of a bisection, the same answer in fewer rounds.  Everything
is deterministic: the same probe answers give the same result.

Also here: which pairs of tests might not run at the same time (both write
one path and no edge orders them), the name
suggested for the resource they share, and which found edges the others
already imply.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

#: ``probes(subsets)`` -> whether the test passed after each subset (indices
#: into the prefix, ascending); one answer per subset, in order.
Probes = Callable[[Sequence[Sequence[int]]], list[bool]]


class SearchStopped(Exception):
    """A probe callback raises this to end a search early (the time budget ran out)."""


class NotReproducible(SearchStopped):
    """The test did not pass with any subset of its prefix the search reached,
    though the serial run passed it after the whole prefix: the probes do not
    reproduce the serial run (state outside what a probe starts from)."""


def _first_pass(lo: int, hi: int, with_prefix: Callable[[int], list[int]],
                probes: Probes, width: int) -> tuple[int, bool]:
    """The smallest ``k`` in ``(lo, hi]`` seen to pass while ``k - 1`` fails, and
    whether any probe passed (if not, ``hi`` is taken on trust).

    Invariant: the probe fails at ``lo`` and passes at ``hi``; each round
    probes up to ``width`` points between them and keeps the first passing
    one and the point before it, so a probe that is not monotone in ``k``
    still ends on a boundary.
    """
    seen = False
    while hi - lo > 1:
        gap = hi - lo
        count = min(width, gap - 1)
        points = sorted({lo + (gap * (j + 1)) // (count + 1) for j in range(count)} - {lo, hi})
        answers = probes([with_prefix(k) for k in points])
        new_lo, new_hi = lo, hi
        for k, ok in zip(points, answers, strict=True):
            if ok:
                new_hi = k
                seen = True
                break
            new_lo = k
        lo, hi = new_lo, new_hi
    return hi, seen


def needed(size: int, probes: Probes, *, width: int = 1,
           known_failing_alone: bool = True) -> list[int]:
    """Indices (ascending) into a prefix of ``size`` tests that the test needs.

    ``probes`` must pass with the whole prefix (the serial run showed it).
    ``known_failing_alone``: the test was seen to fail with none of the
    prefix (else that is probed first; an empty result means it needs nothing).
    """
    width = max(1, width)
    if not known_failing_alone and probes([[]])[0]:
        return []
    if size == 1:  # the whole prefix passes, none of it fails: the one test it is
        return [0]
    found: list[int] = []
    hi = size
    while True:
        # Probes the first k tests of the prefix plus the ones found (all >= k).
        boundary, seen = _first_pass(0, hi, lambda k: [*range(k), *found], probes, width)
        if not seen and not found and not probes([range(size)])[0]:
            # Nothing short of the whole prefix passed, and the whole prefix (taken
            # on the serial run's word) does not either: one probe ends the search
            # where the rounds below would each bisect noise.
            raise NotReproducible
        found.insert(0, boundary - 1)
        if probes([found])[0]:
            break
        hi = boundary - 1
        if hi == 0:
            # Each round ends on a set seen to pass (or the whole prefix, which the
            # serial run passed) and the next adds its boundary test to what was
            # found: only probes that do not repeat the serial run reach nothing
            # left below without a passing found set.
            raise NotReproducible
    # 1-minimal: drop each found test the others make unnecessary (earliest first).
    k = 0
    while len(found) > 1 and k < len(found):
        without = found[:k] + found[k + 1:]
        if probes([without])[0]:
            found = without
        else:
            k += 1
    return found


# -- what else the findings say --------------------------------------------------------


def implied(edges: Mapping[int, Sequence[int]], declared: Sequence[Sequence[int]],
            keep: Callable[[int, int], bool] = lambda t, p: False) -> dict[int, list[int]]:
    """``edges`` (test -> found prerequisites) less those other edges already imply.

    ``declared``: each test's declared prerequisites (of either kind).  An
    edge ``t -> p`` is dropped when ``p`` is reachable from another
    prerequisite of ``t`` (found or declared), unless ``keep(t, p)`` (it
    carries more than order, e.g. state the two must share in one process).
    """
    def reach(start: int, avoid: tuple[int, int]) -> set[int]:
        seen: set[int] = set()
        stack = [start]
        while stack:
            u = stack.pop()
            nxt = [*edges.get(u, ()), *(declared[u] if u < len(declared) else ())]
            for v in nxt:
                if (u, v) != avoid and v not in seen:
                    seen.add(v)
                    stack.append(v)
        return seen

    out: dict[int, list[int]] = {}
    for t in sorted(edges):
        kept: list[int] = []
        for p in edges[t]:
            others = [q for q in (*edges[t], *(declared[t] if t < len(declared) else ()))
                      if q != p]
            if not keep(t, p) and any(p in reach(q, (t, p)) for q in others):
                continue
            kept.append(p)
        if kept:
            out[t] = kept
    return out


@dataclass(frozen=True, slots=True)
class Touches:
    """The paths one test wrote (created, changed, removed) and read while it ran."""

    writes: frozenset[str] = frozenset()
    reads: frozenset[str] = frozenset()


def ordered(edges: Sequence[Sequence[int]]) -> Callable[[int, int], bool]:
    """Whether a path of ``edges`` (test -> prerequisites) joins two tests, either way."""
    cache: dict[int, frozenset[int]] = {}

    def above(u: int) -> frozenset[int]:
        if u not in cache:
            seen: set[int] = set()
            stack = [u]
            while stack:
                for v in edges[stack.pop()]:
                    if v not in seen:
                        seen.add(v)
                        stack.append(v)
            cache[u] = frozenset(seen)
        return cache[u]

    return lambda a, b: a in above(b) or b in above(a)


def conflict_candidates(touches: Sequence[Touches], linked: Callable[[int, int], bool],
                        limit: int, per_path: int | None = None) -> list[tuple[int, int, str]]:
    """Pairs ``(i, j, path)``, ``i < j``, that may not run at the same time.

    Both write ``path`` (a test that only reads what another writes is
    ordered after it if it needs it, and otherwise reads other rows or
    parts of it), and no edge orders them (``linked``).  Ranked: paths that
    fewer tests write first (a path every test writes, a log or a cache, is
    the least likely to be a clash), then in test order; at most
    ``per_path`` pairs of one path (a clash on it makes every writer carry
    it, see :func:`writers`), at most ``limit`` in all.
    """
    writers_of = writers(touches)
    ranked: list[tuple[int, int, int, str]] = []
    seen: set[tuple[int, int]] = set()
    for path in sorted(writers_of, key=lambda p: (len(writers_of[p]), p)):
        users = writers_of[path]
        taken = 0
        for x, i in enumerate(users):
            for j in users[x + 1:]:
                if (i, j) in seen or linked(i, j):
                    continue
                if per_path is not None and taken >= per_path:
                    break
                seen.add((i, j))
                ranked.append((len(users), i, j, path))
                taken += 1
    ranked.sort(key=lambda r: (r[0], r[1], r[2]))
    return [(i, j, path) for _, i, j, path in ranked[:limit]]


def writers(touches: Sequence[Touches]) -> dict[str, list[int]]:
    """Each path written by two tests or more, with those tests in order."""
    by_path: dict[str, list[int]] = {}
    for k, t in enumerate(touches):
        for path in t.writes:
            by_path.setdefault(path, []).append(k)
    return {path: ks for path, ks in by_path.items() if len(ks) > 1}


_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]+")


def resource_name(path: str, root: str) -> str:
    """A ``dag_resource`` name for what two tests share: the path, from the rootdir if below it."""
    rel = path[len(root):].lstrip("/\\") if path.startswith(root.rstrip("/\\") + "/") else path
    name = _UNSAFE.sub("_", rel).strip("_")
    return name or "shared"
