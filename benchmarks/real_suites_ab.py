"""Warm makespans of a real suite under two checkouts of the plugin, alternated, and plain xdist.

Uses ``real_suites.py``'s suites, venvs and runs (``--work`` as there): per
round, for each side (``--side NAME=DIR``: DIR put first on PYTHONPATH, so
that the suite's venv imports that checkout's plugin), a cold then a warm
``-p dagorder -n 2`` run with a fresh cache (``--edges FILE``: with
``--dag-edges=FILE``), the sides' order reversed every other round; then
plain xdist with the dependency plugins blocked (unless ``--no-plain``).
Prints each run's warm makespan, its bounds (DAG, with groups), the sum of
the test times junit recorded and the load, then the best and median per side.
``--shared-cold``: one cold run a round (by the round's first side), and
each side's warm run starts from a copy of its cache, so that the sides
order by the same recorded durations (and a round takes one cold run, not
one a side).  Warm outcomes that differ from the cold run's are printed.

Run: ``python benchmarks/real_suites_ab.py labgrid --work DIR --side new=. --side
base=OLD --edges DIR/labgrid/edges.json --rounds 3`` (``--affinity none``: every
declared edge free, where no learned file is at hand).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_suites as rs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("suite", choices=sorted(rs.SUITES))
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--side", action="append", default=[], help="NAME=DIR (repeatable)")
    ap.add_argument("--edges", default=None, help="the learned edges file (--dag-edges)")
    ap.add_argument("--no-plain", action="store_true")
    ap.add_argument("--affinity", default=None, help="--dag-affinity of the -p dagorder runs")
    ap.add_argument("--timelines", type=Path, default=None,
                    help="a folder to keep each warm run's timeline in (ROUND-SIDE.json)")
    ap.add_argument("--shared-cold", action="store_true",
                    help="one cold run a round; each side's warm run starts from its cache")
    a = ap.parse_args()
    suite = rs.SUITES[a.suite]
    tree = a.work / suite.name / "src"
    python = a.work / suite.name / "venv" / "bin" / "python"
    base_env = rs.suite_env(suite, python, tree)
    sides = [s.split("=", 1) for s in a.side]
    spans: dict[str, list[float]] = {name: [] for name, _ in sides}
    spans["plain"] = []
    for k in range(a.rounds):
        shared: Path | None = None
        with tempfile.TemporaryDirectory() as keep:
            for name, path in (sides if k % 2 == 0 else sides[::-1]):
                pythonpath = os.pathsep.join(filter(None, [str(Path(path).resolve()),
                                                           base_env.get("PYTHONPATH")]))
                env = dict(base_env, PYTHONPATH=pythonpath)
                with tempfile.TemporaryDirectory() as raw:
                    tmp = Path(raw)
                    dag = ["-p", "dagorder", "-n", "2", "-o", f"cache_dir={tmp / 'cache'}"]
                    if a.edges:
                        dag.append(f"--dag-edges={a.edges}")
                    if a.affinity:
                        dag.append(f"--dag-affinity={a.affinity}")
                    if shared is None:
                        cold = rs.pytest_run(python, tree, suite, dag, tmp, env)
                        if a.shared_cold:
                            shared = Path(keep) / "cache"
                            shutil.copytree(tmp / "cache", shared)
                    else:
                        shutil.copytree(shared, tmp / "cache")
                    if a.timelines:
                        a.timelines.mkdir(parents=True, exist_ok=True)
                        dag.append(f"--dag-timeline={a.timelines.resolve() / f'{k}-{name}.json'}")
                    warm = rs.pytest_run(python, tree, suite, dag, tmp, env)
                spans[name].append(warm.makespan)
                differ = sorted(t for t, o in warm.outcomes.items() if cold.outcomes.get(t) != o)
                print(f"round {k} {name}: warm {warm.makespan:.4g} s, DAG bound {warm.bound:.4g}, "
                      f"with groups {warm.grouped:.4g}, cold {cold.makespan:.4g}, junit sum "
                      f"{warm.tests:.4g}, load {os.getloadavg()[0]:.1f}"
                      + (f", {len(differ)} outcomes differ from the cold run's: {differ[:5]}"
                         if differ else "")
                      + f"; cold outcomes {sorted(Counter(cold.outcomes.values()).items())}",
                      flush=True)
        if not a.no_plain:
            with tempfile.TemporaryDirectory() as raw:
                plain = rs.plain_run(python, tree, suite, Path(raw), base_env)
            spans["plain"].append(plain.makespan)
            print(f"round {k} plain: {plain.makespan:.4g} s, junit sum {plain.tests:.4g}, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    for name, values in spans.items():
        if values:
            ordered = sorted(values)
            print(f"{name}: best {ordered[0]:.4g} s, median {ordered[len(ordered) // 2]:.4g} s")


if __name__ == "__main__":
    main()
