"""Every decision about a run, from the facts of its collection: pure functions.

:func:`decide_serial` and :func:`decide_xdist` turn :class:`~.facts.Facts`
(what a collection found), the checked settings and (under xdist) the
recorded durations into frozen :class:`Decisions` the driver acts on: the
problems that end the session (or the usage error), the run the core
drives with its groups, limits and priorities, whether the run needs the
DAG machinery at all (:func:`plain_run`), what the selection means for a
durations file and an empty ``--dag-shard`` part, and the header lines.
The xdist controller asks here too what a worker's hello means
(:func:`worker_plain`) and whether a ``--dist`` mode not scheduled as a
DAG refuses the suite (:func:`refused`).  No worker, no xdist call, no
pytest item; the xdist workers decide nothing (they gather facts, and
install their barrier when the controller says so).
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

from ..core import wording
from ..core.errors import DependencyError
from ..declaring.declarations import Problem
from ..declaring.resources import resources_in_use, unused_limits
from ..options import wording as options_wording
from ..options.settings import AffinityMode, Settings
from ..options.wording import edges_file_line, xdist_header
from ..planning.facts import DOCUMENT, Census, Facts, inner_edges, kept_whole
from ..shims.late_loading import Later

if TYPE_CHECKING:
    import pytest_dagorder.declaring.foreign_wording as foreign_wording

    from ..core import affinity, bounds, module_runs, published, state_machine
    from ..core import graph as core_graph
    from ..core.graph import Graph
    from ..core.published import Relay
    from ..core.state_machine import Setup
    from ..declaring import evidence
    from ..live_run import dag_run
    from ..live_run.dag_run import DagRun
else:
    # Only for a run that schedules through the core (see shims/late_loading.py).
    affinity = Later("pytest_dagorder.core.affinity")
    bounds = Later("pytest_dagorder.core.bounds")
    module_runs = Later("pytest_dagorder.core.module_runs")
    published = Later("pytest_dagorder.core.published")
    state_machine = Later("pytest_dagorder.core.state_machine")
    core_graph = Later("pytest_dagorder.core.graph")
    dag_run = Later("pytest_dagorder.live_run.dag_run")
    evidence = Later("pytest_dagorder.declaring.evidence")
    foreign_wording = Later("pytest_dagorder.declaring.foreign_wording")

_T = TypeVar("_T")

@dataclass(frozen=True)
class Decisions:
    """What :func:`decide_serial` or :func:`decide_xdist` makes: the run and
    everything said or done about it, fixed once made."""

    #: The run the core drives (None: nothing to schedule, or problems).
    run: DagRun | None
    #: Lines announcing the run.
    header: tuple[str, ...]
    #: The run needs nothing of the DAG scheduler but its order by durations:
    #: no barrier on the workers, nothing withheld (see :func:`plain_run`).
    plain: bool = False
    #: Problems that end the session (collection errors, exit status 2) and
    #: the usage error that does (exit status 4; "" none).
    problems: tuple[Problem, ...] = ()
    usage_error: str = ""
    #: ``--continue-on-collection-errors``: problems reported while the rest runs.
    errors: tuple[Problem, ...] = ()
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
    notes: tuple[str, ...] = ()


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


def worker_plain(census: Census, settings: Settings, dist: str) -> bool:
    """Whether a worker whose hello says ``census`` runs as under plain xdist
    (no barrier): the run needs nothing of the DAG scheduler
    (:func:`plain_run`), or it did not ask for this plugin and its suite
    declares nothing (then xdist's own scheduler runs it)."""
    return plain_run(census, settings, dist) or not (
        settings.asked or declares_something(census))


def refused(facts: Facts) -> str | None:
    """Under a ``--dist`` mode not scheduled as a DAG (``each``), whether the
    run is refused: the test to name (the first with a problem, else the
    first that declares a prerequisite), or None: the suite declares
    nothing, xdist's own scheduler runs it."""
    if facts.problems:
        return facts.problems[0][0]
    return _first_declaring(facts) if facts.graph else None


def _first_declaring(facts: Facts) -> str:
    """The first test (in collection order) that declares a prerequisite: the one to name."""
    afters = facts.afters()
    for i, nid in enumerate(facts.ids):
        if facts.requires[i] or afters[i]:
            return nid
    return facts.ids[0]


def _verdict(facts: Facts, settings: Settings) -> Decisions:
    """What ends the session, and what the selection means, alike for both
    drivers: the decisions before any run is made."""
    return Decisions(None, (), problems=tuple(Problem(nid, msg) for nid, msg in facts.problems),
                     usage_error=facts.ordering_failure or unknown_explained(facts, settings),
                     errors=tuple(Problem(nid, msg) for nid, msg in facts.errors),
                     whole=facts.complete and not facts.errors and not facts.shard_left,
                     empty_part=facts.shard_left > 0 and not facts.ids)


def decide_serial(facts: Facts, settings: Settings,
                  names: Callable[[], Sequence[str]] | None = None) -> Decisions:
    """Every decision about a run of one process: the plan's order is the
    schedule, the core only settles.  ``names``: the plan's short names of
    the run's tests (made once per process, see ``Plan.short_names``).

    Serially nothing is sent to workers: never plain.
    """
    verdict = _verdict(facts, settings)
    header: list[str] = []
    run: DagRun | None = None
    # Only the core can withhold what follows a failure: a suite that
    # declares nothing gets a run with no edges when --dag-on-failure=stop,
    # and when one test's story is asked for (the core records it).
    if verdict.problems or not (facts.graph or settings.on_failure == "stop"
                                or settings.explain_test):
        if not verdict.problems and facts.edges_file is not None:
            # An edges file that added nothing (or is not there) still says so.
            header.append(edges_file_line(*facts.edges_file))
    else:
        n = len(facts.ids)
        edges = (core_graph.Edges(facts.requires, facts.afters()) if facts.graph
                 else core_graph.Edges.none(n + len(facts.outside)))
        # This process's collection checked these edges (``planning.make_plan``):
        # the graph is built without checking them again.
        graph = core_graph.Graph.of_checked(edges)
        run = dag_run.DagRun(graph, [*facts.ids, *facts.outside],
                             state_machine.Setup(on_failure=settings.on_failure,
                                                 history=settings.keeps_moves),
                             n_run=n, names=names, notes=dag_run.Notes(whole=verdict.whole))
        header.append(wording.serial_header(n, graph.edge_count, graph.longest_chain()))
        header += note_lines(facts)
        if facts.pulled_back:
            # pytest's "collected N items" counted before they were pulled back.
            header.append(options_wording.pulled_back_line(facts.pulled_back, n))
        if settings.explain:
            header.append(options_wording.EXPLAIN_SERIAL)
    unused = unused_limits(settings.limits, facts.resources)
    if unused:
        # Limits do nothing serially (one test at a time), but a name no
        # test uses is the same typo here as under -n: the same warning.
        header.append(options_wording.unused_limits_warning(unused))
    return replace(verdict, run=run, header=tuple(header))


def unknown_explained(facts: Facts, settings: Settings) -> str:
    """The usage error of a ``--dag-explain=TEST_ID`` that names no test of the
    run ("" if it names one, or none was asked for)."""
    test = settings.explain_test
    ids = [*facts.ids, *facts.outside]
    if not test or test in ids:
        return ""
    return options_wording.explain_unknown(test, difflib.get_close_matches(test, ids, n=3))


def _graph(facts: Facts, chained: Mapping[int, Sequence[int]],
           known: Mapping[int, float]) -> Graph:
    """The graph the core runs: the declared edges and ``chained`` ones (after-edges)."""
    n = len(facts.ids) + len(facts.outside)
    requires: Sequence[Sequence[int]] = facts.requires if facts.graph else [()] * n
    return core_graph.Graph.of_positions(requires, after=chained, durations=known)


@dataclass(frozen=True)
class _Chains:
    """What keeps tests in collection order on one worker beyond their edges:
    modules with a runtime ``depends()`` (by module) and the files ``--dist``
    keeps whole (by label); per test, its explicit group label (an
    ``xdist_group``, a kept file); and the after-edges that chain them."""

    runtime: Mapping[str, Sequence[int]]
    whole: Mapping[str, Sequence[int]]
    explicit: Sequence[str | None]
    chained: Mapping[int, Sequence[int]]


def _chains(facts: Facts, mode: AffinityMode, dist: str) -> _Chains:
    n = len(facts.ids)
    explicit: list[str | None] = list(facts.xdist_groups) or [None] * n
    runtime = ({} if mode == "none" else
               affinity.serial_modules(facts.module_scopes, facts.runtime_depends))
    whole = kept_whole(dist, mode, facts.ids, facts.module_scopes, facts.class_scopes,
                       facts.documents)
    chained: dict[int, list[int]] = {k: list(a) for k, a in enumerate(facts.after) if a}
    for label, members in itertools.chain(
            ((f"runtime depends() in {m}", ks) for m, ks in runtime.items()),
            whole.items()):
        # A runtime depends() checks results in its own process, a
        # document's items share its namespace: the file runs as one group
        # (a label joins it), in collection order (edges).
        for prev, nxt in itertools.pairwise(members):
            chained.setdefault(nxt, []).append(prev)
        for k in members:
            explicit[k] = explicit[k] or label
    return _Chains(runtime, whole, explicit, chained)


def _padded(values: Sequence[_T], size: int, pad: _T) -> list[_T]:
    """``values`` for every task of the graph: ``pad`` for the deselected
    prerequisites (past the run)."""
    return [*values, *[pad] * (size - len(values))]


def decide_xdist(facts: Facts, settings: Settings, recorded: Mapping[str, float], *,
                 dist: str = "load", workers: int = 0) -> Decisions:
    """Every decision about an xdist run, from the facts a worker shipped;
    ``recorded``: seconds per node id.

    ``dist`` is xdist's ``--dist`` mode (it decides which files are kept
    whole); ``workers``, how many there will be (0: unknown), for what the
    groups cost by the recorded durations.
    """
    verdict = _verdict(facts, settings)
    plain = plain_run(facts.census(), settings, dist)
    if verdict.problems or verdict.usage_error:
        return replace(verdict, plain=plain)
    n = len(facts.ids)
    nodeids = [*facts.ids, *facts.outside]
    notes: list[str] = []
    # Graph ids are positions: node ids may repeat (--keep-duplicates).
    # Priorities: the longest remaining path in recorded seconds, declared
    # dependencies or not (tests with no record count as the mean of those
    # with one).
    known: dict[int, float] = {
        k: recorded[nid] for k, nid in enumerate(nodeids) if nid in recorded}
    mode = settings.affinity
    chains = _chains(facts, mode, dist)
    try:
        graph = _graph(facts, chains.chained, known)
    except DependencyError:
        # The worker's order contradicts a declared edge (a hook reordered
        # the tests after the plan): the declared order wins.
        notes.append("runtime depends() modules not chained: their order contradicts an edge")
        graph = _graph(facts, {k: a for k, a in enumerate(facts.after) if a}, known)
    state, joined = (state_labels(facts)
                     if mode == "state" and facts.graph else ([None] * n, []))
    scopes = {"state": state, "module": facts.module_scopes,
              "class": facts.class_scopes}.get(mode, [None] * n)
    groups = affinity.affinity_groups(scopes, graph.requires[:n], graph.after[:n],
                                      chains.explicit, joined)
    stateless = settings.stateless_fixtures
    setup = _xdist_setup(facts, settings, groups, len(graph))
    labels = [None if label is None else _worded(facts, k, label)
              for k, label in enumerate(chains.explicit)]
    run = dag_run.DagRun(graph, nodeids, setup, n_run=n, checks=dict(facts.fail_checks),
                         notes=dag_run.Notes(
                             whole=verdict.whole, labels=labels,
                             held=None if mode == "none" else
                             lambda members: held_by_fixtures(facts, members, stateless)))
    relay = None
    if any(facts.dag_users):
        outcome = run.machine.outcome
        relay = published.Relay(graph.requires, lambda i: outcome[i] == "passed")
    header = _xdist_header(run, facts, settings, dist, workers, known, chains)
    if settings.explain:
        header += explain_lines(run, facts, mode, groups, chains.explicit, state, stateless)
    return replace(
        verdict, run=run, header=tuple(header), plain=plain, relay=relay,
        dag_users=facts.dag_users if relay is not None else (),
        mean_duration=sum(known.values()) / len(known) if known else None,
        notes=tuple(notes))


def _xdist_setup(facts: Facts, settings: Settings, groups: Sequence[str | None],
                 size: int) -> Setup:
    """What the core needs beyond the graph of ``size`` tasks: the settings,
    and per test its group, resources, exclusivity, module and fences."""
    keeps = facts.module_fixtures
    return state_machine.Setup(
        on_failure=settings.on_failure, history=settings.keeps_moves,
        groups=_padded(groups, size, None),
        # affinity none: tests share no process state, so a released test
        # need not prefer the worker that released it; priority alone decides.
        locality=settings.affinity != "none",
        # Deselected prerequisites (past the run) never start: they use nothing.
        resources=_padded(facts.resources, size, ()) if facts.resources else None,
        limits=settings.limits,
        exclusive=_padded(facts.exclusive, size, False) if any(facts.exclusive) else None,
        modules=_padded(facts.module_scopes, size, None) if any(keeps) else None,
        module_fixtures=_padded(keeps, size, False) if any(keeps) else None,
        fences=fences(facts.ordinals),
        unfenced=[k for k, why in enumerate(facts.fence_verdicts) if why == ""])


def _xdist_header(run: DagRun, facts: Facts, settings: Settings, dist: str, workers: int,
                  known: Mapping[int, float], chains: _Chains) -> list[str]:
    """The lines announcing an xdist run: its shape, then each thing that shapes it."""
    graph, mode, machine = run.graph, settings.affinity, run.machine
    header = [xdist_header(run.n_run, graph.edge_count, graph.longest_chain(), mode,
                           len(machine.groups), len(known), len(run.nodeids))]
    header += note_lines(facts)
    runs = machine.runs
    if runs is not None and graph.edge_count:
        split = module_runs.forced_returns(graph, runs.module, runs.keeps)
        if split:
            modules = _padded(facts.module_scopes, len(graph), None)
            names = {number: name for name, number in zip(modules, runs.module, strict=True)}
            header.append(wording.module_returns_header([str(names[m]) for m in split]))
    if chains.runtime:
        header.append(foreign_wording.runtime_depends_header(len(chains.runtime)))
    if chains.whole:
        header.append(options_wording.kept_whole_header(dist, len(chains.whole), [
            label.removeprefix(f"{DOCUMENT} ") for label in chains.whole
            if label.startswith(DOCUMENT)]))
    used = resources_in_use(facts.resources)
    if used:
        header.append(wording.limits_header(settings.limits, used))
    unused = unused_limits(settings.limits, facts.resources)
    if unused:
        header.append(options_wording.unused_limits_warning(unused))
    if any(facts.exclusive):
        header.append(options_wording.exclusive_header(sum(facts.exclusive)))
    if machine.groups and mode != "none":
        held = held_by_fixtures(facts, machine.groups, settings.stateless_fixtures)
        # The end-of-run summary gives the same advice as the header.
        header.append(_groups_line(run, known, workers, mode, held))
    return header


def fences(ordinals: Sequence[int | None]) -> list[int]:
    """The positions before which hand-out keeps serial order, from pytest-order's
    ordinals (per test, in the plan's order).

    pytest-order sorts a test with a negative ordinal (``order(-1)``,
    ``"last"``) towards the end and one with an ordinal from 0 up
    (``"first"``) towards the start; xdist's own queue then hands them out
    in that order.  A test sorted to the end is handed out only after every
    test before it (a fence at its position), a test sorted to the start
    before every test after it (a fence past it).  Tests of one ordinal
    next to each other share a stretch: pytest-order promises nothing
    between them (as between tests without one, which no fence holds), and
    a fence after each made a suite whose every test has an ordinal
    (pynurbs: one a module) hand out strictly in serial order, a test behind
    a chain waiting for the chain to end.
    """
    out: list[int] = []
    last = len(ordinals) - 1
    for k, value in enumerate(ordinals):
        if value is None:
            continue
        if value < 0:
            if k == 0 or ordinals[k - 1] != value:
                out.append(k)
        elif k == last or ordinals[k + 1] != value:
            out.append(k + 1)
    return out


def fenced(ordinals: Sequence[int | None]) -> list[int]:
    """The tests a fence holds (at or past the first of :func:`fences`)."""
    cut = [f for f in fences(ordinals) if 0 < f < len(ordinals)]
    return list(range(min(cut), len(ordinals))) if cut else []


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
    if facts.fence_evidence is not None:
        held = fenced(facts.ordinals)
        free = sum(facts.fence_verdicts[k] == "" for k in held)
        lines.append(evidence.fence_line(facts.fence_evidence, free, len(held)))
    shard = facts.shard
    if shard is not None:
        big = shard.oversized
        lines.append(options_wording.shard_failures_rerun(shard.part, shard.parts)
                     if shard.rerun_done else wording.shard_header(
            shard.part, shard.parts, shard.kept, shard.selected, shard.seconds,
            None if big is None else wording.Oversized(*big),
            selected_elsewhere=shard.collected_here))
    return lines


def _verdicts_only(facts: Facts) -> bool:
    """The edges file added no edge or resource and named no missing test, but
    holds verdicts: the evidence lines say all there is to say of it."""
    if (facts.evidence is None and facts.fence_evidence is None) or facts.edges_file is None:
        return False
    note = facts.edges_file
    return note.found and not (note.edges or note.resources or note.stale)


def state_labels(facts: Facts) -> tuple[list[str | None], list[int | None]]:
    """Per test, its group under ``--dag-affinity=state`` as the reasons it was
    formed, or None (the rule: ``core/affinity.state_partition``): every
    declared edge joins its tests, but those of a test marked
    ``dag_shares_nothing`` and those evidence lifted (``facts.lifted``); a
    group keeps the stretch of a module whose fixtures it holds.  With, per
    test, its group's first test."""
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
        edges = list(inner_edges(g.requires, g.after, n))
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
    free = [(ids[p], ids[i]) for p, i in inner_edges(g.requires, g.after, n)
            if labels[i] is None or labels[i] != labels[p]]
    lines.append(options_wording.explain_free(free, mode))
    if facts.evidence is not None:
        lines += evidence.explained(facts.evidence, facts.lifted, ids)
    if facts.fence_evidence is not None:
        lines += evidence.fence_explained(facts.fence_verdicts, fenced(facts.ordinals), ids)
    return lines


def _worded(facts: Facts, k: int, label: str) -> str:
    groups = facts.xdist_groups
    return f"xdist_group {label!r}" if groups and label == groups[k] else label


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
