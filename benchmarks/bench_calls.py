"""Python function calls of an xdist run, plugin against plain xdist: a count noise cannot move.

On a shared host single timings of the same code move by more than the
differences one looks for; the number of function calls a run makes does
not.  Runs the suite of bench_cpu.py (2,000 no-op tests as 40 chains of
50, ``-n 2``) with every process under cProfile (a conftest starts it at
``pytest_configure``) and prints the calls per process and in total, for
plain xdist on the suite without declarations, for plain xdist on the
same files (``-p no:dagorder``) and for the plugin; ``--also PATH`` adds
the plugin found at PATH (another checkout, put first on ``PYTHONPATH``)
for an A/B.  Calls are a proxy for CPU: a call into the plugin is not
dearer than one into pytest.

Run: ``python benchmarks/bench_calls.py [--chains 40] [--length 50] [--also ../old]``.
"""

from __future__ import annotations

import argparse
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_cpu import bytecode_env, compile_plugin, write_suite

PROFILE_CONFTEST = '''
import cProfile
import os

_profile = []


def pytest_configure(config):
    _profile.append(cProfile.Profile())
    _profile[0].enable()


def pytest_unconfigure(config):
    _profile[0].disable()
    role = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    _profile[0].dump_stats(os.path.join(os.environ["BENCH_CALLS_OUT"], role + ".prof"))
'''


def count(root: Path, args: list[str], total: int, path: str | None) -> dict[str, int]:
    """Calls per process of one run (after one untimed run: bytecode, durations)."""
    out: dict[str, int] = {}
    for _ in range(2):
        with tempfile.TemporaryDirectory() as profiles:
            env = bytecode_env(BENCH_CALLS_OUT=profiles)
            if path is not None:
                env["PYTHONPATH"] = path
            proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", *args],
                                  cwd=root, env=env, capture_output=True, text=True)
            if f"{total} passed" not in proc.stdout:
                raise SystemExit(proc.stdout[-2000:] + proc.stderr[-2000:])
            out = {p.stem: sum(v[1] for v in pstats.Stats(str(p)).stats.values())  # type: ignore[attr-defined]
                   for p in Path(profiles).glob("*.prof")}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chains", type=int, default=40)
    ap.add_argument("--length", type=int, default=50)
    ap.add_argument("--also", type=Path, action="append", default=[],
                    help="another checkout of the plugin to count (repeatable)")
    opts = ap.parse_args()
    compile_plugin()
    total = opts.chains * opts.length
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        plain, dag = tmp / "plain", tmp / "dag"
        write_suite(plain, opts.chains, opts.length, declare=False)
        write_suite(dag, opts.chains, opts.length, declare=True)
        for root in (plain, dag):
            (root / "conftest.py").write_text(PROFILE_CONFTEST)
        runs = [("plain xdist (no declarations)", plain, ["-p", "no:dagorder"], None),
                ("plain xdist (same files)", dag, ["-p", "no:dagorder"], None),
                ("dagorder", dag, [], None)]
        runs += [(f"dagorder at {p}", dag, [], str(p.resolve())) for p in opts.also]
        base = 0
        print(f"{opts.chains} chains x {opts.length} tests, -n 2: Python function calls")
        print("| run | controller | workers | total | / plain |")
        print("|---|---:|---:|---:|---:|")
        for label, root, args, path in runs:
            calls = count(root, args, total, path)
            workers = sum(v for k, v in calls.items() if k.startswith("gw"))
            whole = sum(calls.values())
            base = base or whole
            print(f"| {label} | {calls.get('controller', 0):,} | {workers:,} | {whole:,} "
                  f"| {whole / base:.3f} |")


if __name__ == "__main__":
    main()
