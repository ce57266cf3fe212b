"""Big suites: wall time, time to the first test and peak memory against plain pytest/xdist.

Generates ``--modules`` modules of ``--tests`` trivial tests each; every test
depends on up to two earlier tests of its module (deterministic seed, about
1.9 edges per test: 20 x 1,000 tests give about 38,000 edges).  The plain
side runs the same files with the plugin off (``-p no:dagorder``), as the
issue defines it: the decorators still run at import and the markers stay
on the functions (registered in the suite's ``pytest.ini``, so unknown-mark
warnings cost nothing).  ``--undeclared`` adds plain runs of a copy without
any declaration: what declaring 38,000 edges costs before any plugin runs.

Default (20 x 1,000 tests, a few minutes): wall time of ``-n 2``, ``-n 4``
and serial, the plugin against plain pytest/xdist, pytest's cache on, each
command run once untimed first (warm: bytecode written, durations recorded),
then ``--rounds`` interleaved rounds (every other one in reverse order, so
that neither side always runs first); best of the rounds, and beside it the
median of the per-round ratios (each plugin run against the plain run of
its own round: on a shared host that cancels most drift between rounds),
and their geometric mean with its 95 % confidence interval (of wall time,
and of the CPU seconds of all processes).  Also the CPU seconds of the best
runs, how long the workers waited for their next test (median of the
rounds: a worker that runs out of work while the controller is behind is
idle time plain xdist, which keeps deep queues, does not have), and how
often the controller sent tests to a worker (each send holds up its main
thread).

``--big`` (100 x 1,000 tests, 2 edges each: 100,000 tests, about 200,000
edges): time to collect, validate and order (``--collect-only -q``, serial),
time from the command's start to the first test body under ``-n 2`` (not
run warm first: each takes minutes), and the peak RSS of the controller and
of a worker (a conftest in the generated suite writes ``ru_maxrss`` of its
process at the end of the session).

Run: ``python benchmarks/bench_scale.py [--rounds 3] [--modes=-n2,-n4,serial] [--big]
[--modules M --tests T]``.
"""

from __future__ import annotations

import argparse
import math
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench_cpu import bytecode_env, compile_plugin

# Written into each generated suite: when a process started its first test
# body, and at its end its peak RSS, its CPU seconds, the seconds the
# cyclic garbage collector paused it and, on a worker, the seconds it waited
# for its next test (files named after the process's role).
CONFTEST = '''\
import gc
import os
import resource
import time

OUT = os.environ.get("BENCH_SCALE_OUT")
ROLE = os.environ.get("PYTEST_XDIST_WORKER", "main")
_first = []
_gc = [0.0, 0.0]  # start of the current pass, total


def _gc_timer(phase, info):
    if phase == "start":
        _gc[0] = time.perf_counter()
    else:
        _gc[1] += time.perf_counter() - _gc[0]


gc.callbacks.append(_gc_timer)


_wait = [0.0, 0, 0]  # on a worker: seconds waiting for the next test, waits > 1 ms, gets
_sent = [0, 0.0]  # on an xdist controller: dispatches of tests to workers, seconds in them


def pytest_configure(config):
    # On an xdist controller: how often it sends tests to a worker, and how
    # long its main thread spends in those sends (xdist's WorkerController;
    # the plugin and xdist's own scheduling both send through it).
    if not OUT or ROLE != "main" or not config.pluginmanager.has_plugin("xdist"):
        return
    from xdist.workermanage import WorkerController

    send = WorkerController.send_runtest_some

    def timed_send(self, indices):
        start = time.perf_counter()
        try:
            return send(self, indices)
        finally:
            _sent[0] += 1
            _sent[1] += time.perf_counter() - start

    WorkerController.send_runtest_some = timed_send


def pytest_collection_finish(session):
    # On an xdist worker, from its second test on: the time it waits for the
    # controller to send its next test (xdist's worker loop reads its queue).
    if not OUT or ROLE == "main":
        return
    interactor = next((p for p in session.config.pluginmanager.get_plugins()
                       if type(p).__name__ == "WorkerInteractor"), None)
    if interactor is None:
        return
    queue = interactor.torun
    get = queue.get

    def timed_get():
        start = time.perf_counter()
        index = get()
        waited = time.perf_counter() - start
        _wait[2] += 1
        if _wait[2] > 1:
            _wait[0] += waited
            _wait[1] += waited > 0.001
        return index

    queue.get = timed_get


def pytest_runtest_call(item):
    if OUT and not _first:
        _first.append(time.time())
        with open(os.path.join(OUT, "first-" + ROLE), "w") as f:
            f.write(repr(_first[0]))


def pytest_unconfigure(config):
    if OUT:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        with open(os.path.join(OUT, "rss-" + ROLE), "w") as f:
            f.write(str(usage.ru_maxrss))
        with open(os.path.join(OUT, "cpu-" + ROLE), "w") as f:
            f.write(repr(usage.ru_utime + usage.ru_stime))
        with open(os.path.join(OUT, "gc-" + ROLE), "w") as f:
            f.write(repr(_gc[1]))
        if ROLE != "main":
            with open(os.path.join(OUT, "wait-" + ROLE), "w") as f:
                f.write(f"{_wait[0]!r} {_wait[1]}")
        elif _sent[0]:
            with open(os.path.join(OUT, "sent-main"), "w") as f:
                f.write(f"{_sent[0]} {_sent[1]!r}")
'''


def edges_of(modules: int, tests: int, seed: int, two_always: bool) -> list[list[list[int]]]:
    """Per module, per test: the earlier tests of its module it depends on."""
    rng = random.Random(seed)
    out = []
    for _ in range(modules):
        mod: list[list[int]] = []
        for j in range(tests):
            k = min(j, 2 if two_always or rng.random() < 0.9 else 1)
            mod.append(sorted(rng.sample(range(j), k)))
        out.append(mod)
    return out


def write_suite(root: Path, deps: list[list[list[int]]], declare: bool) -> int:
    """The suite under ``root``; returns its number of edges (declared or not)."""
    root.mkdir(parents=True, exist_ok=True)
    # The markers registered, so that the plain side (-p no:dagorder) warns of
    # no unknown mark: it pays for the same files, not for warnings.
    (root / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n    depends_on: pytest-dagorder\n    run_after: pytest-dagorder\n")
    (root / "conftest.py").write_text(CONFTEST)
    edges = 0
    for m, mod in enumerate(deps):
        lines = ["from pytest_dagorder import depends_on", ""] if declare else []
        for j, pre in enumerate(mod):
            edges += len(pre)
            if declare and pre:
                lines.append("@depends_on(" + ", ".join(f'"test_{p}"' for p in pre) + ")")
            lines.append(f"def test_{j}():\n    pass\n")
        (root / f"test_m{m:03d}.py").write_text("\n".join(lines))
    return edges


@dataclass
class Measure:
    wall: float
    first_test: float | None  # seconds from the command's start to the first test body
    rss_main_kib: int | None
    rss_worker_kib: int | None  # the largest worker's
    rss_children_kib: int  # RUSAGE_CHILDREN of a wrapper: the largest process of the run
    cpu_main: float | None  # CPU seconds of the controller (or the serial process)
    cpu_workers: float  # CPU seconds of all workers together
    gc_main: float | None  # seconds the cyclic GC paused the controller (serial process)
    gc_workers: float
    wait_workers: float  # seconds all workers waited for their next test (after the first)
    waits: int  # how many of those waits took over 1 ms
    sends: int  # an xdist controller's dispatches of tests to workers
    send_seconds: float  # the controller's main thread's time in those dispatches


WRAPPER = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.run(sys.argv[1:]).returncode\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(rc)\n"
)


def run(root: Path, args: list[str], expect: str) -> Measure:
    """One pytest run in ``root`` (through a wrapper that reports its children's peak RSS)."""
    with tempfile.TemporaryDirectory() as out:
        env = bytecode_env(BENCH_SCALE_OUT=out)
        cmd = [sys.executable, "-c", WRAPPER, sys.executable, "-m", "pytest", "-q", *args]
        start = time.time()
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        tail = proc.stdout[-3000:]
        if proc.returncode != 0 or not re.search(expect, proc.stdout):
            raise SystemExit(f"{' '.join(args)} in {root}: exit {proc.returncode}, "
                             f"expected /{expect}/:\n{tail}\n{proc.stderr[-2000:]}")
        files = {p.name: p.read_text() for p in Path(out).iterdir()}
    firsts = [float(v) for k, v in files.items() if k.startswith("first-")]
    workers = [int(v) for k, v in files.items() if k.startswith("rss-gw")]

    def seconds(prefix: str) -> tuple[float | None, float]:
        main = files.get(prefix + "main")
        return (None if main is None else float(main),
                sum(float(v) for k, v in files.items() if k.startswith(prefix + "gw")))

    cpu_main, cpu_workers = seconds("cpu-")
    gc_main, gc_workers = seconds("gc-")
    waits = [v.split() for k, v in files.items() if k.startswith("wait-")]
    sent = files.get("sent-main", "0 0").split()
    return Measure(
        wall=wall,
        first_test=min(firsts) - start if firsts else None,
        rss_main_kib=int(files["rss-main"]) if "rss-main" in files else None,
        rss_worker_kib=max(workers) if workers else None,
        rss_children_kib=int(proc.stderr.strip().splitlines()[-1]),
        cpu_main=cpu_main, cpu_workers=cpu_workers, gc_main=gc_main, gc_workers=gc_workers,
        wait_workers=sum(float(w[0]) for w in waits), waits=sum(int(w[1]) for w in waits),
        sends=int(sent[0]), send_seconds=float(sent[1]),
    )


def mib(kib: int | None) -> str:
    return "-" if kib is None else f"{kib / 1024:.0f}"


#: Wall seconds of every round, by run name (see compare): a host shared
#: with others drifts within a benchmark run, and the ratio of two runs taken one
#: after the other in the same round cancels most of that drift.
WALLS: dict[str, list[float]] = {}
#: CPU seconds of every round (all processes of the run), by run name: less
#: moved by other tenants of the host than wall time, which also counts the
#: time a process waited for a CPU.
CPUS: dict[str, list[float]] = {}
#: Per run name, each round's (seconds, count) of the workers' waits for work.
WAITS: dict[str, list[tuple[float, int]]] = {}
#: Per run name, each round's (dispatches, seconds in them) on the controller.
SENDS: dict[str, list[tuple[int, float]]] = {}


def compare(runs: dict[str, tuple[Path, list[str], str]], rounds: int,
            warm: bool = True) -> dict[str, Measure]:
    """Each run once untimed (``warm``), then ``rounds`` interleaved rounds; the best.

    Every other round runs in reverse order: otherwise the first run of each
    round (a plugin run) would always follow the heaviest of the round
    before (plain ``-n 4``), whose processes may still be exiting, and one
    side of every pair would always go first.
    """
    for root, args, expect in runs.values() if warm else ():
        run(root, args, expect)
    best: dict[str, Measure] = {}
    names = list(runs)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            root, args, expect = runs[name]
            m = run(root, args, expect)
            print(f"  {name}: {m.wall:.2f} s", file=sys.stderr, flush=True)
            WALLS.setdefault(name, []).append(m.wall)
            CPUS.setdefault(name, []).append((m.cpu_main or 0.0) + m.cpu_workers)
            WAITS.setdefault(name, []).append((m.wait_workers, m.waits))
            SENDS.setdefault(name, []).append((m.sends, m.send_seconds))
            if name not in best or m.wall < best[name].wall:
                best[name] = m
    return best


def round_ratios(name: str, base: str, of: dict[str, list[float]] = WALLS) -> list[float]:
    """The per-round ratios ``name`` / ``base`` (rounds are interleaved) of wall
    time, or of ``of``."""
    return [a / b for a, b in zip(of.get(name, []), of.get(base, []), strict=True)]


def paired(name: str, base: str) -> str:
    """Median of the per-round ratios ``name`` / ``base``."""
    ratios = round_ratios(name, base)
    return f"{statistics.median(ratios):.2f}" if ratios else "-"


#: Two-sided 95 % quantiles of Student's t by degrees of freedom (1-30);
#: beyond, the normal's 1.96 is within 2 %.
T_975 = (12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16,
         2.14, 2.13, 2.12, 2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06,
         2.05, 2.05, 2.05, 2.04)


def interval(ratios: list[float]) -> str:
    """Geometric mean of ``ratios`` with its 95 % confidence interval.

    Rounds are pairs run back to back, so each ratio cancels the host's
    drift between rounds but not its noise within one; the interval says
    how far the mean of that many such pairs can be trusted (t interval of
    the log ratios).  A target "at most x" holds, at this confidence, only
    if the interval's upper end is at most x.
    """
    if len(ratios) < 2:
        return "-"
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    df = len(logs) - 1
    t = T_975[df - 1] if df <= len(T_975) else 1.96
    half = t * statistics.stdev(logs) / math.sqrt(len(logs))
    low, high = math.exp(mean - half), math.exp(mean + half)
    return f"{math.exp(mean):.3f} (95 % interval {low:.3f}-{high:.3f})"


def default_case(tmp: Path, opts: argparse.Namespace) -> None:
    deps = edges_of(opts.modules, opts.tests, opts.seed, two_always=False)
    dag, bare = tmp / "dag", tmp / "plain"
    edges = write_suite(dag, deps, declare=True)
    if opts.undeclared:
        write_suite(bare, deps, declare=False)
    total = opts.modules * opts.tests
    ok = f"{total} passed"
    off = ["-p", "no:dagorder"]
    pairs = [(label, args) for label, args in (
        ("-n 2", ["-n", "2"]),
        ("-n 4", ["-n", "4"]),
        ("serial", ["-p", "no:xdist"]),
    ) if label.replace(" ", "") in opts.modes.split(",")]
    runs: dict[str, tuple[Path, list[str], str]] = {}
    for label, args in pairs:
        runs[f"dagorder {label}"] = (dag, args, ok)
        runs[f"plain {label}"] = (dag, [*args, *off], ok)
        if opts.undeclared:
            runs[f"undeclared {label}"] = (bare, [*args, *off], ok)
    best = compare(runs, opts.rounds)
    print(f"{opts.modules} modules x {opts.tests} tests = {total:,} tests, {edges:,} edges; "
          f"cache on, warm; best of {opts.rounds}")
    extra = " undeclared s (ratio) |" if opts.undeclared else ""
    print("| run | plain s | dagorder s | ratio | median of per-round ratios "
          f"| first test: plain / dagorder s |{extra}")
    print("|---|---:|---:|---:|---:|---|" + ("---:|" if extra else ""))
    for label, _ in pairs:
        p, d = best[f"plain {label}"], best[f"dagorder {label}"]
        first = ("-" if p.first_test is None or d.first_test is None
                 else f"{p.first_test:.2f} / {d.first_test:.2f}")
        row = (f"| {label} | {p.wall:.2f} | {d.wall:.2f} | {d.wall / p.wall:.2f} "
               f"| {paired(f'dagorder {label}', f'plain {label}')} | {first} |")
        if extra:
            u = best[f"undeclared {label}"]
            row += f" {u.wall:.2f} ({d.wall / u.wall:.2f}) |"
        print(row)
    for label, _ in pairs:
        ratios = round_ratios(f"dagorder {label}", f"plain {label}")
        print(f"per-round ratios {label}: " + " ".join(f"{r:.2f}" for r in ratios)
              + f"; geometric mean {interval(ratios)}")
        cpus = round_ratios(f"dagorder {label}", f"plain {label}", CPUS)
        print(f"per-round ratios of CPU seconds (all processes) {label}: "
              + " ".join(f"{r:.2f}" for r in cpus) + f"; geometric mean {interval(cpus)}")
    print("| peak RSS MiB (controller, worker) | plain | dagorder |")
    print("|---|---|---|")
    for label, _ in pairs:
        p, d = best[f"plain {label}"], best[f"dagorder {label}"]
        print(f"| {label} | {mib(p.rss_main_kib)}, {mib(p.rss_worker_kib)} "
              f"| {mib(d.rss_main_kib)}, {mib(d.rss_worker_kib)} |")
    print("| CPU s of the best runs: controller, all workers (GC pauses) | plain | dagorder |")
    print("|---|---|---|")
    for label, _ in pairs:
        p, d = best[f"plain {label}"], best[f"dagorder {label}"]
        print(f"| {label} | {cpu(p)} | {cpu(d)} |")
    xdist_table("all workers' waits for their next test, median of the rounds: "
                "s (waits over 1 ms)", pairs, waited)
    xdist_table("the controller's dispatches of tests to workers, median of the rounds: "
                "count (seconds its main thread spent sending)", pairs,
                lambda name: medians(SENDS.get(name, []), ".0f", ".2f"))


def xdist_table(title: str, pairs: list[tuple[str, list[str]]],
                cell: Callable[[str], str]) -> None:
    """A table of one figure per xdist mode (serial runs have no workers)."""
    print(f"| {title} | plain | dagorder |")
    print("|---|---|---|")
    for label, _ in pairs:
        if label != "serial":
            print(f"| {label} | {cell(f'plain {label}')} | {cell(f'dagorder {label}')} |")


def medians(rounds: Sequence[tuple[float, float]], first: str, second: str) -> str:
    """The medians of the rounds' two figures, as ``first (second)``."""
    if not rounds:
        return "-"
    return (f"{statistics.median(a for a, _ in rounds):{first}} "
            f"({statistics.median(b for _, b in rounds):{second}})")


def waited(name: str) -> str:
    rounds = WAITS.get(name, [])
    each = " ".join(f"{s:.2f}" for s, _ in rounds)
    return medians(rounds, ".2f", ".0f") + (f"; rounds: {each}" if rounds else "")


def cpu(m: Measure) -> str:
    main = "-" if m.cpu_main is None else f"{m.cpu_main:.2f} ({m.gc_main or 0.0:.2f})"
    if not m.cpu_workers:
        return main
    return f"{main}, {m.cpu_workers:.2f} ({m.gc_workers:.2f})"


def big_case(tmp: Path, opts: argparse.Namespace) -> None:
    deps = edges_of(opts.big_modules, opts.tests, opts.seed, two_always=True)
    dag = plain = tmp / "bigdag"  # the plain side: the same files, the plugin off
    edges = write_suite(dag, deps, declare=True)
    total = opts.big_modules * opts.tests
    off = ["-p", "no:dagorder"]
    # -q twice (the run's own -q too): one line per module, "test_m000.py: 1000".
    collected = rf"test_m{opts.big_modules - 1:03d}\.py: {opts.tests}\n"
    ok = f"{total} passed"
    runs: dict[str, tuple[Path, list[str], str]] = {
        "collect dagorder": (dag, ["--collect-only", "-q", "-p", "no:xdist"], collected),
        "collect plain": (plain, ["--collect-only", "-q", "-p", "no:xdist", *off],
                          collected),
    }
    # The collection runs warm up the bytecode of the test modules; the -n 2
    # runs are not repeated first (each takes minutes): the plugin's durations
    # are then not recorded yet, which changes nothing at the start.
    best = compare(runs, opts.big_rounds)
    if not opts.collect_only:
        best.update(compare({
            "-n 2 dagorder": (dag, ["-n", "2"], ok),
            "-n 2 plain": (plain, ["-n", "2", *off], ok),
        }, opts.big_rounds, warm=False))
    print(f"{opts.big_modules} modules x {opts.tests} tests = {total:,} tests, {edges:,} edges; "
          f"cache on, warm; best of {opts.big_rounds}")
    print("| run | wall s | first test s | peak RSS MiB: controller | worker | largest process |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, m in best.items():
        first = "-" if m.first_test is None or name.startswith("collect") else (
            f"{m.first_test:.2f}")
        print(f"| {name} | {m.wall:.2f} | {first} | {mib(m.rss_main_kib)} "
              f"| {mib(m.rss_worker_kib)} | {mib(m.rss_children_kib)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modules", type=int, default=20)
    ap.add_argument("--tests", type=int, default=1000, help="tests per module")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3, help="best of K (default case)")
    ap.add_argument("--modes", default="-n2,-n4,serial",
                    help="which runs of the default case (comma-separated: -n2, -n4, serial)")
    ap.add_argument("--undeclared", action="store_true",
                    help="also plain runs of a copy of the suite without declarations")
    ap.add_argument("--big", action="store_true", help="also the 100,000-test case")
    ap.add_argument("--big-only", action="store_true", help="only the 100,000-test case")
    ap.add_argument("--big-modules", type=int, default=100)
    ap.add_argument("--big-rounds", type=int, default=1)
    ap.add_argument("--collect-only", action="store_true",
                    help="big case: only --collect-only (no -n 2 runs)")
    ap.add_argument("--keep", type=Path, help="write the suites here and keep them")
    opts = ap.parse_args()
    compile_plugin()
    with tempfile.TemporaryDirectory() as t:
        tmp = opts.keep or Path(t)
        if not opts.big_only:
            default_case(tmp, opts)
        if opts.big or opts.big_only:
            big_case(tmp, opts)


if __name__ == "__main__":
    main()
