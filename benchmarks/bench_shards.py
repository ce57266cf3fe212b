"""--dag-shard against pytest-split's algorithms, and the wall time of a part under -n 2.

The suite: about 6,400 tests in 320 components (dependency trees, a tenth of
them spanning two modules), durations skewed: 300 components of 8-24 short
tests (exponential, mean ``--short`` s), 15 of 60-100 such tests, and 5
"long" components of 20 tests of about ``--long`` s each.

Split (no pytest run): for N = 2, 4, 8, the slowest part's total against
max(total / N, largest component), and how many dependency edges each
split cuts (a cut edge is a dependent that is skipped or fails in CI),
for ours and for pytest-split's ``least_duration`` and
``duration_based_chunks`` (called directly, on the same durations; needs
``pip install 'pytest-split>=0.10'``).

Run (``--run``): the suite is written out (each test sleeps its duration),
run whole once with ``-n 2 --dag-store-durations`` to record real durations,
then the slowest part of each N is run with ``-n 2 --dag-shard K/N``: its
makespan (first test start to last test end) against the recorded bound
max(part total / 2, the part's critical path), and the process's wall time.
"group s" is the part's heaviest affinity group (``--dag-affinity module``
runs it on one worker, one test after another; ``--affinity none`` lifts
that).

Run: ``python benchmarks/bench_shards.py [--run] [--short 0.004] [--long 0.25]
[--affinity none] [--record-workers 8]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench_xdist import RECORDER, run_recorded  # this directory (run as a script)

from pytest_dagorder.core.shards import partition

Test = tuple[str, float, list[str]]  # node id, seconds, prerequisites (node ids)


def suite(short: float, long: float, seed: int = 1) -> list[Test]:
    """The tests in collection order (prerequisites first)."""
    rnd = random.Random(seed)
    kinds = ["short"] * 300 + ["wide"] * 15 + ["long"] * 5
    rnd.shuffle(kinds)
    tests: list[Test] = []
    for c, kind in enumerate(kinds):
        size = {"short": rnd.randint(8, 24), "wide": rnd.randint(60, 100), "long": 20}[kind]
        module = c // 4
        spans = rnd.random() < 0.1
        names: list[str] = []
        for j in range(size):
            m = module + 1 if spans and j >= size // 2 else module
            nid = f"tests/test_m{m:03d}.py::test_c{c:03d}_{j:03d}"
            secs = (rnd.gauss(long, long / 4) if kind == "long"
                    else rnd.expovariate(1 / short))
            deps = [names[rnd.randrange(j)]] if j else []
            tests.append((nid, max(secs, 0.0), deps))
            names.append(nid)
    return tests


def edges(tests: Sequence[Test]) -> list[tuple[str, str]]:
    return [(nid, p) for nid, _, deps in tests for p in deps]


def ours(tests: Sequence[Test], dur: dict[str, float], n: int) -> list[set[str]]:
    ids = [t[0] for t in tests]
    pos = {nid: k for k, nid in enumerate(ids)}
    split = partition(ids, [[pos[p] for p in t[2]] for t in tests], [[] for _ in tests], n,
                      recorded=dur)
    return [{ids[i] for i in split.members(k)} for k in range(n)]


def pytest_split(tests: Sequence[Test], dur: dict[str, float], n: int,
                 name: str) -> list[set[str]]:
    from pytest_split.algorithms import Algorithms

    algo: Any = Algorithms[name].value
    items = [SimpleNamespace(nodeid=t[0]) for t in tests]
    return [{it.nodeid for it in g.selected} for g in algo(n, items, dur)]


def components_max(tests: Sequence[Test], dur: dict[str, float]) -> float:
    ids = [t[0] for t in tests]
    pos = {nid: k for k, nid in enumerate(ids)}
    whole = partition(ids, [[pos[p] for p in t[2]] for t in tests], [[] for _ in tests], 1,
                      recorded=dur)
    assert whole.largest is not None
    return whole.largest.weight


def critical_path(tests: Sequence[Test], dur: dict[str, float], part: set[str]) -> float:
    finish: dict[str, float] = {}
    for nid, _, deps in tests:
        if nid in part:
            finish[nid] = dur[nid] + max((finish[d] for d in deps if d in finish), default=0.0)
    return max(finish.values(), default=0.0)


def compare(tests: Sequence[Test], dur: dict[str, float]) -> None:
    total = sum(dur.values())
    largest = components_max(tests, dur)
    es = edges(tests)
    have_pytest_split = importlib.util.find_spec("pytest_split") is not None
    if not have_pytest_split:
        print("pytest-split is not installed: ours only (pip install 'pytest-split>=0.10')")
    print(f"{len(tests):,} tests, {len(es):,} edges, total {total:.1f} s, "
          f"largest component {largest:.1f} s")
    print(f"{'N':>2}  {'splitter':<22} {'slowest s':>9} {'/ bound':>8} {'edges cut':>9}")
    for n in (2, 4, 8):
        bound = max(total / n, largest)
        for name in ("dagorder", "least_duration", "duration_based_chunks"):
            if name != "dagorder" and not have_pytest_split:
                continue
            parts = ours(tests, dur, n) if name == "dagorder" else pytest_split(
                tests, dur, n, name)
            where = {nid: k for k, p in enumerate(parts) for nid in p}
            assert len(where) == len(tests)
            slowest = max(sum(dur[nid] for nid in p) for p in parts)
            cut = sum(where[a] != where[b] for a, b in es)
            print(f"{n:>2}  {name:<22} {slowest:>9.2f} {slowest / bound:>8.3f} {cut:>9,}")


def write_suite(root: Path, tests: Sequence[Test]) -> None:
    by_file: dict[str, list[str]] = {}
    for nid, secs, deps in tests:
        path, name = nid.split("::")
        decl = ""
        if deps:
            same = [d.split("::")[1] if d.split("::")[0] == path else d for d in deps]
            decl = f"@depends_on({', '.join(map(repr, same))})\n"
        by_file.setdefault(path, ["import time", "from pytest_dagorder import depends_on", ""])
        by_file[path].append(f"{decl}def {name}():\n    time.sleep({secs!r})\n")
    for path, lines in by_file.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("\n".join(lines), encoding="utf-8")
    (root / "conftest.py").write_text(RECORDER, encoding="utf-8")
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")


def _loads(tests: Sequence[Test], dur: dict[str, float], n: int) -> list[float]:
    return [sum(dur[nid] for nid in p) for p in ours(tests, dur, n)]


def largest_group(tests: Sequence[Test], dur: dict[str, float], part: set[str]) -> float:
    """The heaviest affinity group of the part (default ``module`` affinity): one
    component's tests inside one module, which run on one worker, one after another."""
    comp: dict[str, str] = {}
    for nid, _, deps in tests:
        comp[nid] = comp[deps[0]] if deps else nid
    groups: dict[tuple[str, str], float] = {}
    for nid in part:
        key = (comp[nid], nid.split("::")[0])
        groups[key] = groups.get(key, 0.0) + dur[nid]
    return max(groups.values(), default=0.0)


def run_parts(tests: Sequence[Test], workers: int, extra: list[str],
              record_workers: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench_shards_"))
    try:
        write_suite(root, tests)
        record = root / "durations.json"
        common = ["-p", "no:randomly", "-n", str(workers), f"--dag-durations={record}", *extra]
        start = time.perf_counter()
        # The tests sleep: more workers than cores record the same durations sooner.
        recording = ["-p", "no:randomly", "-n", str(record_workers),
                     f"--dag-durations={record}", *extra, "--dag-store-durations"]
        run_recorded(root, recording, cache=False)
        print(f"recording run (whole suite, -n {record_workers}): "
              f"{time.perf_counter() - start:.1f} s")
        dur: dict[str, float] = json.loads(record.read_text(encoding="utf-8"))
        print(f"recorded total {sum(dur.values()):.1f} s over {len(dur):,} tests")
        print(f"{'N':>2} {'part':>5} {'tests':>6} {'recorded s':>10} {'bound s':>8} "
              f"{'group s':>7} {'makespan s':>10} {'/ bound':>8} {'wall s':>7} {'/ bound':>8}")
        # The slowest part of each N; for N = 8 also the part holding the
        # heaviest module-rule group (``--dag-affinity module`` runs it on one
        # worker; the default ``state`` does not, these tests share nothing).
        runs = [(n, k) for n in (2, 4, 8)
                for k in [max(range(n), key=lambda j, n=n: _loads(tests, dur, n)[j])]]
        heavy = max(range(8), key=lambda j: largest_group(tests, dur, ours(tests, dur, 8)[j]))
        if (8, heavy) not in runs:
            runs.append((8, heavy))
        for n, k in runs:
            parts = ours(tests, dur, n)
            loads = [sum(dur[nid] for nid in p) for p in parts]
            bound = max(loads[k] / workers, critical_path(tests, dur, parts[k]))
            start = time.perf_counter()
            rows = run_recorded(root, [*common, f"--dag-shard={k + 1}/{n}"], cache=False)
            wall = time.perf_counter() - start
            assert len(rows) == len(parts[k]), (len(rows), len(parts[k]))
            makespan = max(r[2] for r in rows) - min(r[1] for r in rows)
            group = largest_group(tests, dur, parts[k])
            print(f"{n:>2} {k + 1:>3}/{n} {len(rows):>6,} {loads[k]:>10.2f} {bound:>8.2f} "
                  f"{group:>7.2f} {makespan:>10.2f} {makespan / bound:>8.3f} {wall:>7.1f} "
                  f"{wall / bound:>8.3f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", action="store_true", help="also run the slowest parts")
    ap.add_argument("--short", type=float, default=0.004)
    ap.add_argument("--long", type=float, default=0.25)
    ap.add_argument("-n", type=int, default=2)
    ap.add_argument("--affinity", default=None, help="pass --dag-affinity to the runs")
    ap.add_argument("--record-workers", type=int, default=None,
                    help="workers of the run that records the durations (default: -n)")
    args = ap.parse_args()
    tests = suite(args.short, args.long)
    compare(tests, {nid: secs for nid, secs, _ in tests})
    if args.run:
        run_parts(tests, args.n, [f"--dag-affinity={args.affinity}"] if args.affinity else [],
                  args.record_workers or args.n)


if __name__ == "__main__":
    main()
