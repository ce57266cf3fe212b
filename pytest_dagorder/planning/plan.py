"""Turn a collected (and possibly filtered) session into a validated run plan.

Shared by the serial runner and the xdist worker (both are a
:class:`Planner`), so both see exactly the same graph: the tests that will
run (``items``, in a stable topological order), the graph over them plus the
prerequisites that were deselected, and every declaration problem.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Collection, Generator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .. import migration
from ..core import wording
from ..core.errors import CycleError, DependencyError, SelfDependencyError
from ..declaring.declarations import (
    DeclaredEdges,
    ForeignReader,
    MarkerCensus,
    Problem,
    Uncollectable,
    merge_shared,
    resolve_items,
)
from ..declaring.notes import EdgesFileNote, ShardNote
from ..declaring.resources import Needs, read_needs
from ..live_run.resume import blocked_last_time
from ..options import wording as options_wording
from ..options.markers import EXCLUSIVE, RESOURCE
from ..options.settings import Settings, settings_of
from ..shims.collector_pause import collector_paused
from ..shims.late_loading import Later
from ..shims.pytest_internals import (
    collect_quietly,
    directory_nodes,
    file_in_tree,
    fill_locations,
    resuming,
    testmon_selects,
    undo_deselected,
)

if TYPE_CHECKING:
    from ..core import graph as core_graph
    from ..core.graph import Edges
    from ..declaring import edges_file
    from ..features import sharding
    from ..live_run import dag_run
else:
    core_graph = Later("pytest_dagorder.core.graph")
    edges_file = Later("pytest_dagorder.declaring.edges_file")
    dag_run = Later("pytest_dagorder.live_run.dag_run")  # only where a test is named in a skip
    sharding = Later("pytest_dagorder.features.sharding")  # only where a run cuts or records


@dataclass(frozen=True)
class DraftPlan:
    """What the declarations of a selection resolve to (:func:`make_plan`): the
    first collection step, from which :func:`collect_plan` makes the :class:`Plan`.

    ``graph`` indices ``0 .. len(items) - 1`` are ``items``; later ones were deselected.
    """

    items: list[pytest.Item]
    graph: Edges | None
    deselected: list[pytest.Item] = field(default_factory=list)
    pulled_back: list[pytest.Item] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    declared: bool = False
    #: Tests a foreign plugin would skip at run time, with its reason.
    skips: list[tuple[pytest.Item, str]] = field(default_factory=list)
    #: Every test collected before any was deselected (``-k``, ``-m``, ``--lf``)
    #: and the prerequisites collected for them; ``links``: each one's
    #: prerequisites there, by position (empty where nothing declares).
    #: ``--dag-shard`` cuts this, so a part does not depend on the selection.
    universe: list[pytest.Item] = field(default_factory=list)
    links: list[tuple[int, ...]] = field(default_factory=list)
    #: Node ids of every test a problem is about (before problems shared by
    #: many tests were merged into one report).
    broken: set[str] = field(default_factory=set)
    #: ``id()`` of the items of ``skips`` a foreign reader skips (ini dag_strict).
    foreign: set[int] = field(default_factory=set)
    #: Under ``--continue-on-collection-errors``: the problems of the tests
    #: left out of the run (reported as collection errors; the rest runs).
    errors: list[Problem] = field(default_factory=list)


@dataclass(frozen=True)
class Plan(DraftPlan):
    """The draft completed by the later collection steps (the warnings, ``--lf``,
    resources, ``--dag-shard``): the fields below, and the draft's as they left
    them.

    Made once, by :func:`collect_plan`, from what each collection step
    returned; nothing changes it afterwards.
    """

    #: Resources and exclusivity of the tests that have any, by id(item).
    needs: dict[int, Needs] = field(default_factory=dict)
    #: The names of every marker some collected test carries (own or inherited).
    marker_names: frozenset[str] = frozenset()
    #: What the collection steps found to announce (worded in ``decide.py``):
    #: how many tests ``--lf`` runs again because a prerequisite blocked them,
    #: the edges file read (see :data:`EdgesFileNote`), the ``--dag-shard``
    #: part (see :data:`ShardNote`).
    lf_blocked: int = 0
    edges_file: EdgesFileNote | None = None
    shard: ShardNote | None = None
    #: The session collected every test under its arguments (no node id in
    #: them, no ``--lf``) and no plugin deselected any (a fact: what it means
    #: for a durations file is decided in ``decide.py``).
    whole: bool = False
    #: How many collected tests this process deselected in the end (``-k``,
    #: ``-m``, ``--dag-shard``, ... less the prerequisites pulled back): the
    #: "deselected" count of the terminal's summary line.
    dropped: int = 0
    #: How many tests of the selection ``--dag-shard`` left to other parts.
    shard_left: int = 0

    @property
    def nodeids(self) -> list[str]:
        return [it.nodeid for it in (*self.items, *self.deselected)]

    @cached_property
    def short_names(self) -> list[str]:
        """How skip reasons name the tests of :attr:`nodeids` (``dag_run.short_names``):
        made on first use, once for every part of the process that words a skip."""
        return dag_run.short_names(self.nodeids)


#: The xdist worker that shows the warnings every worker's collection finds.
FIRST_WORKER = "gw0"


def make_plan(
    selected: Sequence[pytest.Item],
    collected: Sequence[pytest.Item],
    *,
    with_prerequisites: bool,
    narrowed: bool,
    readers: Sequence[ForeignReader] = (),
    census: MarkerCensus | None = None,
    broken: Collection[str] = (),
) -> DraftPlan:
    """Resolve declarations of ``selected`` against everything ``collected``.

    ``collected`` holds the items seen before any plugin deselected some
    (``-k``, ``-m``, ``--lf``).  ``narrowed`` says the command line picked
    node ids inside modules, so siblings of the selected tests were never
    collected; they are collected here (without running any hook that
    reports them) only when a target cannot be found otherwise.  Likewise a
    target naming a file that was not collected at all (another file's node
    id) has that file collected, so it can be reported as deselected or
    pulled back instead of "unknown".

    ``broken``: node ids of tests whose declarations had problems (see
    :func:`salvaged`): they are left out of the run with their problems, and
    a test requiring one is skipped instead.
    """
    chosen = {id(it) for it in selected}
    universe = [*selected, *(it for it in collected if id(it) not in chosen)]
    census = census if census is not None else MarkerCensus()
    res = _resolve_widening(universe, readers, census, narrowed)
    skips = [(universe[i], reason) for i, reason in res.skips.items() if i < len(selected)]
    foreign = {id(universe[i]) for i in res.foreign}
    if not res.declared:
        return DraftPlan(list(selected), None, skips=skips, universe=universe, foreign=foreign)
    n_sel = len(selected)
    run, outside = _run_and_outside(universe, res, n_sel, collected, broken,
                                    with_prerequisites)
    items, planned, problems, broken_now = _ordered(universe, res, run, outside)
    return DraftPlan(
        items=items,
        graph=planned,
        deselected=[universe[i] for i in outside],
        pulled_back=[universe[i] for i in run if i >= n_sel],
        problems=problems,
        declared=True,
        skips=[(universe[i], res.skips[i]) for i in run if i in res.skips],
        universe=universe,
        links=[(*res.requires[u], *res.after[u]) for u in range(len(universe))],
        broken=broken_now,
        foreign=foreign,
    )


def _run_and_outside(universe: Sequence[pytest.Item], res: DeclaredEdges, n_sel: int,
                     collected: Sequence[pytest.Item], broken: Collection[str],
                     with_prerequisites: bool) -> tuple[list[int], list[int]]:
    """The tests that run (indices into ``universe``: the selected ones, less
    the ``broken`` ones, plus their prerequisites ``with_prerequisites``) in
    collection order; and the deselected direct prerequisites of the run,
    settled before anything runs, by index."""
    run = list(range(n_sel))
    if broken:
        run = _leave_out(universe, res, frozenset(broken), run)
    if with_prerequisites:
        run = sorted(set(run) | core_graph.prerequisites_of(run, res.requires, res.after))
    in_run = set(run)
    outside = sorted({p for i in run for p in (*res.requires[i], *res.after[i])} - in_run)
    return _collection_order(run, n_sel, universe, collected, res.requires, res.after), outside


def _ordered(universe: Sequence[pytest.Item], res: DeclaredEdges, run: Sequence[int],
             outside: Sequence[int],
             ) -> tuple[list[pytest.Item], Edges | None, list[Problem], set[str]]:
    """The tests of ``run`` in stable topological order and the graph over them
    (None, and ``run``'s order, when there are problems), the problems of the
    run (its declarations' and the graph's cycles) and the node ids they are about."""
    # Nodes of the graph as built: the deselected ones first, so that, free
    # from the start, they keep back no test of the run in the stable
    # topological order; then the run in collection order.
    order = [*outside, *run]
    problems: list[Problem] = []
    broken_now: set[str] = set()
    if res.problems:
        run_ids = {universe[i].nodeid for i in run}
        problems = merge_shared([p for p in res.problems if p.nodeid in run_ids])
        broken_now = {p.nodeid for p in res.problems if p.nodeid in run_ids}
    items = [universe[i] for i in run]
    planned: Edges | None = None
    try:
        graph = _stable_order(res, order, run)
    except DependencyError as exc:
        ids = [universe[u].nodeid for u in order]
        problems = [*problems, *(_problem_of(err, ids) for err in exc.errors)]
        broken_now |= {p.nodeid for p in problems}
    else:
        if not problems:
            # Stable topological order of the run: collection order unless forced later.
            n_out = len(outside)
            topo = [k for k in graph.topo if k >= n_out]
            items = [universe[order[k]] for k in topo]
            # Renumber so that index == position in items, the deselected ones last.
            planned = _renumbered(graph, [*topo, *range(n_out)])
    return items, planned, problems, broken_now


def _resolve_widening(universe: list[pytest.Item], readers: Sequence[ForeignReader],
                      census: MarkerCensus, narrowed: bool) -> DeclaredEdges:
    """The declarations of ``universe`` resolved, the siblings and files their
    unknown targets name collected into it (see :func:`make_plan`)."""
    res = resolve_items(universe, readers, census=census)
    failed: dict[str, Uncollectable] = {}
    tried: set[str] = set()
    # A test collected here may name a target in yet another file (a pulled-in
    # sibling's own prerequisite): look again until no new target is left.
    while res.unknown and not tried.issuperset(res.unknown):
        tried.update(res.unknown)
        extra = _collect_siblings(universe, failed) if narrowed else []
        narrowed = False  # the siblings of the tests collected here are in already
        n_failed = len(failed)
        extra += _collect_files(universe, res.unknown, {it.nodeid for it in extra}, failed)
        if not extra and len(failed) == n_failed:
            break
        universe.extend(extra)
        res = resolve_items(universe, readers, failed, census)
    return res


def _stable_order(res: DeclaredEdges, order: Sequence[int], run: Sequence[int]) -> core_graph.Order:
    """The edges of the tests of ``run`` with ``order[k]`` (an index into the
    universe) at position ``k``, checked and in stable topological order.

    Ordered even when declarations had problems: cycles among the edges that
    did resolve are reported in the same run.  Graph ids are positions (node
    ids may repeat, with --keep-duplicates); names come from plan.nodeids.
    """
    pos = {u: k for k, u in enumerate(order)}
    in_run = set(run)
    return core_graph.stable_order(
        [[pos[p] for p in res.requires[u]] if u in in_run else () for u in order],
        after={pos[u]: [pos[p] for p in res.after[u]] for u in run if res.after[u]},
    )


def _renumbered(graph: core_graph.Order, order: Sequence[int]) -> Edges:
    """``graph``'s edges with position ``order[k]`` at ``k`` (a topological
    order stays one: nothing to check again)."""
    to = core_graph.inverse(order)
    return core_graph.Edges(core_graph.renumbered(graph.requires, order, to),
                            core_graph.renumbered(graph.after, order, to))


def _leave_out(universe: Sequence[pytest.Item], res: DeclaredEdges, broken: frozenset[str],
               run: list[int]) -> list[int]:
    """``run`` without the ``broken`` tests; edges to them are cut from ``res``,
    and a test that required one is skipped."""
    cut = {i for i, it in enumerate(universe) if it.nodeid in broken}
    for i in range(len(universe)):
        if i in cut:
            continue
        lost = [p for p in res.requires[i] if p in cut]
        if lost:
            res.requires[i] = [p for p in res.requires[i] if p not in cut]
            res.skips.setdefault(i, wording.prerequisite_broken(universe[lost[0]].nodeid))
        if any(p in cut for p in res.after[i]):
            res.after[i] = [p for p in res.after[i] if p not in cut]
    res.problems = [p for p in res.problems if p.nodeid not in broken]
    return [i for i in run if i not in cut]


def _collection_order(
    run: Sequence[int],
    n_sel: int,
    universe: Sequence[pytest.Item],
    collected: Sequence[pytest.Item],
    requires: Sequence[Sequence[int]],
    after: Sequence[Sequence[int]],
) -> list[int]:
    """``run`` (indices into ``universe``) in the order the session would have had.

    The selected tests (``universe[:n_sel]``) keep the session's order; a
    prerequisite pulled back into the run takes its place in ``collected``
    (before the first selected test collected after it).  One the session
    never collected (a sibling or another file, collected by the planner)
    goes just before the first test of the run that needs it.
    """
    if max(run, default=-1) < n_sel:
        return list(run)  # nothing pulled back: the session's order stands
    cpos = {id(it): k for k, it in enumerate(collected)}
    pulled = sorted((cpos[id(universe[i])], i) for i in run
                    if i >= n_sel and id(universe[i]) in cpos)
    merged: list[int] = []
    k = 0
    for i in run:
        if i >= n_sel:
            continue
        here = cpos.get(id(universe[i]))
        while here is not None and k < len(pulled) and pulled[k][0] < here:
            merged.append(pulled[k][1])
            k += 1
        merged.append(i)
    merged += [i for _, i in pulled[k:]]
    key: dict[int, tuple[float, int, int]] = {i: (p, 0, i) for p, i in enumerate(merged)}
    in_run = set(run)
    needed_by: dict[int, list[int]] = {}
    for d in run:
        for p in (*requires[d], *after[d]):
            if p in in_run:
                needed_by.setdefault(p, []).append(d)
    last = (float("inf"), 0, 0)
    # Depth first, without recursion (a pulled-back chain can be long): a test
    # gets its place once every test needing it has one.
    for start in run:
        if start in key:
            continue
        stack, on_path = [start], {start}
        while stack:
            u = stack[-1]
            todo = next((d for d in needed_by.get(u, ()) if d not in key and d not in on_path),
                        None)
            if todo is not None:
                stack.append(todo)
                on_path.add(todo)
                continue
            stack.pop()
            on_path.discard(u)
            # A dependent still on the path closes a cycle (reported by the
            # graph); it counts as "last".
            first = min((key.get(d, last) for d in needed_by.get(u, ())), default=last)
            key[u] = (first[0], first[1] - 1, u)
    return sorted(run, key=key.__getitem__)


def _problem_of(err: DependencyError, ids: Sequence[str]) -> Problem:
    """The problem ``err`` reports, with the graph's positions named by node id.

    Edges come from resolved indices, so a cycle is the only error the graph
    can find here.
    """
    if isinstance(err, CycleError):
        named = [ids[k] for k in err.cycle if isinstance(k, int)]
        again = (SelfDependencyError(named[0]) if isinstance(err, SelfDependencyError)
                 else CycleError(named))
        return Problem(named[0], str(again))
    return Problem("", str(err))


def _collect_siblings(known: Sequence[pytest.Item],
                      failed: dict[str, Uncollectable]) -> list[pytest.Item]:
    """Items of the modules of ``known`` that were not collected (node-id selection)."""
    modules: dict[str, pytest.Module] = {}
    for it in known:
        mod = it.getparent(pytest.Module)
        if mod is not None:
            modules.setdefault(mod.nodeid, mod)
    return _items_below(list(modules.values()), {it.nodeid for it in known}, failed)


def _collect_files(
    known: Sequence[pytest.Item], targets: Sequence[str], also: set[str],
    failed: dict[str, Uncollectable],
) -> list[pytest.Item]:
    """Items of the test files that ``targets`` name but that have no collected test.

    Also the files of the session that skipped themselves at import, so that
    a target inside one is known as such.
    """
    if not known:
        return []
    session = known[0].session
    have = {it.nodeid for it in known} | also
    modules = {
        mod.nodeid for it in known if (mod := it.getparent(pytest.Module)) is not None
    }
    root = session.config.rootpath
    new: list[pytest.Collector] = []
    directories = directory_nodes(known)
    for target in targets:
        rel = target.split("::", 1)[0]
        if not rel.endswith(".py") or rel in modules:
            continue
        path = root / rel
        if not path.is_file():
            continue
        modules.add(rel)
        made = file_in_tree(session, path, directories)
        if isinstance(made, list):
            new += made
        else:
            # Its directory's conftest.py raised or skipped: the target's
            # file is unreachable for that reason.
            failed[rel] = _uncollectable(made, root)
    return _items_below(new, have, failed)


def _items_below(roots: Sequence[pytest.Collector], have: set[str],
                 failed: dict[str, Uncollectable]) -> list[pytest.Item]:
    """Every item below ``roots`` whose node id is not in ``have`` (which grows).

    A collector that skips or raises while collected goes into ``failed``
    (by node id), as pytest would report it, never out of this function.
    """
    found: list[pytest.Item] = []
    for root in roots:
        stack: list[pytest.Item | pytest.Collector] = [root]
        while stack:
            node = stack.pop(0)
            if isinstance(node, pytest.Item):
                if node.nodeid not in have:
                    have.add(node.nodeid)
                    found.append(node)
                continue
            try:
                children = collect_quietly(node)
            except (KeyboardInterrupt, pytest.exit.Exception):
                raise  # the user's or a test's request to end the session
            except pytest.skip.Exception as exc:
                failed[node.nodeid] = Uncollectable(True, str(exc.msg))
                continue
            except BaseException as exc:  # SystemExit too: pytest makes it a collection error
                failed[node.nodeid] = Uncollectable(False, _describe(exc))
                continue
            stack[0:0] = children
    return found


def _uncollectable(report: pytest.CollectReport, root: Path) -> Uncollectable:
    """Why a directory failed to collect, from pytest's report of it (no traceback).

    The file that raised (its conftest.py) is named: the target names another.
    """
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple):
        return Uncollectable(True, str(longrepr[2]).removeprefix("Skipped: "))
    crash = getattr(longrepr, "reprcrash", None)
    text = str(getattr(crash, "message", None) or longrepr).strip().splitlines()
    reason = text[-1] if text else "error"
    where = Path(str(getattr(crash, "path", "")))
    if where.is_absolute() and where.is_relative_to(root):
        reason = f"{where.relative_to(root).as_posix()}: {reason}"
    return Uncollectable(False, reason)


def _describe(exc: BaseException) -> str:
    """An exception in one line, as a collection error names it (no traceback)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def collect_plan(config: pytest.Config, items: list[pytest.Item],
                 collected: list[pytest.Item], *, whole: bool = False) -> Plan:
    """The plan for this session; pulled-back prerequisites are put into ``items``.

    Each collection step (the edges file, the declarations, the warnings,
    ``--lf``, resources, ``--dag-shard``) returns what it found; the plan is
    made of those here, once.  ``whole``: the session collected every test
    and no plugin deselected any (see :attr:`Plan.whole`).
    """
    settings = settings_of(config)
    edges_note, census, readers = _read_markers(config, settings, items, collected)
    plan = _draft(config, settings, items, collected, readers, census)
    problems = [*plan.problems, *_warned(config, readers, strict=settings.strict)]
    failed = migration.ordering_failed(config)
    if failed is not None and items:
        problems.append(Problem(items[0].nodeid, failed))
    if plan.pulled_back:
        undo_deselected(config, plan.pulled_back)
    lf_blocked = _lf_blocked(config, plan)
    problems += _marked_skips(plan, strict=settings.strict)
    if plan.graph is not None and not problems:
        items[:] = plan.items
    marker_names = frozenset(census.names)
    needs: dict[int, Needs] = {}
    if RESOURCE in census.names or EXCLUSIVE in census.names:
        needs, wrong = _needs(items)
        problems += wrong
    graph, kept, deselected, pulled_back = (
        plan.graph, plan.items, plan.deselected, plan.pulled_back)
    shard: ShardNote | None = None
    shard_left = 0
    # A suite that declares nothing, unsharded, needs no shards (see plugin.py).
    part = (sharding.apply(config, plan.graph, items, deselected=plan.deselected,
                           pulled_back=plan.pulled_back, universe=plan.universe,
                           links=plan.links, problems=bool(problems),
                           marker_names=marker_names)
            if settings.cuts_or_records else None)
    if part is not None:
        graph, kept, deselected, pulled_back = (
            part.graph, part.items, part.deselected, part.pulled_back)
        shard, shard_left = part.note, part.left
    # A test left out for a broken declaration is reported as an error, not deselected.
    left_out = plan.broken if plan.errors else set()
    return Plan(
        items=kept, graph=graph, deselected=deselected, pulled_back=pulled_back,
        problems=problems, declared=plan.declared, skips=plan.skips, needs=needs,
        marker_names=marker_names, lf_blocked=lf_blocked, edges_file=edges_note,
        shard=shard, whole=whole, dropped=dropped(collected, items, pulled_back, left_out),
        shard_left=shard_left, universe=plan.universe, links=plan.links,
        broken=plan.broken, foreign=plan.foreign, errors=plan.errors)


def _read_markers(config: pytest.Config, settings: Settings, items: list[pytest.Item],
                  collected: Sequence[pytest.Item],
                  ) -> tuple[EdgesFileNote | None, MarkerCensus, tuple[ForeignReader, ...]]:
    """The edges file applied (its entries become markers), the census of every
    test's markers, pytest-order's ordinals applied to ``items`` (hints: edges
    win), and the readers of the foreign plugins' markers this session needs."""
    edges_note: EdgesFileNote | None = None
    if settings.edges_path is not None:
        edges_note = EdgesFileNote(*edges_file.apply(settings.edges_path, collected))
    # One walk over every test's markers; what no test carries is not read.
    census = MarkerCensus([*collected, *items])
    order_sorted = migration.sorted_by_pytest_order(config, items)
    if migration.ORDER_MARK in census.names and not order_sorted:
        items[:] = migration.apply_ordinals(items)
    readers = migration.readers(config, settings, census.names, order_sorted=order_sorted)
    return edges_note, census, readers


def _draft(config: pytest.Config, settings: Settings, items: list[pytest.Item],
           collected: list[pytest.Item], readers: Sequence[ForeignReader],
           census: MarkerCensus) -> DraftPlan:
    """:func:`make_plan` for this session; under ``--continue-on-collection-errors``,
    without the tests its problems are about (see :func:`salvaged`)."""

    def plan_without(broken: Collection[str] = ()) -> DraftPlan:
        return make_plan(
            items,
            collected,
            # --lf and --sw re-run where the last run failed: a failed dependent
            # needs its prerequisites again, whether they failed or passed.
            # pytest-testmon's selection likewise: a dependent it selects and
            # this run skipped would be recorded as tested, its changes then
            # never selected again.
            with_prerequisites=(settings.with_prerequisites or resuming(config)
                                or testmon_selects(config)),
            narrowed=(any("::" in str(a) for a in config.args)
                      or bool(config.getoption("lf", False))),
            readers=readers,
            census=census,
            broken=broken,
        )

    plan = plan_without()
    if plan.problems and config.getoption("continue_on_collection_errors", False):
        plan = salvaged(plan, plan_without)
    return plan


def _warned(config: pytest.Config, readers: tuple[ForeignReader, ...], *,
            strict: bool) -> list[Problem]:
    """Show the warnings of the foreign readers (pytest-dependency's and the
    like's); the problems they make: every one under ini ``dag_strict``,
    else those the warning filters make errors."""
    problems: list[Problem] = []
    # Every xdist worker collects the same tests: the first one shows the
    # warnings, the others only learn whether the filters make them errors
    # (then each worker's plan must carry the problem alike).
    shown = getattr(config, "workerinput", {}).get("workerid", FIRST_WORKER) == FIRST_WORKER
    for text, path, line, nodeid in migration.reader_warnings(readers):
        if strict:
            problems.append(Problem(nodeid, options_wording.strict_problem(text)))
            continue
        try:
            if shown:
                warnings.warn_explicit(text, pytest.PytestWarning, path, line)
            else:
                with warnings.catch_warnings(record=True):
                    warnings.warn_explicit(text, pytest.PytestWarning, path, line)
        except Warning as exc:
            # The warning filters made it an error (-W error, filterwarnings =
            # error): a collection error naming the test, as pytest reports
            # its own collection warnings then, not an internal error.
            problems.append(Problem(nodeid, f"{exc} (a warning, made an error by "
                                            "the warning filters)"))
    return problems


def _marked_skips(plan: DraftPlan, *, strict: bool) -> list[Problem]:
    """Mark each test of ``plan.skips`` skipped with its reason; the problems
    instead, under ini ``dag_strict``, of those a foreign reader skips."""
    problems: list[Problem] = []
    for item, reason in plan.skips:
        if strict and id(item) in plan.foreign:
            problems.append(Problem(item.nodeid, options_wording.strict_problem(reason)))
            continue
        item.add_marker(pytest.mark.skip(reason=reason))
    return problems


def _lf_blocked(config: pytest.Config, plan: DraftPlan) -> int:
    """How many tests of the plan ``--lf`` runs again because a prerequisite
    blocked them last time (0 without ``--lf`` or a graph)."""
    if plan.graph is None or not config.getoption("lf", False):
        return 0
    blocked = blocked_last_time(config)
    return sum(it.nodeid in blocked for it in plan.items) if blocked else 0


def _needs(items: Sequence[pytest.Item]) -> tuple[dict[int, Needs], list[Problem]]:
    """The resources and exclusivity of the tests of ``items`` that have any,
    by ``id(item)``; and the problems of the markers that say them."""
    found, wrong = read_needs(items)
    return {id(it): n for it, n in zip(items, found, strict=True)
            if n.resources or n.exclusive}, wrong


def salvaged(plan: DraftPlan, replan: Callable[[set[str]], DraftPlan]) -> DraftPlan:
    """The plan without the tests its problems are about (``--continue-on-collection-errors``).

    pytest runs what it could collect; likewise the tests whose declarations
    are broken are left out, with their problems reported as collection
    errors (:attr:`Plan.errors`), and everything else runs.  Leaving a test
    out may leave a problem of its own (a cycle through it), so this
    repeats until a plan has none.  A problem about no test in particular
    leaves ``plan`` as it is: nothing runs.
    """
    errors: list[Problem] = []
    broken: set[str] = set()
    while plan.problems:
        if "" in plan.broken or not plan.broken - broken:
            return plan  # a problem about no test, or one that leaving tests out does not end
        errors += plan.problems
        broken |= plan.broken
        plan = replan(broken)
    return replace(plan, errors=errors, broken=broken)


def dropped(collected: Sequence[pytest.Item], items: Sequence[pytest.Item],
            pulled_back: Sequence[pytest.Item], broken: Collection[str]) -> int:
    """How many of ``collected`` are not in the final ``items``.

    A prerequisite pulled back from a file outside the selection was never
    collected, so a plain difference of lengths would miscount it.
    """
    if len(collected) == len(items) and not pulled_back:
        return 0
    kept = {id(it) for it in items}
    return sum(id(it) not in kept and it.nodeid not in broken for it in collected)


class Planner:
    """Makes the plan once collection is final (base of the serial runner and the worker).

    The wrapper is the outermost one: it sees the items before any plugin
    deselects (``-k``, ``-m``, ``--lf``) and plans after all of them did.
    """

    plan: Plan | None = None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> Generator[None, object, object]:
        collected = list(items)
        result = yield
        with collector_paused():
            whole = len(items) == len(collected) and session.testsfailed == 0
            self.plan = collect_plan(config, items, collected, whole=whole and not (
                any("::" in str(a) for a in config.args) or resuming(config)))
            self.planned(config, self.plan, items)
            fill_locations(items)
        return result

    def planned(self, config: pytest.Config, plan: Plan, items: list[pytest.Item]) -> None:
        """What the subclass does with the plan (nothing here)."""
