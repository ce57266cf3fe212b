"""Every decision about a run, from the facts of its collection: one pure function.

:func:`decide` turns :class:`~.facts.Facts` (what a collection found), the
checked settings and the recorded durations into what the driver acts on:
the problems that end the session (or the usage error), the graph the core
runs with its groups, limits and priorities, whether the run needs the DAG
machinery at all (:func:`plain_run`), what the selection means for a
durations file and an empty ``--dag-shard`` part, and the header lines.
No worker, no xdist call, no pytest item: the serial driver and the xdist
controller call it alike, and the xdist workers decide nothing (they
gather facts, and install their barrier when the controller says so).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..core import wording
from ..core.errors import DependencyError
from ..declaring.declarations import Problem
from ..declaring.resources import resources_in_use, unused_limits
from ..options import wording as options_wording
from ..options.settings import AffinityMode, Settings
from ..options.wording import edges_file_line, xdist_header
from ..planning.facts import Census, Facts
from ..shims.late_loading import Later

if TYPE_CHECKING:
    import pytest_dagorder.declaring.foreign_wording as foreign_wording

    from ..core import affinity, bounds, module_runs, published
    from ..core import graph as core_graph
    from ..core.graph import Graph
    from ..core.published import Relay
    from ..declaring import evidence
    from ..live_run import dag_run
    from ..live_run.dag_run import DagRun
else:
    # Only for a run that schedules through the core (see shims/late_loading.py).
    affinity = Later("pytest_dagorder.core.affinity")
    bounds = Later("pytest_dagorder.core.bounds")
    module_runs = Later("pytest_dagorder.core.module_runs")
    published = Later("pytest_dagorder.core.published")
    core_graph = Later("pytest_dagorder.core.graph")
    dag_run = Later("pytest_dagorder.live_run.dag_run")
    evidence = Later("pytest_dagorder.declaring.evidence")
    foreign_wording = Later("pytest_dagorder.declaring.foreign_wording")

#: Which driver the run is for: one process (``serial``) or xdist's workers.
Driver = Literal["serial", "xdist"]


@dataclass
class Decisions:
    """What :func:`decide` makes: the run and everything said or done about it."""

    #: The run the core drives (None: nothing to schedule, or problems).
    run: DagRun | None
    #: Lines announcing the run.
    header: list[str]
    #: The run needs nothing of the DAG scheduler but its order by durations:
    #: no barrier on the workers, nothing withheld (see :func:`plain_run`).
    plain: bool = False
    #: Problems that end the session (collection errors, exit status 2) and
    #: the usage error that does (exit status 4; "" none).
    problems: list[Problem] = field(default_factory=list)
    usage_error: str = ""
    #: ``--continue-on-collection-errors``: problems reported while the rest runs.
    errors: list[Problem] = field(default_factory=list)
    #: The run saw its whole suite: a durations file may forget the tests it did not see.
    whole: bool = False
    #: ``--dag-shard`` left this part empty although the selection has tests.
    empty_part: bool = False
    #: Published values, when some test requests the ``dag`` fixture; per
    #: test, whether it does (empty: none does).
    relay: Relay | None = None
    dag_users: Sequence[bool] = ()
    #: Mean recorded duration of the run's tests (None: none recorded).
    mean_duration: float | None = None
    #: What the controller's log should say about the build.
    notes: list[str] = field(default_factory=list)


def plain_run(census: Census, settings: Settings, dist: str) -> bool:
    """Whether a run needs nothing of the DAG scheduler but its order by durations.

    No graph (no edge; no ``--dag-shard`` or durations file asking for one),
    no problem to report, no resource or exclusive test, no ``xdist_group``,
    no test using the ``dag`` fixture or pytest-dependency's runtime
    ``depends()``, and no file kept whole (``--dist loadfile`` /
    ``loadscope``, documents): every test is ready from the start, so the
    controller never withholds one and the workers need no barrier.
    ``--dag-on-failure=stop`` must be able to withhold tests: never plain.
    """
    c = census
    if (settings.on_failure == "stop" or c.graph or c.problems or c.needs or c.grouped
            or c.dag_users or c.runtime_depends):
        return False
    if dist == "loadfile":
        return c.widest_file < 2
    if dist == "loadscope":
        return c.widest_scope < 2
    return settings.affinity == "none" or c.widest_document < 2


def declares_something(census: Census) -> bool:
    """Whether a suite declares anything this plugin acts on: an edge (its own
    markers or a foreign plugin's), a resource or exclusive test, a ``dag``
    user, a runtime ``depends()``, or a problem with one of them.

    A run that did not ask for the plugin (see ``settings.asks_for_plugin``)
    and declares nothing is xdist's, in every ``--dist`` mode: an
    ``xdist_group``, a file ``--dist loadfile`` keeps whole or a document is
    xdist's own business, not a declaration.
    """
    c = census
    return bool(c.graph or c.problems or c.needs or c.dag_users or c.runtime_depends)


def decide(facts: Facts, settings: Settings, recorded: Mapping[str, float], *,
           driver: Driver = "xdist", dist: str = "load", workers: int = 0,
           names: Callable[[], Sequence[str]] | None = None) -> Decisions:
    """Every decision about the run ``facts`` describe; ``recorded``: seconds per node id.

    ``dist`` is xdist's ``--dist`` mode (it decides which files are kept
    whole); ``workers``, how many there will be (0: unknown), for what the
    groups cost by the recorded durations.  ``names``: serially, the plan's
    short names of the run's tests (made once per process, see
    ``Plan.short_names``).
    """
    whole = facts.complete and not facts.errors and not facts.shard_left
    decided = Decisions(
        # Serially nothing is sent to workers: plain or not is the controller's question.
        None, [], plain=driver == "xdist" and plain_run(facts.census(), settings, dist),
        problems=[Problem(nid, msg) for nid, msg in facts.problems],
        usage_error=facts.ordering_failure,
        errors=[Problem(nid, msg) for nid, msg in facts.errors],
        whole=whole, empty_part=facts.shard_left > 0 and not facts.ids)
    unused = unused_limits(settings.limits, facts.resources)
    if driver == "serial":
        _serial(decided, facts, settings, names)
        if unused:
            # Limits do nothing serially (one test at a time), but a name no
            # test uses is the same typo here as under -n: the same warning.
            decided.header.append(options_wording.unused_limits_warning(unused))
        return decided
    if decided.problems or decided.usage_error:
        return decided
    _xdist(decided, facts, settings, recorded, dist, workers, unused)
    return decided


def _serial(decided: Decisions, facts: Facts, settings: Settings,
            names: Callable[[], Sequence[str]] | None) -> None:
    """The run of one process: the plan's order is the schedule, the core only settles."""
    # Only the core can withhold what follows a failure: a suite that
    # declares nothing gets a run with no edges when --dag-on-failure=stop.
    if decided.problems or not (facts.graph or settings.on_failure == "stop"):
        if not decided.problems and facts.edges_file is not None:
            # An edges file that added nothing (or is not there) still says so.
            decided.header.append(edges_file_line(*facts.edges_file))
        return
    n = len(facts.ids)
    n_all = n + len(facts.outside)
    edges = (core_graph.Edges(facts.requires, facts.afters()) if facts.graph
             else core_graph.Edges.none(n_all))
    # This process's collection checked these edges (``planning.make_plan``):
    # the graph is built without checking them again.
    graph = core_graph.Graph.of_checked(edges)
    run = decided.run = dag_run.DagRun(graph, [*facts.ids, *facts.outside], n_run=n,
                               on_failure=settings.on_failure, history=settings.explain,
                               names=names)
    run.whole = decided.whole
    header = decided.header
    header.append(wording.serial_header(n, graph.edge_count, graph.longest_chain()))
    header += note_lines(facts)
    if facts.pulled_back:
        # pytest's "collected N items" counted before they were pulled back.
        header.append(options_wording.pulled_back_line(facts.pulled_back, n))
    if settings.explain:
        header.append(options_wording.EXPLAIN_SERIAL)


def _graph(facts: Facts, chained: Mapping[int, Sequence[int]],
           known: Mapping[int, float]) -> Graph:
    """The graph the core runs: the declared edges and ``chained`` ones (after-edges)."""
    n = len(facts.ids) + len(facts.outside)
    requires: Sequence[Sequence[int]] = facts.requires if facts.graph else [()] * n
    return core_graph.Graph.of_positions(requires, after=chained, durations=known)


def _xdist(decided: Decisions, facts: Facts, settings: Settings, recorded: Mapping[str, float],
           dist: str, workers: int, unused: list[str]) -> None:
    n = len(facts.ids)
    nodeids = [*facts.ids, *facts.outside]
    notes = decided.notes
    # Graph ids are positions: node ids may repeat (--keep-duplicates).
    known: dict[int, float] = {
        k: recorded[nid] for k, nid in enumerate(nodeids) if nid in recorded}
    # Priorities: the longest remaining path in recorded seconds, declared
    # dependencies or not (tests with no record count as the mean of those
    # with one).
    mode = settings.affinity
    after: dict[int, list[int]] = {k: list(a) for k, a in enumerate(facts.after) if a}
    explicit: list[str | None] = list(facts.xdist_groups) or [None] * n
    chains = ({} if mode == "none" else
              affinity.serial_modules(facts.module_scopes, facts.runtime_depends))
    whole = affinity.kept_whole(dist, mode, facts.ids, facts.module_scopes, facts.class_scopes,
                       facts.documents)
    chained = {k: list(a) for k, a in after.items()}
    for label, members in itertools.chain(
            ((f"runtime depends() in {m}", ks) for m, ks in chains.items()),
            whole.items()):
        # A runtime depends() checks results in its own process, a
        # document's items share its namespace: the file runs as one group
        # (a label joins it), in collection order (edges).
        for prev, nxt in itertools.pairwise(members):
            chained.setdefault(nxt, []).append(prev)
        for k in members:
            explicit[k] = explicit[k] or label
    try:
        graph = _graph(facts, chained, known)
    except DependencyError:
        # The worker's order contradicts a declared edge (a hook reordered
        # the tests after the plan): the declared order wins.
        notes.append("runtime depends() modules not chained: their order contradicts an edge")
        graph = _graph(facts, after, known)
    state, joined = (state_labels(facts)
                     if mode == "state" and facts.graph else ([None] * n, []))
    scopes = {"state": state, "module": facts.module_scopes,
              "class": facts.class_scopes}.get(mode, [None] * n)
    groups = affinity.affinity_groups(scopes, graph.requires[:n], graph.after[:n], explicit,
                                      joined)
    groups += [None] * (len(graph) - n)
    # affinity none: tests share no process state, so a released test
    # need not prefer the worker that released it; priority alone decides.
    # Deselected prerequisites (past the run) never start: they use nothing.
    resources = ([*facts.resources, *[()] * (len(graph) - n)] if facts.resources else None)
    alone = ([*facts.exclusive, *[False] * (len(graph) - n)]
             if any(facts.exclusive) else None)
    # Module runs: deselected prerequisites (past the run) never start.
    keeps = facts.module_fixtures
    modules = [*facts.module_scopes, *[None] * (len(graph) - n)] if any(keeps) else None
    run = dag_run.DagRun(graph, nodeids, n_run=n, on_failure=settings.on_failure,
                 groups=groups, locality=mode != "none",
                 resources=resources, limits=settings.limits, exclusive=alone,
                 checks=dict(facts.fail_checks), modules=modules,
                 module_fixtures=[*keeps, *[False] * (len(graph) - n)] if modules else None,
                 history=settings.explain, fences=fences(facts.ordinals))
    decided.run = run
    run.whole = decided.whole
    run.group_names = [_group_label(facts, explicit, members) for members in run.machine.groups]
    if known:
        decided.mean_duration = sum(known.values()) / len(known)
    if any(facts.dag_users):
        outcome = run.machine.outcome
        decided.dag_users = facts.dag_users
        decided.relay = published.Relay(graph.requires, lambda i: outcome[i] == "passed")
    header = decided.header
    header.append(xdist_header(
        n, graph.edge_count, graph.longest_chain(), mode,
        len(run.machine.groups), len(known), len(nodeids)))
    header += note_lines(facts)
    runs = run.machine.runs
    if runs is not None and graph.edge_count:
        split = module_runs.forced_returns(graph, runs.module, runs.keeps)
        if split:
            names = {number: name for name, number in zip(modules or (), runs.module,
                                                              strict=False)}
            header.append(wording.module_returns_header([str(names[m]) for m in split]))
    if chains:
        header.append(foreign_wording.runtime_depends_header(len(chains)))
    if whole:
        header.append(wording.kept_whole_header(dist, len(whole), [
            label.removeprefix(f"{affinity.DOCUMENT} ") for label in whole
            if label.startswith(affinity.DOCUMENT)]))
    used = resources_in_use(facts.resources)
    if used:
        header.append(wording.limits_header(settings.limits, used))
    if unused:
        header.append(options_wording.unused_limits_warning(unused))
    if alone is not None:
        header.append(options_wording.exclusive_header(sum(alone)))
    if run.machine.groups and mode != "none":
        held = held_by_fixtures(facts, run.machine.groups, settings.stateless_fixtures)
        # The end-of-run summary gives the same advice as the header.
        run.held_by = tuple(held)
        header.append(_groups_line(run, known, workers, mode, held))
    if settings.explain:
        header += explain_lines(run, facts, mode, groups, explicit, state,
                                settings.stateless_fixtures)


def fences(ordinals: Sequence[int | None]) -> list[int]:
    """The positions before which hand-out keeps serial order, from pytest-order's
    ordinals (per test, in the plan's order).

    pytest-order sorts a test with a negative ordinal (``order(-1)``,
    ``"last"``) towards the end and one with an ordinal from 0 up
    (``"first"``) towards the start; xdist's own queue then hands them out
    in that order.  A test sorted to the end is handed out only after every
    test before it (a fence at its position), a test sorted to the start
    before every test after it (a fence past it).
    """
    out: list[int] = []
    for k, value in enumerate(ordinals):
        if value is not None:
            out.append(k if value < 0 else k + 1)
    return out


def note_lines(facts: Facts) -> list[str]:
    """The header's lines about the collection steps (``--lf``, the edges file,
    ``--dag-shard``), in the order they ran."""
    lines: list[str] = []
    if facts.lf_blocked:
        lines.append(options_wording.lf_blocked_line(facts.lf_blocked))
    if facts.edges_file is not None and not _verdicts_only(facts):
        lines.append(edges_file_line(*facts.edges_file))
    if facts.evidence is not None:
        lines.append(evidence.header_line(facts.evidence))
    if facts.shard is not None:
        k, n, tests, of, seconds, big, cut, rerun = facts.shard
        lines.append(options_wording.shard_failures_rerun(k, n) if rerun else wording.shard_header(
            k, n, tests, of, seconds, None if big is None else wording.Oversized(*big),
            selected_elsewhere=cut))
    return lines


def _verdicts_only(facts: Facts) -> bool:
    """The edges file added no edge or resource and named no missing test, but
    holds verdicts: the evidence line says all there is to say of it."""
    if facts.evidence is None or facts.edges_file is None:
        return False
    _, found, edges, resources, stale = facts.edges_file
    return found and not (edges or resources or stale)


def state_labels(facts: Facts) -> tuple[list[str | None], list[int | None]]:
    """Per test, its group under ``--dag-affinity=state`` as the reasons it was
    formed, or None (the rule: ``core/affinity.state_groups``): every
    declared edge joins its tests, but those of a test marked
    ``dag_shares_nothing`` and those evidence lifted (``facts.lifted``); a
    group keeps the stretch of a module whose fixtures it holds.  With, per
    test, its group's first test (see ``core/affinity.state_partition``)."""
    n = len(facts.ids)
    quiet = facts.shares_nothing if any(facts.shares_nothing) else ()
    return affinity.state_partition(facts.module_scopes, facts.requires[:n], facts.afters()[:n],
                                 quiet, lifted=facts.lifted, keeps=facts.module_fixtures)


def _groups_line(run: DagRun, known: Mapping[int, float], workers: int, mode: AffinityMode,
                 fixtures: Sequence[str]) -> str:
    """What the affinity groups hold and, from recorded durations, cost; how to
    learn which are needed, and, unless a fixture holds some together, how to lift them."""
    groups = run.machine.groups
    held = sum(len(members) for members in groups)
    cost: tuple[float, float, float] | None = None
    if known and workers > 1:
        mean = sum(known.values()) / len(known)
        n = run.n_run
        took = {i: known.get(i, mean) for i in range(n)}
        g = run.graph
        edges = [(p, i) for i in range(n) for p in (*g.requires[i], *g.after[i]) if p < n]
        label = {i: k for k, members in enumerate(groups) for i in members}
        b = bounds.bounds(took, edges, label, workers)
        cost = (b.cost, b.grouped_bound, b.bound)
    return options_wording.groups_header(len(groups), held, run.n_run, cost, mode, fixtures)


def held_by_fixtures(facts: Facts, groups: Sequence[Sequence[int]],
                     stateless: frozenset[str] = frozenset()) -> list[str]:
    """The fixture instances that two tests of one group share (sorted): a
    group they hold together is not one ``--dag-affinity=none`` could lift.

    Explanation only: no group rests on it.  Two tests of one module that
    both use a module- or package-scoped fixture share it (pytest resolved
    their closures); a fixture of ``dag_stateless_fixtures`` does not count.
    """
    found: set[str] = set()
    fixtures, keeps, modules = facts.fixtures, facts.module_fixtures, facts.module_scopes
    for members in groups:
        seen: set[str] = set()
        by_module: set[str] = set()
        for k in members:
            if k >= len(facts.ids):
                continue
            if keeps and keeps[k] and modules[k] is not None:
                if modules[k] in by_module:
                    found.add(f"a module fixture of {modules[k]}")
                by_module.add(str(modules[k]))
            own = fixtures[k] if fixtures and k < len(fixtures) else None
            if not own:
                continue
            keys = affinity.shared_keys([f for f in own if f[0] not in stateless],
                                        class_id=facts.class_scopes[k], narrow=True)
            found |= keys & seen
            seen |= keys
    return sorted(found)


def explain_lines(run: DagRun, facts: Facts, mode: AffinityMode,
                  labels: Sequence[str | None], explicit: Sequence[str | None],
                  state: Sequence[str | None],
                  stateless: frozenset[str] = frozenset()) -> list[str]:
    """``--dag-explain``: every group with why it was formed, every edge left free."""
    n = run.n_run
    g = run.graph
    ids = run.nodeids
    lines: list[str] = []
    for members in run.machine.groups:
        why: list[str] = []
        for k in members:
            for reason in _reasons(facts, mode, k, explicit[k], state[k]):
                if reason not in why:
                    why.append(reason)
        # What the tests are seen to share: said, never decided on.
        why += [f"its tests share {key}"
                for key in held_by_fixtures(facts, [members], stateless)]
        lines.append(wording.explain_group(ids[members[0]], [ids[k] for k in members], why))
    free = [(ids[p], ids[i]) for i in range(n) for p in (*g.requires[i], *g.after[i])
            if p < n and (labels[i] is None or labels[i] != labels[p])]
    lines.append(options_wording.explain_free(free, mode))
    if facts.evidence is not None:
        lines += evidence.explained(facts.evidence, facts.lifted, ids)
    return lines


def _worded(facts: Facts, k: int, label: str) -> str:
    groups = facts.xdist_groups
    return f"xdist_group {label!r}" if groups and label == groups[k] else label


def _group_label(facts: Facts, explicit: Sequence[str | None],
                 members: Sequence[int]) -> str | None:
    """The first label among a group's tests, worded as :func:`_reasons` words it."""
    for k in members:
        label = explicit[k]
        if label is not None:
            return _worded(facts, k, label)
    return None


def _reasons(facts: Facts, mode: AffinityMode, k: int, label: str | None,
             state: str | None) -> list[str]:
    """Why test ``k`` is in its group: its explicit ``label`` (an ``xdist_group``,
    a document, ...) and its scope under ``mode`` (``state``: its group's reasons)."""
    out: list[str] = []
    if label is not None:
        out.append(_worded(facts, k, label))
    if mode == "state" and state is not None:
        out += state.split("; ")
    elif mode in ("module", "class"):
        scope = (facts.module_scopes if mode == "module" else facts.class_scopes)[k]
        if scope is not None:
            out.append(f"edges inside {scope}")
    return out
