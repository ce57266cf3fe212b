"""How much of a run's gap to its DAG bound pytest-order's fences make unavoidable.

The DAG bound of the timeline (``core/bounds.py``: max(C, W/N) and the
staggered bound) counts only the dependency edges.  pytest-order's
ordinals also fence the hand-out (``core/placement.Fences``): a test of a
later stretch of ordinals starts no sooner than every test of the earlier
stretches started.  So each test's earliest start (its head) is at least
the head of every test of an earlier stretch, as well as its
prerequisites' heads plus their durations; the staggered bound over those
heads (same sweep as ``core/bounds._staggered``) is a lower bound for a
run that keeps the fences, with the durations the timeline measured.

Ordinals are read from the suite's source (``@pytest.mark.order(N)`` on a
test function, a method or its class; ``order(index=N)`` too); the plan's
order is the order of the tests in ``--dag-graph``'s file, and the fences
are where the plugin puts them in that order (``deciding/decide.fences``).

Run: ``python benchmarks/fenced_bound.py --root SUITE_ROOTDIR --graph G.dot
TIMELINE.json ...`` (``G.dot`` from ``pytest ... --collect-only
--dag-graph=G.dot``; each timeline from ``--dag-timeline=T.json`` of a run
with the same edges).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_dagorder.core.bounds import _staggered, bounds
from pytest_dagorder.deciding.decide import fences

EDGE = re.compile(r'^\s*"([^"]+)" -> "([^"]+)"', re.M)
NODE = re.compile(r'^\s*"([^"]+)" \[label', re.M)


def _order(decorators: Sequence[ast.expr]) -> int | None:
    for dec in decorators:
        if (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute)
                and dec.func.attr == "order"):
            args = [*dec.args, *(k.value for k in dec.keywords if k.arg == "index")]
            if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, int):
                return args[0].value
    return None


def ordinals(root: Path, files: set[str]) -> dict[str, int | None]:
    """Node id without parameters -> ordinal, for the test functions of ``files``."""
    out: dict[str, int | None] = {}
    for rel in sorted(files):
        tree = ast.parse((root / rel).read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                out[f"{rel}::{node.name}"] = _order(node.decorator_list)
            elif isinstance(node, ast.ClassDef):
                outer = _order(node.decorator_list)
                for m in node.body:
                    if isinstance(m, ast.FunctionDef):
                        own = _order(m.decorator_list)
                        out[f"{rel}::{node.name}::{m.name}"] = outer if own is None else own
    return out


def fenced_heads(took: Mapping[str, float], preds: Mapping[str, list[str]],
                 stretch: Mapping[str, int]) -> dict[str, float]:
    """Each test's earliest start with its prerequisites' ends and the fences
    (a later stretch starts no sooner than every earlier test started)."""
    head: dict[str, float] = {}
    pending = {t: [p for p in preds.get(t, ()) if p in took] for t in took}
    by_stretch = sorted(took, key=lambda t: stretch[t])  # stable: plan order within
    for _ in range(len(took) + 1):
        opened: dict[int, float] = {}
        for t in took:
            opened[stretch[t]] = max(opened.get(stretch[t], 0.0), head.get(t, 0.0))
        floor: dict[int, float] = {}
        best = 0.0
        for s in sorted(opened):
            floor[s] = best
            best = max(best, opened[s])
        new: dict[str, float] = {}
        done: set[str] = set()
        order: list[str] = []
        while len(order) < len(took):  # topological, by stretch then DAG
            moved = False
            for t in by_stretch:
                if t not in done and all(p in done for p in pending[t]):
                    done.add(t)
                    order.append(t)
                    moved = True
            if not moved:
                raise SystemExit("the graph has a cycle among the tests that ran")
        for t in order:
            new[t] = max([floor[stretch[t]], *(new[p] + took[p] for p in pending[t])])
        if new == head:
            break
        head = new
    return head


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--root", type=Path, required=True, help="the suite's rootdir")
    ap.add_argument("--graph", type=Path, required=True, help="--dag-graph's .dot file")
    ap.add_argument("-n", type=int, default=2)
    ap.add_argument("timelines", nargs="+", type=Path)
    a = ap.parse_args()
    dot = a.graph.read_text(encoding="utf-8")
    edges = EDGE.findall(dot)
    plan = NODE.findall(dot)
    preds: dict[str, list[str]] = {}
    for p, d in edges:
        preds.setdefault(d, []).append(p)
    for path in a.timelines:
        events = [e for e in json.loads(path.read_text(encoding="utf-8"))["traceEvents"]
                  if e["ph"] == "X"]
        took = {e["name"]: e["dur"] / 1e6 for e in events}
        span = max(e["ts"] + e["dur"] for e in events) / 1e6
        value = ordinals(a.root, {t.split("::", 1)[0] for t in plan})
        cuts = fences([value.get(t.split("[", 1)[0]) for t in plan])
        stretch = {t: sum(1 for c in cuts if c <= k) for k, t in enumerate(plan)}
        took = {t: took[t] for t in plan if t in took}
        if len(took) < len(events):
            raise SystemExit(f"{path}: tests the graph file does not name")
        dag = bounds(took, edges, {}, a.n)
        fenced = max(dag.bound, _staggered(fenced_heads(took, preds, stretch), took, a.n))
        print(f"{path}: makespan {span:.1f} s; DAG bound {dag.bound:.1f} s "
              f"({span / dag.bound:.3f} x); with the fences {fenced:.1f} s "
              f"({span / fenced:.3f} x; the fences alone {fenced / dag.bound:.3f} x the DAG bound)")


if __name__ == "__main__":
    main()
