"""Building the run from a worker's plan: pure, no worker, no xdist call.

:func:`build_run` turns the plan a worker shipped (:class:`~.wire.Payload`),
the checked settings and the recorded durations into the run the controller
drives: the core with its groups, limits and priorities, the relay of
published values when some test reads them, and the header lines that
announce it.  The caller has checked the plan (no problems, the tests its
worker collected).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..core import wording
from ..core.affinity import DOCUMENT, affinity_groups, kept_whole, serial_modules
from ..core.bounds import bounds
from ..core.errors import DependencyError
from ..core.graph import Graph
from ..core.module_runs import forced_returns
from ..core.published import Relay
from ..glue import wording as glue_wording
from ..glue.dag_run import DagRun
from ..glue.resources import resources_in_use, unused_limits
from ..glue.settings import AffinityMode, Settings
from ..migration import wording as migration_wording
from . import wire
from . import wording as xdist_wording


@dataclass
class BuiltRun:
    """What :func:`build_run` makes: the run and what drives it beside the core."""

    run: DagRun
    #: Lines announcing the run (written once every collection is in).
    header: list[str]
    #: Published values, when some test requests the ``dag`` fixture; per
    #: test, whether it does (empty: none does).
    relay: Relay | None = None
    dag_users: Sequence[bool] = ()
    #: Mean recorded duration of the run's tests (None: none recorded).
    mean_duration: float | None = None
    #: What the controller's log should say about the build.
    notes: list[str] = field(default_factory=list)


def build_run(payload: wire.Payload, settings: Settings, recorded: Mapping[str, float],
              *, dist: str = "load", workers: int = 0) -> BuiltRun:
    """The run for ``payload`` under ``settings``; ``recorded``: seconds per node id.

    ``dist`` is the ``--dist`` mode (it decides which files are kept whole);
    ``workers``, how many there will be (0: unknown), for what the groups
    cost by the recorded durations.
    """
    n = len(payload.ids)
    g = payload.graph
    nodeids = payload.ids if g is None else g.ids
    notes: list[str] = []
    # Graph ids are positions: node ids may repeat (--keep-duplicates).
    known: dict[int, float] = {
        k: recorded[nid] for k, nid in enumerate(nodeids) if nid in recorded}
    # Priorities: the longest remaining path in recorded seconds, declared
    # dependencies or not (tests with no record count as the mean of those
    # with one).
    mode = settings.affinity
    after: dict[int, list[int]] = {} if g is None else {
        k: list(a) for k, a in enumerate(g.after) if a}
    explicit = list(payload.xdist_groups)
    chains = ({} if mode == "none" else
              serial_modules(payload.module_scopes, payload.runtime_depends))
    whole = kept_whole(dist, mode, payload.ids, payload.module_scopes, payload.class_scopes,
                       payload.documents)
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

    requires: Sequence[Sequence[int]] = [()] * len(nodeids) if g is None else g.requires

    def build(edges: dict[int, list[int]]) -> Graph:
        return Graph.of_positions(requires, after=edges, durations=known)

    try:
        graph = build(chained)
    except DependencyError:
        # The worker's order contradicts a declared edge (a hook reordered
        # the tests after the plan): the declared order wins.
        notes.append("runtime depends() modules not chained: their order contradicts an edge")
        graph = build(after)
    groups = affinity_groups(
        payload.scopes(mode), graph.requires[:n], graph.after[:n], explicit
    )
    groups += [None] * (len(graph) - n)
    # affinity none: tests share no process state, so a released test
    # need not prefer the worker that released it; priority alone decides.
    # Deselected prerequisites (past the run) never start: they use nothing.
    resources = ([*payload.resources, *[()] * (len(graph) - n)]
                 if payload.resources else None)
    alone = ([*payload.exclusive, *[False] * (len(graph) - n)]
             if any(payload.exclusive) else None)
    # Module runs: deselected prerequisites (past the run) never start.
    keeps = payload.module_fixtures
    modules = [*payload.module_scopes, *[None] * (len(graph) - n)] if any(keeps) else None
    run = DagRun(graph, nodeids, n_run=n, on_failure=settings.on_failure,
                 groups=groups, locality=mode != "none",
                 resources=resources, limits=settings.limits, exclusive=alone,
                 checks=dict(payload.fail_checks), modules=modules,
                 module_fixtures=[*keeps, *[False] * (len(graph) - n)] if modules else None,
                 history=settings.explain)
    run.whole = payload.whole
    run.group_names = [_group_label(payload, explicit, members) for members in run.machine.groups]
    built = BuiltRun(run, [], notes=notes)
    if known:
        built.mean_duration = sum(known.values()) / len(known)
    if any(payload.dag_users):
        outcome = run.machine.outcome
        built.dag_users = payload.dag_users
        built.relay = Relay(graph.requires, lambda i: outcome[i] == "passed")
    header = built.header
    header.append(xdist_wording.xdist_header(
        n, graph.edge_count, graph.longest_chain(), mode,
        len(run.machine.groups), len(known), len(nodeids)))
    header += payload.header
    runs = run.machine.runs
    if runs is not None and graph.edge_count:
        split = forced_returns(graph, runs.module, runs.keeps)
        if split:
            names = {number: name for name, number in zip(modules or (), runs.module,
                                                              strict=False)}
            header.append(wording.module_returns_header([str(names[m]) for m in split]))
    if chains:
        header.append(migration_wording.runtime_depends_header(len(chains)))
    if whole:
        header.append(wording.kept_whole_header(dist, len(whole), [
            label.removeprefix(f"{DOCUMENT} ") for label in whole if label.startswith(DOCUMENT)]))
    used = resources_in_use(payload.resources)
    if used:
        header.append(wording.limits_header(settings.limits, used))
    unused = unused_limits(settings.limits, payload.resources)
    if unused:
        header.append(glue_wording.unused_limits_warning(unused))
    if alone is not None:
        header.append(wording.exclusive_header(sum(alone)))
    if run.machine.groups and mode != "none":
        header.append(_groups_line(run, known, workers))
    if settings.explain:
        header += explain_lines(run, payload, mode, groups, explicit)
    return built


def _groups_line(run: DagRun, known: Mapping[int, float], workers: int) -> str:
    """What the affinity groups hold and, from recorded durations, cost; how to lift it."""
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
        b = bounds(took, edges, label, workers)
        cost = (b.cost, b.grouped_bound, b.bound)
    return glue_wording.groups_header(len(groups), held, run.n_run, cost)


def explain_lines(run: DagRun, payload: wire.Payload, mode: AffinityMode,
                  labels: Sequence[str | None], explicit: Sequence[str | None]) -> list[str]:
    """``--dag-explain``: every group with why it was formed, every edge left free."""
    n = run.n_run
    g = run.graph
    ids = run.nodeids
    lines: list[str] = []
    for members in run.machine.groups:
        why: list[str] = []
        for k in members:
            for reason in _reasons(payload, mode, k, explicit[k]):
                if reason not in why:
                    why.append(reason)
        lines.append(wording.explain_group(ids[members[0]], [ids[k] for k in members], why))
    free = [(ids[p], ids[i]) for i in range(n) for p in (*g.requires[i], *g.after[i])
            if p < n and (labels[i] is None or labels[i] != labels[p])]
    lines.append(glue_wording.explain_free(free, mode))
    return lines


def _group_label(payload: wire.Payload, explicit: Sequence[str | None],
                 members: Sequence[int]) -> str | None:
    """The first label among a group's tests, worded as :func:`_reasons` words it."""
    for k in members:
        label = explicit[k]
        if label is not None:
            return f"xdist_group {label!r}" if label == payload.xdist_groups[k] else label
    return None


def _reasons(payload: wire.Payload, mode: AffinityMode, k: int,
             label: str | None) -> list[str]:
    """Why test ``k`` is in its group: its explicit ``label`` (an ``xdist_group``,
    a document, ...) and its scope under ``mode``."""
    out: list[str] = []
    if label is not None:
        out.append(f"xdist_group {label!r}" if label == payload.xdist_groups[k] else label)
    if mode == "state" and payload.state_scopes and payload.state_scopes[k] is not None:
        out += str(payload.state_scopes[k]).split("; ")
    elif mode in ("module", "class"):
        scope = (payload.module_scopes if mode == "module" else payload.class_scopes)[k]
        if scope is not None:
            out.append(f"edges inside {scope}")
    return out
