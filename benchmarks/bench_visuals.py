"""Size and cost of --dag-timeline and --dag-graph output for a large run.

Feeds the pure renderers (``timeline.render_html`` / ``render_trace``,
``graph_export.render``) a synthetic run of N tests (default 20,000) on W
lanes: chains of 1-5 tests per module of 50, a few cross-module edges, 2 %
failed with their dependents skipped, durations 1-40 ms packed back to back
per lane.  Reports, per output, the time to render and write it and its size.
With ``--browser`` it also times a headless Chromium loading the HTML page
(wall time of ``chromium --headless --screenshot``, start-up included, and
of the same command on an empty page, to subtract).

Run: ``python benchmarks/bench_visuals.py [--tests N] [--lanes W] [--browser]``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_dagorder.render import graph_export, timeline
from pytest_dagorder.render.graph_export import Edge, Node
from pytest_dagorder.render.timeline import Interval, Skipped

MODULE_SIZE = 50
T0 = 1_700_000_000.0


def synthetic_run(n: int, lanes: int, seed: int = 1) -> tuple[
    list[Node], list[Edge], list[Interval], list[Skipped], list[tuple[str, str]]
]:
    rng = random.Random(seed)
    ids = [f"tests/mod_{k // MODULE_SIZE:04d}/test_part.py::TestCase::test_case_{k:05d}"
           for k in range(n)]
    requires: list[list[int]] = [[] for _ in range(n)]
    for k in range(n):
        if k % MODULE_SIZE and rng.random() < 0.6:
            requires[k].append(k - 1)  # chains inside a module
        if k >= MODULE_SIZE and rng.random() < 0.02:
            requires[k].append(rng.randrange(k - k % MODULE_SIZE))  # an earlier module
    failed = {k for k in range(n) if rng.random() < 0.02}
    blocked: dict[int, int] = {}  # test -> root cause
    for k in range(n):
        for p in requires[k]:
            root = p if p in failed else blocked.get(p)
            if root is not None:
                blocked[k] = root
                break
    free_at = [T0] * lanes
    intervals = []
    for k in range(n):
        if k in blocked:
            continue
        lane = min(range(lanes), key=free_at.__getitem__)
        start = free_at[lane] + rng.uniform(0, 0.002)
        stop = start + rng.uniform(0.001, 0.040)
        free_at[lane] = stop
        intervals.append(Interval(ids[k], f"gw{lane}", start, stop,
                                  "failed" if k in failed else "passed"))
    skipped = [Skipped(ids[k], f"prerequisite test_x failed ({ids[r]})", ids[r])
               for k, r in blocked.items()]
    nodes = [Node(nid, nid.split("::")[0], 10 + k % MODULE_SIZE,
                  outcome="skipped" if k in blocked else "failed" if k in failed else "passed")
             for k, nid in enumerate(ids)]
    edges = graph_export.edges_of(requires, [[] for _ in range(n)])
    pairs = [(ids[e.prerequisite], ids[e.dependent]) for e in edges]
    return nodes, edges, intervals, skipped, pairs


def timed_write(path: Path, make: Callable[[], str]) -> tuple[float, int]:
    start = time.perf_counter()
    text = make()
    path.write_text(text, encoding="utf-8")
    return time.perf_counter() - start, path.stat().st_size


def browser_seconds(browser: str, page: Path, out: Path) -> float:
    start = time.perf_counter()
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                    f"--screenshot={out}", "--window-size=1400,900", page.as_uri()],
                   capture_output=True, check=True, timeout=600)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", type=int, default=20_000)
    ap.add_argument("--lanes", type=int, default=8)
    ap.add_argument("--browser", action="store_true", help="Also time headless Chromium")
    args = ap.parse_args()
    nodes, edges, intervals, skipped, pairs = synthetic_run(args.tests, args.lanes)
    print(f"{args.tests} tests ({len(intervals)} executed, {len(skipped)} skipped), "
          f"{len(edges)} edges, {args.lanes} lanes")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        rows = [
            ("timeline .html", d / "t.html",
             lambda: timeline.render_html(intervals, skipped, pairs)),
            ("timeline .json", d / "t.json",
             lambda: timeline.render_trace(intervals, skipped, pairs)),
        ]
        rows += [(f"graph {suffix}", d / f"g{suffix}",
                  lambda s=suffix: graph_export.render(s, nodes, edges))
                 for suffix in graph_export.FORMATS]
        for name, path, make in rows:
            secs, size = timed_write(path, make)
            print(f"{name:15} {secs * 1000:8.0f} ms  {size / 1e6:6.2f} MB")
        browser = shutil.which("chromium") or shutil.which("chromium-browser")
        if args.browser and browser:
            empty = d / "empty.html"
            empty.write_text("<!DOCTYPE html><title>x</title>", encoding="utf-8")
            base = browser_seconds(browser, empty, d / "e.png")
            page = browser_seconds(browser, d / "t.html", d / "t.png")
            print(f"chromium headless: timeline page {page:.1f} s, empty page {base:.1f} s "
                  f"(difference {page - base:.1f} s)")
        elif args.browser:
            print("chromium not found; browser timing skipped")


if __name__ == "__main__":
    main()
