"""Stalls of tiny suites under ``-n 3`` on a busy machine.

Runs three tiny suites in rotation, ``--runs`` runs in all, each under
``-n 3`` while two CPU burners (plain Python loops this script starts and
stops itself) compete for the cores:

* ``group``: a chain of three tests in one module (an affinity group) and
  a ``dag_exclusive`` test beside it;
* ``exclusive``: four free tests and two ``dag_exclusive`` tests;
* ``resource``: six tests naming ``dag_resource("db")`` under
  ``--dag-limit db=1`` and two free ones.

Each suite keeps its pytest cache between runs, as a developer's checkout
does (recorded durations: the scheduler sees short tests from the second
run on).  Reported per suite and overall: the median and the largest wall
time, and how many runs took more than 3 x the median (target: none).  A
run that does not end within ``--timeout`` seconds counts as over.  With
``--keep DIR`` the output of every run over 3 x its suite's median is
written there; ``--plain`` runs the same suites with ``-p no:dagorder``.

Run: ``python benchmarks/stress_small.py [--runs 200] [--burners 2] [--plain]
[--minutes M] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_cpu import bytecode_env, compile_plugin  # this directory (run as a script)

BURN = "while True:\n    pass\n"

# Every process (controller and workers) logs when it sees each test event:
# the trace of a slow run shows where the time went.
TRACE = """\
import os, time

def _log(*what):
    who = os.environ.get("PYTEST_XDIST_WORKER", "ctl")
    with open("trace.log", "a") as f:
        f.write(f"{time.time():.3f} {who} {' '.join(what)}\\n")

def pytest_runtest_logstart(nodeid):
    _log("start", nodeid)

def pytest_runtest_logreport(report):
    _log(report.when, report.outcome, report.nodeid)

def pytest_sessionstart(session):
    _log("sessionstart")

def pytest_sessionfinish(session):
    _log("sessionfinish")
"""

INI = """\
[pytest]
markers =
    depends_on: x
    dag_exclusive: x
    dag_resource: x
"""

SUITES: dict[str, tuple[str, list[str]]] = {
    "group": ("""\
import time
import pytest
from pytest_dagorder import depends_on


def test_a():
    time.sleep(0.01)


@depends_on("test_a")
def test_b():
    time.sleep(0.01)


@depends_on("test_b")
def test_c():
    time.sleep(0.01)


@pytest.mark.dag_exclusive
def test_alone():
    time.sleep(0.01)
""", []),
    "exclusive": ("""\
import time
import pytest


@pytest.mark.dag_exclusive
def test_alone_first():
    time.sleep(0.01)


def test_free0():
    time.sleep(0.01)


def test_free1():
    time.sleep(0.01)


@pytest.mark.dag_exclusive
def test_alone_second():
    time.sleep(0.01)


def test_free2():
    time.sleep(0.01)


def test_free3():
    time.sleep(0.01)
""", []),
    "resource": ("\n".join(
        ["import time", "import pytest", ""]
        + [f"@pytest.mark.dag_resource('db')\ndef test_db{k}():\n    time.sleep(0.01)\n"
           for k in range(6)]
        + [f"def test_free{k}():\n    time.sleep(0.01)\n" for k in range(2)]),
        ["--dag-limit", "db=1"]),
}


def one_run(root: Path, extra: list[str], plain: bool, timeout: float) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "pytest", "-n", "3", "-v", "-p", "no:randomly", *extra]
    if plain:
        cmd = [c for c in cmd if c not in extra] + ["-p", "no:dagorder"]
    (root / "trace.log").unlink(missing_ok=True)
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=timeout,
                              env=bytecode_env())
        out = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed in {root}:\n{out[-3000:]}")
    except subprocess.TimeoutExpired as exc:
        out = f"TIMEOUT after {timeout} s\n{exc.stdout!r}"
        return float("inf"), out + (root / "trace.log").read_text()
    return time.perf_counter() - start, out + (root / "trace.log").read_text()


def test_phase(out: str) -> float:
    """Seconds from the controller's first test start to its last report (from the trace).

    Process start-up and shutdown, which a loaded machine stretches for any
    xdist run, are left out: a stall of the scheduling shows here.
    """
    times = [float(line.split()[0]) for line in out.splitlines()
             if line[:1].isdigit() and " ctl " in line and "session" not in line]
    return max(times) - min(times) if times else float("inf")


def summary(label: str, walls: list[float], phases: list[float]) -> tuple[float, int]:
    med = statistics.median(walls)
    over = sum(w > 3 * med for w in walls)
    pmed = statistics.median(phases)
    pover = sum(p > 3 * pmed for p in phases)
    print(f"| {label} | {len(walls)} | {med:.2f} | {max(walls):.2f} | {over} "
          f"| {pmed:.2f} | {max(phases):.2f} | {pover} |")
    return med, over


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--burners", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--plain", action="store_true", help="Run with -p no:dagorder")
    ap.add_argument("--keep", type=Path, help="Write the output of slow runs here")
    ap.add_argument("--minutes", type=float, help="Stop starting runs after this long")
    opts = ap.parse_args()
    compile_plugin()
    walls: dict[str, list[float]] = {name: [] for name in SUITES}
    outs: dict[str, list[str]] = {name: [] for name in SUITES}
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(opts.burners)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, (body, _) in SUITES.items():
                root = Path(tmp, name)
                root.mkdir()
                (root / "pytest.ini").write_text(INI)
                (root / "conftest.py").write_text(TRACE)
                (root / f"test_{name}.py").write_text(body)
            names = list(SUITES)
            end = None if opts.minutes is None else time.monotonic() + 60 * opts.minutes
            for k in range(opts.runs):
                if end is not None and time.monotonic() > end:
                    break
                name = names[k % len(names)]
                wall, out = one_run(Path(tmp, name), SUITES[name][1], opts.plain, opts.timeout)
                walls[name].append(wall)
                outs[name].append(out)
                if wall > 10:
                    print(f"run {k} ({name}): {wall:.1f} s", file=sys.stderr, flush=True)
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()
    side = "plain xdist (-p no:dagorder)" if opts.plain else "pytest-dagorder"
    done = sum(map(len, walls.values()))
    print(f"\n{side}, -n 3, {opts.burners} busy processes beside, {done} runs\n")
    print("| suite | runs | wall: median (s) | max (s) | over 3 x median "
          "| test phase: median (s) | max (s) | over 3 x median |")
    print("|---|---|---|---|---|---|---|---|")
    total = 0
    for name in SUITES:
        med, over = summary(name, walls[name], [test_phase(out) for out in outs[name]])
        total += over
        if opts.keep is not None:
            opts.keep.mkdir(parents=True, exist_ok=True)
            for k, (w, out) in enumerate(zip(walls[name], outs[name], strict=True)):
                if w > 3 * med:
                    (opts.keep / f"{name}-{k}.txt").write_text(out)
    print(f"\nruns over 3 x their suite's median: {total}")


if __name__ == "__main__":
    main()
