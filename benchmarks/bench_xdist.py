"""Makespan of DAG suites under xdist: pytest-dagorder against the lower bound and plain xdist.

Generates suites of sleeping tests (random DAG, chains, wide, long pole),
records when each test body started and ended, and reports

* makespan (first start to last end) / max(critical path, work / N), where
  critical path and work come from the measured body durations, for a cold
  run (nothing recorded) and a warm one (the durations the cold run recorded
  in pytest's cache rank the ready tests);
* the median per-dependency latency (prerequisite end -> dependent start);
* plain ``--dist load`` (``-p no:dagorder``) on the same tests without
  declarations, for the makespan where dependencies do not bind.

``--modules K`` spreads each shape over K test files, in collection order,
each with an autouse module-scoped fixture (a worker then keeps each file's
tests in one stretch; dependencies across files name their targets by node id).

Run: ``python benchmarks/bench_xdist.py [-n 4] [--affinity none] [--modules 6]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RECORDER = '''
import json, os, time
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    start = time.time()
    try:
        return (yield)
    finally:
        end = time.time()
        with open(os.environ["BENCH_RECORD"], "a") as f:
            f.write(json.dumps([item.nodeid, start, end]) + "\\n")
'''


def shape(name: str, rng: random.Random) -> list[tuple[str, float, list[str]]]:
    """(test name, sleep seconds, prerequisites) in collection order."""
    tests: list[tuple[str, float, list[str]]] = []
    if name == "random":
        for i in range(48):
            k = rng.randint(0, min(3, i))
            deps = sorted({f"t{rng.randrange(i)}" for _ in range(k)}) if i else []
            tests.append((f"t{i}", rng.uniform(0.05, 0.2), deps))
    elif name == "chains":
        for c in range(4):
            for j in range(10):
                tests.append((f"c{c}_{j}", 0.1, [f"c{c}_{j - 1}"] if j else []))
    elif name == "wide":
        tests.append(("root", 0.1, []))
        tests += [(f"w{i}", 0.1, ["root"]) for i in range(40)]
        tests.append(("join", 0.1, [f"w{i}" for i in range(40)]))
    elif name == "longpole":
        tests += [(f"p{j}", 0.2, [f"p{j - 1}"] if j else []) for j in range(8)]
        tests += [(f"s{i}", 0.05, []) for i in range(40)]
    elif name == "loose":
        # Dependencies that do not bind: short pairs among many free tests.
        for i in range(48):
            deps = [f"l{i - 1}"] if i % 8 == 1 else []
            tests.append((f"l{i}", rng.uniform(0.05, 0.2), deps))
    else:
        raise ValueError(name)
    return tests


MODULE_FIXTURE = '''

@pytest.fixture(scope="module", autouse=True)
def _per_module():
    yield
'''


def write_suite(root: Path, tests: list[tuple[str, float, list[str]]], declare: bool,
                modules: int = 1) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "conftest.py").write_text(RECORDER + (MODULE_FIXTURE if modules > 1 else ""))
    (root / "pytest.ini").write_text("[pytest]\n")
    if modules > 1:
        write_modules(root, tests, declare, modules)
        return
    lines = ["import time", "from pytest_dagorder import depends_on", ""]
    for name, secs, deps in tests:
        if declare and deps:
            lines.append(f"@depends_on({', '.join(map(repr, deps))})")
        lines.append(f"def test_{name}():\n    time.sleep({secs:.3f})\n")
    body = "\n".join(lines).replace("depends_on('", "depends_on('test_").replace(
        ", '", ", 'test_")
    (root / "test_suite.py").write_text(body)


def write_modules(root: Path, tests: list[tuple[str, float, list[str]]], declare: bool,
                  modules: int) -> None:
    """The suite in ``modules`` files, consecutive tests together."""
    where = {name: f"test_m{k * modules // len(tests)}.py" for k, (name, _, _) in
             enumerate(tests)}
    bodies: dict[str, list[str]] = {}
    for name, secs, deps in tests:
        lines = bodies.setdefault(where[name], ["import time",
                                                "from pytest_dagorder import depends_on", ""])
        if declare and deps:
            targets = ", ".join(repr(f"{where[d]}::test_{d}") for d in deps)
            lines.append(f"@depends_on({targets})")
        lines.append(f"def test_{name}():\n    time.sleep({secs:.3f})\n")
    for file, lines in bodies.items():
        (root / file).write_text("\n".join(lines))


def run_recorded(root: Path, args: list[str], cache: bool) -> list[tuple[str, float, float]]:
    """One pytest run of a suite with :data:`RECORDER`: (test name, body start, body end).

    ``cache``: keep pytest's cache (recorded durations) across runs.
    """
    record = root / "record.jsonl"
    record.unlink(missing_ok=True)
    env = dict(os.environ, BENCH_RECORD=str(record))
    cmd = [sys.executable, "-m", "pytest", "-q", *([] if cache else ["-p", "no:cacheprovider"]),
           *args]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    return [(r[0].split("::")[-1], r[1], r[2]) for r in rows]


def run(root: Path, args: list[str], cache: bool = False) -> list[tuple[str, float, float]]:
    """:func:`run_recorded`, the shapes' names without their ``test_`` prefix."""
    return [(name.removeprefix("test_"), a, b) for name, a, b in run_recorded(root, args, cache)]


def lower_bound(tests: list[tuple[str, float, list[str]]], dur: dict[str, float],
                n: int) -> float:
    """max(critical path, work / n) for the durations ``dur``."""
    finish: dict[str, float] = {}
    for name, _, deps in tests:  # generated in topological order
        finish[name] = dur[name] + max((finish[d] for d in deps), default=0.0)
    return max(max(finish.values()), sum(dur.values()) / n)


def analyse(tests: list[tuple[str, float, list[str]]], rows: list[tuple[str, float, float]],
            n: int) -> tuple[float, float, float]:
    start = {name: s for name, s, _ in rows}
    end = {name: e for name, _, e in rows}
    # The bound from what the bodies really took, not from their nominal sleeps.
    bound = lower_bound(tests, {name: end[name] - start[name] for name in start}, n)
    makespan = max(end.values()) - min(start.values())
    lat = [start[name] - end[d] for name, _, deps in tests for d in deps]
    return makespan, makespan / bound, statistics.median(lat) * 1000 if lat else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("--affinity", default="none")
    ap.add_argument("--shapes", default="random,chains,wide,longpole,loose")
    ap.add_argument("--seed", type=int, default=1, help="Seed of the random shapes")
    ap.add_argument("--modules", type=int, default=1,
                    help="Spread each shape over this many files with a module fixture")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="Multiply every sleep (longer tests dilute per-test overhead)")
    opts = ap.parse_args()
    rng = random.Random(opts.seed)
    print("| shape | dagorder makespan (s) | / bound | median dep latency (ms) "
          "| warm: makespan (s) | warm: / bound | plain xdist makespan, no deps (s) |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in opts.shapes.split(","):
            tests = [(t, secs * opts.scale, deps) for t, secs, deps in shape(name, rng)]
            dag, plain = Path(tmp, name, "dag"), Path(tmp, name, "plain")
            write_suite(dag, tests, declare=True, modules=opts.modules)
            write_suite(plain, tests, declare=False, modules=opts.modules)
            args = ["-n", str(opts.n), f"--dag-affinity={opts.affinity}"]
            # Cold: nothing recorded, priorities by test counts.  Warm: the
            # cold run recorded durations in the cache; the next run ranks by them.
            rows = run(dag, args, cache=True)
            makespan, ratio, latency = analyse(tests, rows, opts.n)
            warm, wratio, _ = analyse(tests, run(dag, args, cache=True), opts.n)
            prow = run(plain, ["-n", str(opts.n), "-p", "no:dagorder"])
            pspan = max(e for _, _, e in prow) - min(s for _, s, _ in prow)
            print(f"| {name} | {makespan:.2f} | {ratio:.3f} | {latency:.1f} | {warm:.2f} "
                  f"| {wratio:.3f} | {pspan:.2f} |")


if __name__ == "__main__":
    main()
