"""A run as a timeline: one self-contained HTML page, or a Chrome trace.

Pure: plain records in (:class:`Interval` per executed test, :class:`Skipped`
per test the graph skipped, prerequisite edges by node id), a string out; no
pytest.

The HTML page loads nothing: the chart is inline SVG (no ``xmlns`` URL either,
HTML5 does not need it), the style is one inline ``<style>``, there is no
script (hover text is SVG ``<title>``), and the fonts are the browser's own.
So it opens from a CI artefact store or an e-mail attachment as it is.

The *critical path* highlighted is the longest chain of dependency edges
through the executed tests, weighted by what each test took in this run:
no number of workers could have finished the run sooner than that chain
(no schedule on N workers beats max(C, W/N), for total work W and that chain C;
see docs/how-it-works.rst, "Performance"; both figures are shown).
"""

from __future__ import annotations

import heapq
import html
import itertools
import json
import math
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ..core.bounds import Bounds, bounds
from ..core.wording import plural


@dataclass(frozen=True, slots=True)
class Interval:
    """One executed test on one lane: setup start to teardown end, epoch seconds."""

    nodeid: str
    lane: str
    start: float
    stop: float
    outcome: str

    @property
    def duration(self) -> float:
        return max(0.0, self.stop - self.start)


@dataclass(frozen=True, slots=True)
class Skipped:
    """A test the graph did not let run; ``root`` is None for a stop (``-x``, policy stop)."""

    nodeid: str
    reason: str
    root: str | None


#: Bar colours: the graph export's fills, a shade stronger so thin bars still show.
BAR_COLOURS: Final[Mapping[str, str]] = {
    "passed": "#52b788",
    "failed": "#e5484d",
    "error": "#f08c2e",
    "crashed": "#a855f7",
    "skipped": "#eab308",
    "xfailed": "#6366f1",
}
_OTHER_COLOUR: Final = "#9ca3af"

# Geometry of the chart, in SVG user units (= CSS pixels at 100 %).
WIDTH: Final = 1340
LABEL_WIDTH: Final = 110
RIGHT_MARGIN: Final = 24
AXIS_HEIGHT: Final = 28
LANE_HEIGHT: Final = 26
LANE_GAP: Final = 8
#: Bars narrower than this are widened to it, so a sub-millisecond test on a
#: long run is still visible (and hoverable) as a hairline.
MIN_BAR: Final = 0.8


def lane_key(lane: str) -> tuple[str, int, str]:
    """gw2 before gw10: a lane's name split into prefix and number."""
    m = re.fullmatch(r"(\D*)(\d+)", lane)
    return (m.group(1), int(m.group(2)), "") if m else (lane, -1, lane)


def ordered_lanes(intervals: Iterable[Interval], lanes: Iterable[str] = ()) -> list[str]:
    """Every lane that is named or has a bar, in natural order."""
    return sorted({*lanes, *(iv.lane for iv in intervals)}, key=lane_key)


def critical_path(intervals: Sequence[Interval], edges: Iterable[tuple[str, str]]) -> list[str]:
    """Node ids on the longest duration-weighted chain of ``edges`` among executed tests.

    ``edges`` are (prerequisite, dependent) node ids; those touching a test that
    did not execute are ignored.  A test that ran more than once (its worker
    crashed) counts with its summed time.  Ties go to the test that started
    first, so the result is the same on every run of the same records.
    """
    weight: dict[str, float] = {}
    first: dict[str, tuple[float, int]] = {}
    for k, iv in enumerate(intervals):
        weight[iv.nodeid] = weight.get(iv.nodeid, 0.0) + iv.duration
        first.setdefault(iv.nodeid, (iv.start, k))
    preds: dict[str, list[str]] = {}
    succs: dict[str, list[str]] = {}
    for pre, dep in edges:
        if pre in weight and dep in weight and pre != dep:
            preds.setdefault(dep, []).append(pre)
            succs.setdefault(pre, []).append(dep)
    # Kahn's algorithm, by start time: a validated graph has no cycle, and any
    # node left on one (foreign input) simply gets no path through it.
    indeg = {u: len(preds.get(u, ())) for u in weight}
    heap = [(first[u], u) for u, d in indeg.items() if d == 0]
    heapq.heapify(heap)
    best: dict[str, float] = {}
    back: dict[str, str | None] = {}
    while heap:
        _, u = heapq.heappop(heap)
        via: str | None = None
        for p in sorted(preds.get(u, ()), key=first.__getitem__):
            if p in best and (via is None or best[p] > best[via]):
                via = p
        best[u] = weight[u] + (best[via] if via is not None else 0.0)
        back[u] = via
        for d in succs.get(u, ()):
            indeg[d] -= 1
            if indeg[d] == 0:
                heapq.heappush(heap, (first[d], d))
    if not best:
        return []
    end = min(best, key=lambda u: (-best[u], first[u]))
    path = []
    node: str | None = end
    while node is not None:
        path.append(node)
        node = back[node]
    path.reverse()
    return path


@dataclass(frozen=True, slots=True)
class Figures:
    """What the run's shape says, in seconds (``bound`` = max(C, W/N))."""

    makespan: float
    work: float
    critical: float
    workers: int

    @property
    def bound(self) -> float:
        return max(self.critical, self.work / self.workers) if self.workers else 0.0


def figures(intervals: Sequence[Interval], path: Sequence[str], n_lanes: int) -> Figures:
    if not intervals:
        return Figures(0.0, 0.0, 0.0, n_lanes)
    on_path = set(path)
    return Figures(
        makespan=max(iv.stop for iv in intervals) - min(iv.start for iv in intervals),
        work=sum(iv.duration for iv in intervals),
        critical=sum(iv.duration for iv in intervals if iv.nodeid in on_path),
        workers=n_lanes,
    )


def _seconds(x: float) -> str:
    if x >= 100:
        return f"{x:.0f} s"
    if x >= 1:
        return f"{x:.2f} s"
    return f"{x * 1000:.1f} ms"


def _tick_step(span: float, target: int = 10) -> float:
    """A 1/2/5 x 10^k step giving about ``target`` ticks over ``span``."""
    if span <= 0:
        return 1.0
    raw = span / target
    base = 10.0 ** math.floor(math.log10(raw))
    return next(base * m for m in (1.0, 2.0, 5.0, 10.0) if base * m >= raw)


def _tick_label(t: float, step: float) -> str:
    digits = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{t:.{digits}f} s"


_STYLE: Final = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: #111827;
       margin: 16px 24px; background: #ffffff; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 24px 0 8px; }
.figures { color: #374151; margin: 0 0 8px; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 12px; height: 12px; vertical-align: -1px;
            margin-right: 4px; border-radius: 2px; }
svg { display: block; }
svg text { font: 12px system-ui, -apple-system, "Segoe UI", sans-serif; fill: #374151; }
svg .lane { font-weight: 600; fill: #111827; }
svg .tick { stroke: #e5e7eb; }
svg .crit { stroke: #111827; stroke-width: 1.5; }
svg .link { stroke: #111827; stroke-width: 1; stroke-dasharray: 3 2; fill: none; }
details { margin: 4px 0; }
summary { cursor: pointer; }
ul { margin: 4px 0 8px; padding-left: 24px; }
code { font: 12px ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
.reason { color: #4b5563; }
""".strip()


def render_html(
    intervals: Sequence[Interval],
    skipped: Sequence[Skipped] = (),
    edges: Iterable[tuple[str, str]] = (),
    *,
    lanes: Iterable[str] = (),
    title: str = "pytest-dagorder timeline",
    groups: Mapping[str, Hashable] | None = None,
) -> str:
    """The whole page: figures, legend, the SVG chart, then the skipped tests.

    ``groups`` (node id -> affinity group label): the figures then also give
    the bound the groups allow (see :mod:`.bounds`).
    """
    lane_names = ordered_lanes(intervals, lanes)
    edges = list(edges)
    path = critical_path(intervals, edges)
    fig = figures(intervals, path, len(lane_names))
    esc = html.escape
    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title>",
        f"<style>\n{_STYLE}\n</style>",
        "</head><body>",
        f"<h1>{esc(title)}</h1>",
    ]
    n_tests = len({iv.nodeid for iv in intervals})
    took: dict[str, float] = {}
    for iv in intervals:
        took[iv.nodeid] = took.get(iv.nodeid, 0.0) + iv.duration
    b = bounds(took, edges, groups or {}, fig.workers)
    # The staggered bound is named only where it says more than max(C, W/N).
    staggered = b.staggered > b.simple * 1.001
    ratio = f", {fig.makespan / b.bound:.2f}x the bound" if b.bound > 0 else ""
    out.append(
        f'<p class="figures">{plural(n_tests, "test")} executed on '
        f"{plural(len(lane_names), 'lane')}; {len(skipped)} skipped by "
        f"the graph.  Makespan {_seconds(fig.makespan)}; work {_seconds(fig.work)}; "
        f"critical path {_seconds(fig.critical)} over {plural(len(path), 'test')}; "
        "no schedule beats max(C, W/N) = "
        f"{_seconds(fig.bound)}"
        + (f", nor, as no test starts before its prerequisites can end, "
           f"{_seconds(b.staggered)}" if staggered else "")
        + f"{ratio}.{_grouped(b, groups, fig)}</p>"
    )
    out.append(_legend(intervals))
    out.append(_svg(intervals, lane_names, path))
    out.extend(_skipped_section(skipped))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _grouped(b: Bounds, groups: Mapping[str, Hashable] | None, fig: Figures) -> str:
    """The figures' sentence on affinity groups ("" without any)."""
    if not groups or not fig.workers:
        return ""
    ratio = f", {fig.makespan / b.grouped_bound:.2f}x that" if b.grouped_bound > 0 else ""
    return (f"  With affinity groups (each on one worker, contiguously, after its "
            f"prerequisites): critical path {_seconds(b.grouped_critical)}, no schedule beats "
            f"{_seconds(b.grouped_bound)}{ratio}.")


def _legend(intervals: Sequence[Interval]) -> str:
    seen = dict.fromkeys(iv.outcome for iv in intervals)
    known = [o for o in BAR_COLOURS if o in seen]
    other = sorted(o for o in seen if o not in BAR_COLOURS)
    items = [
        f'<span><i style="background:{BAR_COLOURS.get(o, _OTHER_COLOUR)}"></i>'
        f"{html.escape(o)}</span>"
        for o in (*known, *other)
    ]
    items.append('<span><i style="background:#ffffff;border:2px solid #111827;'
                 'width:9px;height:9px"></i>critical path</span>')
    items.append('<span><i style="background:repeating-linear-gradient(45deg,#f3f4f6 0 3px,'
                 '#d1d5db 3px 5px)"></i>idle</span>')
    return '<p class="legend">' + "".join(items) + "</p>"


def _svg(intervals: Sequence[Interval], lanes: Sequence[str], path: Sequence[str]) -> str:
    height = AXIS_HEIGHT + len(lanes) * (LANE_HEIGHT + LANE_GAP) + 4
    plot = WIDTH - LABEL_WIDTH - RIGHT_MARGIN
    t0 = min((iv.start for iv in intervals), default=0.0)
    t1 = max((iv.stop for iv in intervals), default=0.0)
    span = max(t1 - t0, 1e-9)
    scale = plot / span

    def x(t: float) -> float:
        return LABEL_WIDTH + (t - t0) * scale

    row = {lane: k for k, lane in enumerate(lanes)}

    def y(lane: str) -> float:
        return AXIS_HEIGHT + row[lane] * (LANE_HEIGHT + LANE_GAP)

    parts = [
        f'<svg width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        'role="img" aria-label="timeline of the run, one lane per worker">',
        '<defs><pattern id="idle" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#f3f4f6"/>'
        '<rect width="2" height="6" fill="#d1d5db"/></pattern></defs>',
    ]
    step = _tick_step(span)
    ticks = int(span / step + 1e-9)
    for k in range(ticks + 1):
        tx = LABEL_WIDTH + k * step * scale
        parts.append(f'<line class="tick" x1="{tx:.1f}" y1="{AXIS_HEIGHT - 6}" '
                     f'x2="{tx:.1f}" y2="{height}"/>')
        parts.append(f'<text x="{tx:.1f}" y="{AXIS_HEIGHT - 10}" text-anchor="middle">'
                     f"{_tick_label(k * step, step)}</text>")
    busy: dict[str, float] = {}
    for iv in intervals:
        busy[iv.lane] = busy.get(iv.lane, 0.0) + iv.duration
    for lane in lanes:
        ly = y(lane)
        share = busy.get(lane, 0.0) / span if intervals else 0.0
        idle = max(0.0, span - busy.get(lane, 0.0)) if intervals else 0.0
        parts.append(
            f'<rect x="{LABEL_WIDTH}" y="{ly}" width="{plot}" height="{LANE_HEIGHT}" '
            f'fill="url(#idle)"><title>{html.escape(lane)}: idle {_seconds(idle)}</title></rect>'
        )
        parts.append(f'<text class="lane" x="8" y="{ly + 12}">{html.escape(lane)}</text>')
        parts.append(f'<text x="8" y="{ly + 24}">busy {share:.0%}</text>')
    crit = set(path)
    for iv in sorted(intervals, key=lambda iv: iv.nodeid in crit):  # critical bars on top
        bx = x(iv.start)
        bw = max(iv.duration * scale, MIN_BAR)
        colour = BAR_COLOURS.get(iv.outcome, _OTHER_COLOUR)
        cls = ' class="bar crit"' if iv.nodeid in crit else ' class="bar"'
        tip = f"{iv.nodeid} - {_seconds(iv.duration)} - {iv.outcome}"
        if iv.nodeid in crit:
            tip += " - critical path"
        parts.append(
            f'<rect{cls} x="{bx:.2f}" y="{y(iv.lane) + 2}" width="{bw:.2f}" '
            f'height="{LANE_HEIGHT - 4}" fill="{colour}"><title>{html.escape(tip)}</title></rect>'
        )
    parts.extend(_links(intervals, path, x, y))
    parts.append("</svg>")
    return "\n".join(parts)


def _links(intervals: Sequence[Interval], path: Sequence[str],
           x: Callable[[float], float], y: Callable[[str], float]) -> list[str]:
    """Dashed lines joining consecutive critical-path bars (end of one, start of next)."""
    last: dict[str, Interval] = {}
    for iv in intervals:
        last[iv.nodeid] = iv  # a test run twice: its last run is the one that counted
    mid = LANE_HEIGHT / 2
    out = []
    for a, b in itertools.pairwise(path):
        ia, ib = last[a], last[b]
        out.append(
            f'<line class="link" x1="{x(ia.stop):.2f}" y1="{y(ia.lane) + mid:.1f}" '
            f'x2="{x(ib.start):.2f}" y2="{y(ib.lane) + mid:.1f}"/>'
        )
    return out


def _skipped_section(skipped: Sequence[Skipped]) -> list[str]:
    if not skipped:
        return ["<h2>Skipped by the graph</h2>", "<p>None.</p>"]
    by_root: dict[str | None, list[Skipped]] = {}
    for s in skipped:
        by_root.setdefault(s.root, []).append(s)
    # Biggest root cause first; then by name, stops (no root) last.
    order = sorted(by_root, key=lambda r: (r is None, -len(by_root[r]), r or ""))
    out = [f"<h2>Skipped by the graph ({len(skipped)})</h2>"]
    esc = html.escape
    for root in order:
        group = by_root[root]
        n = len(group)
        head = (f"<code>{esc(root)}</code>" if root is not None
                else "run stopped before these started")
        out.append(f"<details open><summary>{head}: blocked {n} test{'s' * (n != 1)}"
                   "</summary><ul>")
        for s in group:
            out.append(f'<li><code>{esc(s.nodeid)}</code> <span class="reason">'
                       f"{esc(s.reason)}</span></li>")
        out.append("</ul></details>")
    return out


def render_trace(
    intervals: Sequence[Interval],
    skipped: Sequence[Skipped] = (),
    edges: Iterable[tuple[str, str]] = (),
    *,
    lanes: Iterable[str] = (),
) -> str:
    """Chrome's trace-event JSON: one complete ("X") event per executed test.

    Lanes are threads of one process (named by metadata events), times are
    microseconds from the first test's start.  Perfetto and chrome://tracing
    open it; ``args`` carry the outcome and whether the test is on the
    critical path.
    """
    lane_names = ordered_lanes(intervals, lanes)
    tid = {lane: k + 1 for k, lane in enumerate(lane_names)}
    crit = set(critical_path(intervals, edges))
    t0 = min((iv.start for iv in intervals), default=0.0)
    events: list[dict[str, object]] = [
        {"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
         "args": {"name": "pytest-dagorder"}},
    ]
    for lane in lane_names:
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid[lane],
                       "args": {"name": lane}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid[lane],
                       "args": {"sort_index": tid[lane]}})
    for iv in intervals:
        events.append({
            "name": iv.nodeid,
            "cat": iv.outcome,
            "ph": "X",
            "ts": round((iv.start - t0) * 1e6, 1),
            "dur": round(iv.duration * 1e6, 1),
            "pid": 1,
            "tid": tid[iv.lane],
            "args": {"outcome": iv.outcome, "critical_path": iv.nodeid in crit},
        })
    doc = {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"generator": "pytest-dagorder", "skipped_by_graph": str(len(skipped))},
    }
    return json.dumps(doc, separators=(",", ":")) + "\n"
