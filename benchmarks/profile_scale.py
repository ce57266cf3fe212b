"""Where the seconds of a big ``-n 2`` run go: cProfile of the controller and of a worker.

Generates the suite of ``bench_scale.py`` (20 modules x 1,000 trivial tests,
about 38,000 edges by default), runs ``python -m cProfile -o`` on the
controller and, through a conftest, profiles each worker from
``pytest_configure`` to ``pytest_unconfigure``.  Prints, per process, the
own time by package (pytest-dagorder, pytest, xdist, execnet, pluggy, the
rest) and the top functions by own and by cumulative time.

Run: ``python benchmarks/profile_scale.py [--modules 20 --tests 1000] [-n 2] [--top 25]
[--plain] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_cpu import bytecode_env, compile_plugin
from bench_scale import edges_of, write_suite

PROFILE_CONFTEST = '''

import cProfile as _cProfile

_PROFILE_DIR = os.environ.get("PROFILE_SCALE_OUT")
_profiler = []


def pytest_configure(config):
    if _PROFILE_DIR and os.environ.get("PYTEST_XDIST_WORKER"):
        _profiler.append(_cProfile.Profile())
        _profiler[0].enable()


def pytest_runtest_call(item):
    if os.environ.get("PROFILE_SCALE_STARTUP"):
        raise AssertionError("--startup: the first test fails, -x ends the run")


def pytest_unconfigure(config):
    if _profiler:
        _profiler[0].disable()
        _profiler[0].dump_stats(os.path.join(
            _PROFILE_DIR, os.environ["PYTEST_XDIST_WORKER"] + ".prof"))
'''

PACKAGES = [
    ("pytest-dagorder", "pytest_dagorder"),
    ("pytest", "_pytest"),
    ("xdist", "xdist"),
    ("execnet", "execnet"),
    ("pluggy", "pluggy"),
]


def package_of(filename: str) -> str:
    for label, marker in PACKAGES:
        if f"/{marker}/" in filename:
            return label
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins"
    return "other"


def report(path: Path, title: str, top: int) -> None:
    stats = pstats.Stats(str(path))
    raw = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    by_pkg: dict[str, float] = {}
    for (filename, _line, _func), (_cc, _nc, tt, _ct, _callers) in raw.items():
        pkg = package_of(filename)
        by_pkg[pkg] = by_pkg.get(pkg, 0.0) + tt
    print(f"\n### {title}: {total:.2f} s of own time profiled")
    print("| package | own s | share |")
    print("|---|---:|---:|")
    for pkg, tt in sorted(by_pkg.items(), key=lambda kv: -kv[1]):
        print(f"| {pkg} | {tt:.2f} | {tt / total:.0%} |")
    for key, label in (("tottime", "own"), ("cumulative", "cumulative")):
        print(f"\nTop {top} by {label} time ({title}):")
        print("| function | calls | own s | cumulative s |")
        print("|---|---:|---:|---:|")
        rows = sorted(raw.items(), key=lambda kv: -kv[1][2 if key == "tottime" else 3])[:top]
        for (filename, line, func), (_cc, nc, tt, ct, _callers) in rows:
            short = filename.split("site-packages/")[-1].split("wt-scale/")[-1]
            print(f"| {short}:{line}({func}) | {nc} | {tt:.3f} | {ct:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modules", type=int, default=20)
    ap.add_argument("--tests", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-n", type=int, default=2)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--plain", action="store_true",
                    help="profile plain xdist (the same files, -p no:dagorder) instead")
    ap.add_argument("--startup", action="store_true",
                    help="profile the start only: the first test fails and -x ends the run "
                         "(one run, not warmed up)")
    ap.add_argument("--keep", type=Path, help="write suite and profiles here and keep them")
    opts = ap.parse_args()
    compile_plugin()
    with tempfile.TemporaryDirectory() as t:
        tmp = opts.keep or Path(t)
        suite = tmp / ("plain" if opts.plain else "dag")
        deps = edges_of(opts.modules, opts.tests, opts.seed, two_always=False)
        edges = write_suite(suite, deps, declare=True)
        with (suite / "conftest.py").open("a") as f:
            f.write(PROFILE_CONFTEST)
        out = tmp / "profiles"
        out.mkdir(exist_ok=True)
        env = bytecode_env(PROFILE_SCALE_OUT=str(out))
        args = ["-q", "-n", str(opts.n), *(["-p", "no:dagorder"] if opts.plain else [])]
        if opts.startup:
            env["PROFILE_SCALE_STARTUP"] = "1"
            args.append("-x")
        # Twice: the first run writes bytecode and records durations.
        for _ in range(1 if opts.startup else 2):
            proc = subprocess.run(
                [sys.executable, "-m", "cProfile", "-o", str(out / "controller.prof"),
                 "-m", "pytest", *args], cwd=suite, env=env, capture_output=True, text=True)
            # cProfile swallows pytest's exit status: read the summary line instead.
            last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
            ok = ("stopping after" in proc.stdout if opts.startup
                  else " passed" in last and " failed" not in last and "error" not in last)
            if not ok:
                raise SystemExit(proc.stdout[-3000:] + proc.stderr[-2000:])
        print(f"{opts.modules * opts.tests:,} tests, {edges:,} edges, -n {opts.n}, "
              f"{'plain xdist' if opts.plain else 'pytest-dagorder'}; "
              f"{proc.stdout.strip().splitlines()[-1]}")
        report(out / "controller.prof", "controller", opts.top)
        report(out / "gw0.prof", "worker gw0", opts.top)


if __name__ == "__main__":
    main()
