"""``--dag-shard K/N``: keep one part of the planned run, report the others as deselected.

The partition itself is pure (:mod:`pytest_dagorder.core.shards`); this module
reads what it needs off the plan (node ids, edges, ``xdist_group`` labels,
modules using pytest-dependency's runtime ``depends()``) and the recorded
durations, then says what of the plan lies in the part and narrows the
session's items to it.  It runs wherever a plan is made (the serial
process, every xdist worker), so
under ``-n`` every worker cuts the same part and xdist sees one collection.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, replace
from math import fsum
from typing import TYPE_CHECKING

import pytest

from ..core.graph import Edges
from ..declaring.notes import ShardNote
from ..migration.runtime import RuntimeUsers
from ..options.settings import settings_of
from ..shims.late_loading import Later
from ..shims.pytest_internals import count_deselected
from . import durations

if TYPE_CHECKING:
    from ..core import shards
    from ..core.shards import Partition
else:
    shards = Later("pytest_dagorder.core.shards")

#: Set where ``--dag-shard`` left this process's part empty (see :func:`settle_exit_status`).
EMPTY_PART = pytest.StashKey[bool]()


def xdist_group(item: pytest.Item) -> str | None:
    """The ``xdist_group`` label of ``item`` (xdist's own reading of the marker)."""
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


@dataclass(frozen=True)
class Part:
    """What the plan holds of this process's part (see :func:`apply`)."""

    graph: Edges | None
    items: list[pytest.Item]
    deselected: list[pytest.Item]
    pulled_back: list[pytest.Item]
    #: The header's facts about the part (None: no ``--dag-shard``).
    note: ShardNote | None = None
    #: How many tests of the selection the other parts run.
    left: int = 0


def labels(marker_names: frozenset[str], items: Sequence[pytest.Item]) -> list[str | None]:
    """Per item, what ties it to other tests besides edges (None: nothing)."""
    grouped = "xdist_group" in marker_names
    uses = RuntimeUsers()
    out: list[str | None] = []
    for it in items:
        group = xdist_group(it) if grouped else None
        if group is not None:
            out.append(f"xdist_group {group}")
        elif uses(it):
            # Its module checks results in its own process: one part for all of it.
            module = it.getparent(pytest.Module)
            out.append(f"runtime depends() in {module.nodeid if module else it.nodeid}")
        else:
            out.append(None)
    return out


def apply(config: pytest.Config, graph: Edges | None, items: list[pytest.Item], *,
          deselected: list[pytest.Item], pulled_back: list[pytest.Item],
          universe: list[pytest.Item], links: list[tuple[int, ...]], problems: bool,
          marker_names: frozenset[str]) -> Part | None:
    """What of the plan lies in the part ``--dag-shard`` names (None: the plan as
    it is); ``items`` are narrowed to it.

    ``items`` are the plan's items (the run, in its order; ``graph`` over
    them, then the prerequisites ``deselected``); what leaves goes through
    ``pytest_deselected``, as ``-k`` does it.  ``problems``: the collection
    found some; ``marker_names``: every marker a test carries; the rest as
    :class:`~.planning.Plan` has them.

    The parts are cut from everything collected, before ``-k``, ``-m`` or
    ``--lf`` narrowed it (``universe``), by the durations of
    :func:`~pytest_dagorder.features.durations.split_basis`; then the selection
    keeps what of it lies in this part.  So a part does not move when the
    selection does: ``--lf`` run part after part, each part's run changing
    what failed last, still runs each failure in exactly one part.
    """
    settings = settings_of(config)
    shard = settings.shard
    if problems:
        return None  # reported whole, in every part: nothing runs anyway
    g = graph
    if g is None and settings.cuts_or_records:
        # A driver records durations only through a run of the core; a suite
        # without declarations gets one with no edges.
        g = Edges.none(len(items))
    whole = Part(graph=g, items=list(items), deselected=deselected, pulled_back=pulled_back)
    if shard is None or g is None:
        return whole
    k, n = shard
    universe = universe or list(items)
    links = links or [()] * len(universe)
    ids = [it.nodeid for it in universe]
    basis = durations.split_basis(config)
    recorded = basis.durations
    split = shards.partition(ids, links, [()] * len(universe), n,
                             labels=labels(marker_names, universe), recorded=recorded)
    part_of = {id(it): p for it, p in zip(universe, split.part, strict=True)}
    run = len(items)
    # Each test runs in the part of its component; a test the universe lacks
    # (not collected by this process) stays in the first part, where every
    # process puts it alike.
    mine = [part_of.get(id(items[i]), 0) == k - 1 for i in range(run)]
    done = lastfailed_done(config, basis)
    if done:
        mine = [False] * run
    keep = [i for i in range(run) if mine[i]]
    out = [items[i] for i in range(run) if not mine[i]]
    note = _note(shard, split, universe, ids, items, keep, recorded, done)
    if not out:
        return replace(whole, note=note)
    if not keep:
        config.stash[EMPTY_PART] = True
    part = _narrowed(whole, g, keep, note, len(out))
    items[:] = part.items
    config.hook.pytest_deselected(items=out)
    return part


def _note(shard: tuple[int, int], split: Partition, universe: Sequence[pytest.Item],
          ids: Sequence[str], items: Sequence[pytest.Item], keep: Sequence[int],
          recorded: Mapping[str, float], done: bool) -> ShardNote:
    """What the header says of part ``shard`` (K, N) of the cut ``split`` of
    ``universe`` (node ids ``ids``): how many of ``items`` it keeps (``keep``,
    by position), their recorded seconds, whether it is oversized or empty by
    the cut, and ``done`` (see :func:`lastfailed_done`)."""
    k, n = shard
    timed = any(nid in recorded for nid in ids)
    seconds = None
    if timed:
        w = dict(zip((id(it) for it in universe), shards.weights(ids, recorded), strict=True))
        seconds = fsum(w[id(items[i])] for i in keep)
    at = {id(it): u for u, it in enumerate(universe)}
    selected = {at[id(items[i])] for i in keep if id(items[i]) in at}
    return ShardNote(k, n, len(keep), len(items), seconds,
                     oversized(n, split, selected, timed=seconds is not None),
                     len(split.members(k - 1)) > 0, done)


def _narrowed(whole: Part, g: Edges, keep: Sequence[int], note: ShardNote,
              n_out: int) -> Part:
    """``whole`` (the plan; ``g`` its graph) narrowed to its tests at positions
    ``keep``, with the deselected prerequisites they need; ``n_out`` tests of
    the selection left to other parts."""
    items, run = whole.items, len(whole.items)
    kept = {id(items[i]) for i in keep}
    outside = sorted({p for i in keep for p in (*g.requires[i], *g.after[i]) if p >= run})
    return Part(graph=_restricted(g, keep, run), items=[items[i] for i in keep],
                deselected=[whole.deselected[p - run] for p in outside],
                pulled_back=[it for it in whole.pulled_back if id(it) in kept],
                note=note, left=n_out)


def lastfailed_done(config: pytest.Config, basis: durations.SplitBasis) -> bool:
    """``--lf``, part after part: the loop began with failures and none is left.

    pytest's ``--lf`` runs everything when nothing failed last time; in a loop
    whose earlier parts fixed every failure, this part had none to re-run, so
    it runs nothing (its failures, had it any, would still be recorded).
    """
    return (bool(config.getoption("lf", False)) and basis.failures_at_start
            and not durations.failures_recorded(config))


def from_workers(config: pytest.Config, *, deselected: int, empty_part: bool) -> None:
    """On the xdist controller: what the workers' selection means for this session.

    The workers deselected ``deselected`` tests (``-k``, ``-m``, the other
    parts): the summary line counts them as a serial run does.  ``empty_part``:
    see :func:`settle_exit_status`.
    """
    count_deselected(config, deselected)
    if empty_part:
        config.stash[EMPTY_PART] = True


def settle_exit_status(session: pytest.Session) -> None:
    """An empty part of a suite that has tests passes (exit status 0, not 5).

    More parts than groups of tests that must stay together leave some part
    empty; a CI matrix job for it has nothing to run, and pytest's "no tests
    ran" (5) would fail the job.  A selection that is empty before the split
    (nothing collected, ``-k`` matching nothing) keeps pytest's 5.
    """
    if (session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED
            and session.config.stash.get(EMPTY_PART, False)):
        session.exitstatus = pytest.ExitCode.OK


def _restricted(g: Edges, keep: Sequence[int], run: int) -> Edges:
    """``g`` over ``keep`` (in order), then the prerequisites outside the run they need.

    A part holds whole components, so no edge of a kept test leads to a test
    of another part.
    """
    outside = sorted({p for i in keep for p in (*g.requires[i], *g.after[i]) if p >= run})
    pos = {old: new for new, old in enumerate([*keep, *outside])}
    requires = [tuple(pos[p] for p in g.requires[i]) for i in keep]
    after = [tuple(pos[p] for p in g.after[i]) for i in keep]
    # A subgraph of an ordered graph, renumbered in order: nothing to check again.
    return Edges([*requires, *[()] * len(outside)], [*after, *[()] * len(outside)])


def oversized(n: int, split: Partition, selected: Container[int], *,
              timed: bool) -> tuple[str, int, float | None] | None:
    """The component heavier than a fair share of ``n`` parts, as (first node id,
    tests, recorded seconds; None where nothing is recorded); None if none is,
    or if none of its tests is among ``selected`` (this part's run, as
    positions in the split): a part it is not in is not made longer by it."""
    largest = split.largest
    if largest is None or n < 2 or largest.weight <= split.total / n:
        return None
    if not any(i in selected for i in largest.members):
        return None
    return largest.key, len(largest.members), largest.weight if timed else None
