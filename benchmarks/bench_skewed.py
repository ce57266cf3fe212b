"""Suites without dependencies: longest first from recorded durations, and resource limits.

Two cases, each measured as makespan (first test start to last test end, from
a recorder conftest), best of ``--rounds`` runs with the sides alternated in
every round:

* ``skewed``: 40 tests of 0.05 s, then 6 tests of 1 s collected last, no
  declarations.  plain xdist ``--dist load`` and ``--dist worksteal``
  (``-p no:dagorder``) against pytest-dagorder on a first run (nothing
  recorded: collection order) and on a second run (recorded durations rank
  the tests: the 1 s tests start first).  The bound is max(longest test,
  work / N) = 2.0 s at ``-n 4``.
* ``resources``: 12 tests marked ``dag_resource("db")`` and 12 free ones,
  0.1 s each, ``--dag-limit db=2``: the makespan against
  max(resource work / 2, all work / 4), and the most resource tests seen
  running at once.

Run: ``python benchmarks/bench_skewed.py [-n 4] [--rounds 5] [--cases skewed,resources]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from bench_xdist import RECORDER, run_recorded  # this directory (run as a script)


def skewed_suite() -> str:
    lines = ["import time", "import pytest", ""]
    lines += [f"def test_short{i}():\n    time.sleep(0.05)\n" for i in range(40)]
    lines += [f"def test_long{i}():\n    time.sleep(1.0)\n" for i in range(6)]
    return "\n".join(lines)


def resource_suite() -> str:
    lines = ["import time", "import pytest", ""]
    for i in range(12):
        lines.append(f"@pytest.mark.dag_resource('db')\ndef test_db{i}():\n    time.sleep(0.1)\n")
        lines.append(f"def test_free{i}():\n    time.sleep(0.1)\n")
    return "\n".join(lines)


def write(root: Path, body: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "conftest.py").write_text(RECORDER)
    (root / "test_suite.py").write_text(body)
    (root / "pytest.ini").write_text("[pytest]\n")


def run(root: Path, args: list[str]) -> list[tuple[str, float, float]]:
    """One run with pytest's cache on (the second run ranks by recorded durations)."""
    return run_recorded(root, ["-p", "no:randomly", *args], cache=True)


def makespan(rows: list[tuple[str, float, float]]) -> float:
    return max(e for _, _, e in rows) - min(s for _, s, _ in rows)


def most_at_once(rows: list[tuple[str, float, float]]) -> int:
    events = sorted([(s, 1) for _, s, _ in rows] + [(e, -1) for _, _, e in rows])
    now = best = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


def skewed(tmp: Path, n: int, rounds: int) -> None:
    root = tmp / "skewed"
    write(root, skewed_suite())
    best: dict[str, float] = {}
    for _ in range(rounds):
        # Each round: plain load, plain worksteal, ours cold (cache cleared), ours warm.
        sides = {
            "plain xdist --dist load": ["-n", str(n), "-p", "no:dagorder",
                                        "-p", "no:cacheprovider"],
            "plain xdist --dist worksteal": ["-n", str(n), "-p", "no:dagorder",
                                             "--dist", "worksteal", "-p", "no:cacheprovider"],
        }
        for label, args in sides.items():
            best[label] = min(best.get(label, 1e9), makespan(run(root, args)))
        shutil.rmtree(root / ".pytest_cache", ignore_errors=True)
        # A --dag-* option asks for the plugin: without one, a suite that
        # declares nothing is left to xdist's own scheduler.
        ours = ["-n", str(n), "--dag-affinity=none"]
        cold = makespan(run(root, ours))  # nothing recorded yet
        warm = makespan(run(root, ours))  # ranked by what the cold run recorded
        best["dagorder, first run"] = min(best.get("dagorder, first run", 1e9), cold)
        best["dagorder, second run"] = min(best.get("dagorder, second run", 1e9), warm)
    base = best["plain xdist --dist load"]
    print(f"\nskewed suite, -n {n}, best of {rounds} (bound 2.00 s)\n")
    print("| side | makespan (s) | / plain load |")
    print("|---|---|---|")
    for label, secs in best.items():
        print(f"| {label} | {secs:.2f} | {secs / base:.2f} |")


def resources(tmp: Path, n: int, rounds: int) -> None:
    root = tmp / "resources"
    write(root, resource_suite())
    spans: list[float] = []
    worst = 0
    for _ in range(rounds):
        rows = run(root, ["-n", str(n), "--dag-affinity=none", "--dag-limit", "db=2",
                          "-p", "no:cacheprovider"])
        spans.append(makespan(rows))
        worst = max(worst, most_at_once([r for r in rows if r[0].startswith("test_db")]))
    bound = max(12 * 0.1 / 2, 24 * 0.1 / n)
    print(f"\nresources, -n {n}, --dag-limit db=2, best of {rounds}\n")
    print("| makespan (s) | bound (s) | / bound | most db tests at once |")
    print("|---|---|---|---|")
    print(f"| {min(spans):.2f} | {bound:.2f} | {min(spans) / bound:.2f} | {worst} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cases", default="skewed,resources")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for case in opts.cases.split(","):
            {"skewed": skewed, "resources": resources}[case](Path(tmp), opts.n, opts.rounds)


if __name__ == "__main__":
    main()
