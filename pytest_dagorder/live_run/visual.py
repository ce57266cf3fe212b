"""pytest glue for ``--dag-graph`` and ``--dag-timeline``.

Collects what the renderers need - node ids and locations from collection,
one interval per test from the reports the session already has (on an xdist
controller: the reports the workers send anyway; nothing extra crosses the
wire), and the graph, outcomes and skip decisions from the run state - then
hands plain records to :mod:`.graph_export` and :mod:`.timeline`.

Active on the process that owns the session (serial, or the xdist
controller), never on an xdist worker: only one process writes the files.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from ..core.wording import plural
from ..options.settings import DRIVER_NAME, settings_of
from ..render import graph_export, timeline
from ..render.graph_export import Edge, Node
from ..render.timeline import Interval, Skipped
from ..shims.late_loading import Later
from .outcome_tracker import OutcomeTracker

if TYPE_CHECKING:
    from ..declaring import edges_file
else:
    edges_file = Later("pytest_dagorder.declaring.edges_file")

PLUGIN_NAME: Final = "dagorder-visuals"
MARKER_RESOURCE: Final = "dag_resource"
TIMELINE_FORMATS: Final = (".html", ".htm", ".json")
MAIN_LANE: Final = "main"


def configure(config: pytest.Config) -> None:
    """Check the paths (a usage error before anything runs) and register the writer."""
    given = [("--dag-graph", raw, tuple(graph_export.FORMATS))
             for raw in config.getoption("dag_graph") or ()]
    given += [("--dag-timeline", raw, TIMELINE_FORMATS)
              for raw in config.getoption("dag_timeline") or ()]
    paths = [_checked(config, raw, option, suffixes) for option, raw, suffixes in given]
    _refuse_shared_paths([(option, raw, path)
                          for (option, raw, _), path in zip(given, paths, strict=True)])
    graphs = [path for (option, _, _), path in zip(given, paths, strict=True)
              if option == "--dag-graph"]
    timelines = [path for (option, _, _), path in zip(given, paths, strict=True)
                 if option == "--dag-timeline"]
    if graphs or timelines:
        config.pluginmanager.register(Visuals(graphs, timelines), PLUGIN_NAME)


def _checked(config: pytest.Config, raw: str, option: str, suffixes: Sequence[str]) -> Path:
    path = Path(raw)
    if not path.is_absolute():
        path = config.rootpath / path  # as every path option (settings.PATH_OPTIONS)
    suffix = path.suffix.lower()
    if suffix not in suffixes:
        raise pytest.UsageError(
            f"{option} {raw!r}: unknown suffix {suffix or '(none)'!r}; "
            f"name the file with one of {', '.join(suffixes)}"
        )
    if path.is_dir():
        raise pytest.UsageError(f"{option} {raw!r} is a directory; give a file name")
    parent = path.parent
    if not parent.is_dir():
        raise pytest.UsageError(
            f"{option} {raw!r}: directory {str(parent)!r} does not exist; create it first"
        )
    problem = _write_probe(path)
    if problem is not None:
        raise pytest.UsageError(
            f"{option} {raw!r} is not writable ({problem.strerror or problem}); "
            "choose another path")
    return path


def _write_probe(path: Path) -> OSError | None:
    """Why ``path`` cannot be written, found by trying; None if it can.

    Permission bits are not the answer: root passes ``os.access`` where the
    kernel still refuses (``/proc``, a read-only mount).  An existing file is
    opened for appending (nothing truncated, no wait on a FIFO without a
    reader); a new one is created and removed at once.
    """
    for _ in range(2):  # twice: the file may appear between the two attempts
        try:
            if path.exists():
                os.close(os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NONBLOCK", 0)))
            else:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
                path.unlink()
        except FileExistsError:
            continue
        except OSError as exc:
            return exc
        return None
    return None


def _refuse_shared_paths(outputs: Sequence[tuple[str, str, Path]]) -> None:
    """Two outputs naming one file would overwrite each other: a usage error."""
    seen: dict[str, tuple[str, str]] = {}
    for option, raw, path in outputs:
        key = os.path.normcase(path.resolve())
        if key in seen:
            first_option, first_raw = seen[key]
            raise pytest.UsageError(
                f"{first_option} {first_raw!r} and {option} {raw!r} name the same file "
                f"{key!r}; give each output a path of its own")
        seen[key] = (option, raw)


# -- the run state -------------------------------------------------------------------


@dataclass(frozen=True)
class RunView:
    """The run state as plain values: graph indices ``0 .. n_run - 1`` ran.

    ``skips``: index -> (reason, root cause index or None) for the tests the
    graph skipped and that were reported so; ``blocked``: every index the
    graph decided to skip (reported or not), whose intervals are no bars.
    """

    nodeids: Sequence[str]
    n_run: int
    requires: Sequence[Sequence[int]]
    after: Sequence[Sequence[int]]
    outcome: Sequence[str | None]
    skips: Mapping[int, tuple[str, int | None]]
    blocked: frozenset[int]
    groups: Sequence[str | None]


def find_run(config: pytest.Config) -> tuple[RunView | None, bool]:
    """The session's run state (None: no declarations), and whether it was invalid.

    The one place that reads the run plugin's internals: a
    :class:`~pytest_dagorder.drivers.serial.SerialRunner` (``.run``, ``.plan``) or,
    on an xdist controller, a :class:`~pytest_dagorder.drivers.distributed.controller.DagController`
    (``.sched.run``, ``.sched.aborted``).
    """
    holder = config.pluginmanager.get_plugin(DRIVER_NAME)
    if holder is None:
        return None, False
    if hasattr(holder, "sched"):
        scheduling = holder.sched
        if scheduling is None:
            return None, False
        run, invalid = scheduling.run, bool(scheduling.aborted)
    else:
        plan = getattr(holder, "plan", None)
        run, invalid = holder.run, bool(plan is not None and plan.problems)
    if run is None:
        return None, invalid
    machine = run.machine
    label = {i: run.nodeids[members[0]]
             for members in machine.groups for i in members}
    return RunView(
        nodeids=list(run.nodeids),
        n_run=run.n_run,
        requires=run.graph.requires,
        after=run.graph.after,
        outcome=list(machine.outcome),
        skips={i: (run.reason(s), s.root) for i, s in sorted(machine.skips.items())
               if i < run.n_run and i in run.reported},
        blocked=frozenset(machine.skips),
        groups=[label.get(i) for i in range(len(run.nodeids))],
    ), invalid


# -- the recorder --------------------------------------------------------------------


def lane_of(report: pytest.TestReport) -> str:
    """The worker a report came from: xdist sets ``node`` on the controller."""
    node = getattr(report, "node", None)
    gateway = getattr(node, "gateway", None)
    if gateway is not None:
        return str(gateway.id)
    worker = getattr(report, "worker_id", None)
    return str(worker) if worker else MAIN_LANE


@dataclass
class _Open:
    lane: str
    start: float
    stop: float
    phases: int


class Recorder:
    """Folds reports into one :class:`Interval` per test run (setup start to teardown end)."""

    def __init__(self) -> None:
        self.tracker = OutcomeTracker()
        self.intervals: list[Interval] = []
        self.outcome: dict[str, str] = {}
        self.skip_reason: dict[str, str] = {}
        self.location: dict[str, tuple[str, int | None]] = {}
        self._open: dict[str, _Open] = {}
        self._last: dict[str, int] = {}  # node id -> its latest interval

    def feed(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        path, line, _ = report.location
        self.location.setdefault(nodeid, (str(path), line))
        if report.skipped and isinstance(report.longrepr, tuple):
            self.skip_reason[nodeid] = str(report.longrepr[2]).removeprefix("Skipped: ")
        lane = lane_of(report)
        cur = self._open.get(nodeid)
        start, stop = float(report.start or 0.0), float(report.stop or 0.0)
        if start > 0:  # xdist's crash report carries no times
            if cur is None:
                cur = self._open[nodeid] = _Open(lane, start, stop, 0)
            cur.start, cur.stop = min(cur.start, start), max(cur.stop, stop)
            cur.phases += 1
        word = self.tracker.feed(report)
        if word is None:
            return
        self._open.pop(nodeid, None)
        k = self._last.get(nodeid)
        if (cur is not None and cur.phases == 1 and str(report.when) == "teardown"
                and k is not None and self.intervals[k].lane == cur.lane):
            # A fixture teardown deferred past the test's own teardown (xdist
            # reports it later on that test): part of the same bar.
            old = self.intervals[k]
            spoilt = old.outcome if old.outcome != "passed" else word
            self.intervals[k] = Interval(nodeid, old.lane, old.start, cur.stop, spoilt)
            self.outcome[nodeid] = spoilt
            return
        if word != "passed" or nodeid not in self.outcome:
            self.outcome[nodeid] = word
        if cur is not None:
            self._last[nodeid] = len(self.intervals)
            self.intervals.append(Interval(nodeid, cur.lane, cur.start, cur.stop, word))


# -- the plugin ----------------------------------------------------------------------


class Visuals:
    def __init__(self, graphs: Sequence[Path], timelines: Sequence[Path]) -> None:
        self.graphs = list(graphs)
        self.timelines = list(timelines)
        self.recorder = Recorder()
        self.collected: list[str] = []
        self.resources: dict[str, tuple[str, ...]] = {}
        self.lanes: list[str] = []
        self.notes: list[str] = []
        self.ran = False
        #: The --dag-edges file: its edges are a kind of their own in the graph.
        self.edges_path: Path | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # Never a barrier here: this runs serially or on the controller, and a
        # worker's barrier is not among what iterating session.items yields.
        for item in session.items:
            self.collected.append(item.nodeid)
            path, line, _ = item.location
            self.recorder.location.setdefault(item.nodeid, (str(path), line))
            names = [str(a) for m in item.iter_markers(MARKER_RESOURCE) for a in m.args]
            if names:
                self.resources[item.nodeid] = tuple(dict.fromkeys(names))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodeready(self, node: Any) -> None:
        """An xdist worker came up: it gets a lane even if it ends up running nothing."""
        lane = str(node.gateway.id)
        if lane not in self.lanes:
            self.lanes.append(lane)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.ran = True
        self.recorder.feed(report)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        view, invalid = find_run(session.config)
        self.edges_path = settings_of(session.config).edges_path
        for path in self.graphs:
            if invalid:
                self.notes.append(f"dagorder: graph not written to {path}: "
                                  "the dependency declarations have errors")
                continue
            t = time.perf_counter()
            nodes, edges = self.graph(view)
            self._write(path, graph_export.render(path.suffix, nodes, edges),
                        f"graph ({plural(len(nodes), 'test')}, "
                        f"{plural(len(edges), 'dependency', 'dependencies')})", t)
        if self.timelines:
            t = time.perf_counter()
            intervals, skipped, pairs = self.timeline(view)
            lanes = self.lanes or ([MAIN_LANE] if not intervals else [])
            for path in self.timelines:
                render = (timeline.render_trace if path.suffix.lower() == ".json"
                          else timeline.render_html)
                if render is timeline.render_html and view is not None:
                    text = timeline.render_html(intervals, skipped, pairs, lanes=lanes, groups={
                        nid: g for nid, g in zip(view.nodeids, view.groups, strict=True)
                        if g is not None})
                else:
                    text = render(intervals, skipped, pairs, lanes=lanes)
                self._write(path, text,
                            f"timeline ({plural(len(intervals), 'test')}, "
                            f"{len(skipped)} skipped by the graph)", t)
                t = time.perf_counter()

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        for note in self.notes:
            terminalreporter.write_line(note)

    def _write(self, path: Path, text: str, what: str, began: float) -> None:
        """Write ``text``; the note says how long it took since ``began`` (rendering included)."""
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            self.notes.append(f"dagorder: could not write the {what} to {path}: {exc}")
            return
        ms = (time.perf_counter() - began) * 1000
        self.notes.append(f"dagorder: wrote the {what} to {path} "
                          f"({len(text.encode()) // 1024} KiB, {ms:.0f} ms)")

    def graph(self, view: RunView | None) -> tuple[list[Node], list[Edge]]:
        rec = self.recorder
        if view is None:
            ids = list(dict.fromkeys([*self.collected, *rec.location]))
            return [self._node(nid, None, None, True, None) for nid in ids], []
        nodes = []
        for i, nid in enumerate(view.nodeids):
            skip = view.skips.get(i)
            nodes.append(self._node(nid, view.groups[i], view.outcome[i], i < view.n_run,
                                    skip[0] if skip is not None else None))
        edges = graph_export.edges_of(view.requires, view.after)
        path = self.edges_path
        if path is not None:
            edges = graph_export.from_file(edges, nodes, edges_file.edge_pairs(path))
        return nodes, edges

    def _node(self, nid: str, group: str | None, core_outcome: str | None,
              selected: bool, reason: str | None) -> Node:
        rec = self.recorder
        file, line = rec.location.get(nid, (graph_export.module_of(nid), None))
        outcome = rec.outcome.get(nid) or core_outcome
        if outcome is None and self.ran and selected:
            outcome = "not run"
        if reason is None and outcome == "skipped":
            reason = rec.skip_reason.get(nid)
        return Node(nid, file, line, group, self.resources.get(nid, ()), selected,
                    outcome, reason)

    def timeline(
        self, view: RunView | None
    ) -> tuple[list[Interval], list[Skipped], list[tuple[str, str]]]:
        if view is None:
            return list(self.recorder.intervals), [], []
        ids = view.nodeids
        blocked = {ids[i] for i in view.blocked}
        intervals = [iv for iv in self.recorder.intervals if iv.nodeid not in blocked]
        skipped = [Skipped(ids[i], reason, None if root is None else ids[root])
                   for i, (reason, root) in view.skips.items()]
        pairs = [(ids[p], ids[i]) for i in range(len(ids))
                 for p in (*view.requires[i], *view.after[i])]
        return intervals, skipped, pairs
