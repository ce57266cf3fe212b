"""Turn a collected (and possibly filtered) session into a validated run plan.

Shared by the serial runner and the xdist worker (both are a
:class:`Planner`), so both see exactly the same graph: the tests that will
run (``items``, in a stable topological order), the graph over them plus the
prerequisites that were deselected, and every declaration problem.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field

import pytest

from . import migration
from .declarations import ForeignReader, Problem, resolve_items
from .errors import CycleError, DependencyError, SelfDependencyError
from .graph import Graph, prerequisites_of
from .internals import collect_quietly, module_outside_session, undo_deselected
from .settings import settings_of


@dataclass
class Plan:
    """``graph`` indices ``0 .. len(items) - 1`` are ``items``; later ones were deselected."""

    items: list[pytest.Item]
    graph: Graph | None
    deselected: list[pytest.Item] = field(default_factory=list)
    pulled_back: list[pytest.Item] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    declared: bool = False
    #: Tests a foreign plugin would skip at run time, with its reason.
    skips: list[tuple[pytest.Item, str]] = field(default_factory=list)

    @property
    def nodeids(self) -> list[str]:
        return [it.nodeid for it in (*self.items, *self.deselected)]


def make_plan(
    selected: Sequence[pytest.Item],
    collected: Sequence[pytest.Item],
    *,
    with_prerequisites: bool,
    narrowed: bool,
    readers: Sequence[ForeignReader] = (),
) -> Plan:
    """Resolve declarations of ``selected`` against everything ``collected``.

    ``collected`` holds the items seen before any plugin deselected some
    (``-k``, ``-m``, ``--lf``).  ``narrowed`` says the command line picked
    node ids inside modules, so siblings of the selected tests were never
    collected; they are collected here (without running any hook that
    reports them) only when a target cannot be found otherwise.  Likewise a
    target naming a file that was not collected at all (another file's node
    id) has that file collected, so it can be reported as deselected or
    pulled back instead of "unknown".
    """
    chosen = {id(it) for it in selected}
    universe = [*selected, *(it for it in collected if id(it) not in chosen)]
    res = resolve_items(universe, readers)
    if res.unknown:
        extra = _collect_siblings(universe) if narrowed else []
        extra += _collect_files(universe, res.unknown, {it.nodeid for it in extra})
        if extra:
            universe.extend(extra)
            res = resolve_items(universe, readers)
    skips = [(universe[i], reason) for i, reason in res.skips.items() if i < len(selected)]
    if not res.declared:
        return Plan(list(selected), None, skips=skips)
    n_sel = len(selected)
    run = list(range(n_sel))
    if with_prerequisites:
        run = sorted(set(run) | prerequisites_of(run, res.requires, res.after))
    in_run = set(run)
    # Nodes of the graph: the run, then deselected direct prerequisites of it.
    outside = sorted({p for i in run for p in (*res.requires[i], *res.after[i])} - in_run)
    order = run + outside
    pos = {u: k for k, u in enumerate(order)}
    run_ids = {universe[i].nodeid for i in run}
    problems = [p for p in res.problems if p.nodeid in run_ids]
    plan = Plan(
        items=[universe[i] for i in run],
        graph=None,
        deselected=[universe[i] for i in outside],
        pulled_back=[universe[i] for i in run if i >= n_sel],
        problems=problems,
        declared=True,
        skips=[(universe[i], res.skips[i]) for i in run if i in res.skips],
    )
    try:
        # Built even when declarations had problems: cycles among the edges
        # that did resolve are reported in the same run.  Graph ids are
        # positions (node ids may repeat, with --keep-duplicates); names
        # come from plan.nodeids.
        graph = Graph.build(
            ((k, [pos[p] for p in res.requires[u]] if u in in_run else ())
             for k, u in enumerate(order)),
            after={pos[u]: [pos[p] for p in res.after[u]] for u in run if res.after[u]},
        )
    except DependencyError as exc:
        ids = [universe[u].nodeid for u in order]
        plan.problems += [_problem_of(err, ids) for err in exc.errors]
        return plan
    if problems:
        return plan
    # Stable topological order of the run: collection order unless forced later.
    n_run = len(run)
    topo = [k for k in graph.topo if k < n_run]
    plan.items = [plan.items[k] for k in topo]
    # Renumber so that index == position in items.
    plan.graph = graph.permuted([*topo, *range(n_run, len(graph))])
    return plan


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


def _collect_siblings(known: Sequence[pytest.Item]) -> list[pytest.Item]:
    """Items of the modules of ``known`` that were not collected (node-id selection)."""
    modules: dict[str, pytest.Module] = {}
    for it in known:
        mod = it.getparent(pytest.Module)
        if mod is not None:
            modules.setdefault(mod.nodeid, mod)
    return _items_below(list(modules.values()), {it.nodeid for it in known})


def _collect_files(
    known: Sequence[pytest.Item], targets: Sequence[str], also: set[str]
) -> list[pytest.Item]:
    """Items of the test files that ``targets`` name but that were never collected."""
    if not known:
        return []
    session = known[0].session
    have = {it.nodeid for it in known} | also
    modules = {
        mod.nodeid for it in known if (mod := it.getparent(pytest.Module)) is not None
    }
    root = session.config.rootpath
    new: list[pytest.Collector] = []
    for target in targets:
        rel = target.split("::", 1)[0]
        if not rel.endswith(".py") or rel in modules:
            continue
        path = root / rel
        if not path.is_file():
            continue
        modules.add(rel)
        new.append(module_outside_session(session, path))
    return _items_below(new, have)


def _items_below(roots: Sequence[pytest.Collector], have: set[str]) -> list[pytest.Item]:
    """Every item below ``roots`` whose node id is not in ``have`` (which grows)."""
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
            except Exception:  # its targets then stay unknown and are reported as such
                continue
            stack[0:0] = children
    return found


def collect_plan(config: pytest.Config, items: list[pytest.Item],
                 collected: list[pytest.Item]) -> Plan:
    """The plan for this session; pulled-back prerequisites are put into ``items``."""
    settings = settings_of(config)
    items[:] = migration.apply_ordinals(items)  # pytest-order ordinals: hints, edges win
    plan = make_plan(
        items,
        collected,
        with_prerequisites=settings.with_prerequisites,
        narrowed=any("::" in str(a) for a in config.args) or bool(config.getoption("lf", False)),
        readers=migration.readers(settings),
    )
    if plan.pulled_back:
        undo_deselected(config, plan.pulled_back)
    for item, reason in plan.skips:
        item.add_marker(pytest.mark.skip(reason=reason))
    if plan.graph is not None and not plan.problems:
        items[:] = plan.items
    return plan


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
        self.plan = collect_plan(config, items, collected)
        self.planned(config, self.plan, items)
        return result

    def planned(self, config: pytest.Config, plan: Plan, items: list[pytest.Item]) -> None:
        """What the subclass does with the plan (nothing here)."""
