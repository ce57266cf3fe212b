"""The learning pass of one suite of ``real_suites.py`` under two (or more)
checkouts of the plugin, against the plain serial run, the sides rotated each
round (so that no side always runs first, after the machine rested).

    python benchmarks/find_ab.py NAME --work DIR --side DIR [--side DIR ...] --rounds R

Each side's DIR goes first on PYTHONPATH (the suite's venv then imports that
checkout's plugin); each run is ``pytest -p no:randomly ARGS --dag-find-missing
-n 2 --dag-edges=FILE`` in the suite's checkout, as ``real_suites.py --find``
runs it, and must exit 0.  Prints the best and the median wall time of each
side and of the serial run, their ratios, and the median CPU time of each
command's processes (user and system, all of them).  Compile each checkout's byte
code first (``python -m compileall``) and run with ``PYTHONDONTWRITEBYTECODE``
unset, or the first run of each side compiles.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_suites as rs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("suite", choices=sorted(rs.SUITES))
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--side", action="append", default=[], type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    suite = rs.SUITES[args.suite]
    tree = rs.checkout(suite, args.work, rs.origin(suite, {}, None))
    python = rs.venv(suite, args.work, tree)
    base = rs.suite_env(suite, python, tree)
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    sides = ["serial", *map(str, args.side)]
    times: dict[str, list[float]] = {side: [] for side in sides}
    # CPU of the command's whole process tree (each process's own, added to its
    # parent's as it is reaped): a learning pass on two cores is CPU-bound
    # where this approaches twice its wall time.
    cpu: dict[str, list[float]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory() as scratch:
        edges = Path(scratch) / "edges.json"
        for k in range(args.rounds):
            for side in sides[k % len(sides):] + sides[:k % len(sides)]:
                env = dict(base)
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                began = time.perf_counter()
                if side == "serial":
                    command = [str(python), "-m", "pytest", "-p", "no:randomly", *suite.argv,
                               "-p", "no:dagorder", "-o", f"cache_dir={scratch}/cache", "-q"]
                else:
                    env["PYTHONPATH"] = os.pathsep.join(
                        p for p in (side, env.get("PYTHONPATH", "")) if p)
                    edges.unlink(missing_ok=True)
                    command = [str(python), "-m", "pytest", "-p", "no:randomly", *suite.argv,
                               "--dag-find-missing", "-n", "2", f"--dag-edges={edges}"]
                done = subprocess.run(command, cwd=tree / suite.cwd, env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                if side != "serial" and done.returncode != 0:
                    sys.exit(f"{side}: exit {done.returncode}\n{done.stdout[-3000:]}")
                times[side].append(time.perf_counter() - began)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[side].append(after.ru_utime + after.ru_stime
                                 - before.ru_utime - before.ru_stime)
    best = min(times["serial"])
    middle = statistics.median(times["serial"])
    for side, seconds in times.items():
        low, mid = min(seconds), statistics.median(seconds)
        print(f"{side}: best {low:.2f} s ({low / best:.2f} x the serial best), "
              f"median {mid:.2f} s ({mid / middle:.2f} x the serial median); "
              f"CPU median {statistics.median(cpu[side]):.1f} s")
    print(f"{args.suite}, {args.rounds} rounds; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
