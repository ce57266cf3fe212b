"""CPU cost of DAG scheduling under xdist on trivial tests.

2,000 no-op tests as 40 chains of 50 (one module per chain), run at ``-n 2``:
the CPU time (user + system, controller and workers together) of
pytest-dagorder against plain ``--dist load`` (``-p no:dagorder``), on the
same tests without declarations and on the same files (the markers
registered in pytest.ini, so plain pytest pays for reading the decorators
but warns about nothing).  Every command runs ``--rounds`` times,
interleaved; the minimum counts (noise only ever adds time), and beside it
the median of the per-round ratios.

Run: ``python benchmarks/bench_cpu.py [--chains 40] [--length 50] [--rounds 3]``.

For an A/B of the plugin itself (a speed trick taken out, say), ``--ab DIR``
adds the plugin found in DIR (another checkout, put first on
``PYTHONPATH``) to every round; ``-n 0`` runs serially; ``--no-bytecode``
runs as CI containers do (``PYTHONDONTWRITEBYTECODE=1``, no bytecode of
pytest's assertion rewriter left from an earlier run).
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_suite(root: Path, chains: int, length: int, declare: bool) -> None:
    root.mkdir(parents=True, exist_ok=True)
    # The marker registered: the same files run with the plugin blocked too.
    (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    depends_on: x\n" if declare
                                     else "[pytest]\n")
    for c in range(chains):
        lines = ["from pytest_dagorder import depends_on", ""]
        for j in range(length):
            if declare and j:
                lines.append(f'@depends_on("test_{j - 1}")')
            lines.append(f"def test_{j}():\n    pass\n")
        (root / f"test_chain{c:02d}.py").write_text("\n".join(lines))


def cpu_of(root: Path, args: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one pytest run and all the processes it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True,
                          env=env if env is not None else dict(os.environ, PYTHONHASHSEED="0"))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def run_env(checkout: str | None, no_bytecode: bool) -> dict[str, str]:
    """A measured run's environment: the plugin from ``checkout`` (None: the installed one)."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    if checkout is not None:
        env["PYTHONPATH"] = checkout
    if no_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        for tree in (checkout, str(Path(__file__).resolve().parent.parent)):
            if tree is not None:  # the rewriter's own bytecode, from a run that wrote it
                for pyc in glob.glob(f"{tree}/pytest_dagorder/**/*-pytest-*.pyc",
                                     recursive=True):
                    os.remove(pyc)
    return env


def compile_plugin(checkout: str | None = None) -> None:
    """Byte-compile the plugin, as installing it from a wheel or sdist does.

    An editable install under PYTHONDONTWRITEBYTECODE (this project's CI
    machines set it) compiles the plugin's sources anew in every process,
    the controller and every worker, which plain xdist, whose modules were
    compiled when pip installed them, does not pay.
    """
    import compileall

    import pytest_dagorder

    compileall.compile_dir(str(Path(pytest_dagorder.__file__).parent), quiet=1)
    if checkout is not None:
        compileall.compile_dir(str(Path(checkout, "pytest_dagorder")), quiet=1)


def bytecode_env(**extra: str) -> dict[str, str]:
    """The environment of a measured run: hash seed fixed, bytecode written.

    Bytecode of the test modules too, as on a developer's machine (this
    project's CI machines set PYTHONDONTWRITEBYTECODE).
    """
    env = dict(os.environ, PYTHONHASHSEED="0", **extra)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--chains", type=int, default=40)
    ap.add_argument("--length", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=2, help="workers (0: a serial run)")
    ap.add_argument("--ab", metavar="DIR", help="also the plugin of another checkout")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="PYTHONDONTWRITEBYTECODE=1, no assertion-rewriter bytecode")
    opts = ap.parse_args()
    compile_plugin(opts.ab)
    n = ["-n", str(opts.n)] if opts.n else ["-p", "no:xdist"]
    label = "plain xdist --dist load" if opts.n else "plain pytest"
    plain_run, same_run = f"{label} (no declarations)", f"{label} (same files)"
    with tempfile.TemporaryDirectory() as tmp:
        dag, plain = Path(tmp, "dag"), Path(tmp, "plain")
        write_suite(dag, opts.chains, opts.length, declare=True)
        write_suite(plain, opts.chains, opts.length, declare=False)
        runs = {
            plain_run: (plain, [*n, "-p", "no:dagorder"], None),
            same_run: (dag, [*n, "-p", "no:dagorder"], None),
            "dagorder, default affinity": (dag, n, None),
            "dagorder, affinity none": (dag, [*n, "--dag-affinity=none"], None),
        }
        if opts.ab:
            runs["dagorder from --ab, default affinity"] = (dag, n, opts.ab)
            runs["dagorder from --ab, affinity none"] = (dag, [*n, "--dag-affinity=none"],
                                                         opts.ab)
        best: dict[str, tuple[float, float]] = {}
        rounds: list[dict[str, float]] = []
        for k in range(opts.rounds):
            this: dict[str, float] = {}
            order = list(runs.items())
            for name, (root, args, checkout) in order if k % 2 == 0 else order[::-1]:
                cpu, wall = cpu_of(root, args, run_env(checkout, opts.no_bytecode))
                this[name] = cpu
                old = best.get(name)
                best[name] = (min(cpu, old[0]), min(wall, old[1])) if old else (cpu, wall)
            rounds.append(this)
    print(f"{opts.chains} chains x {opts.length} tests, -n {opts.n}, best of {opts.rounds}"
          + (", no bytecode written" if opts.no_bytecode else ""))
    print("| run | CPU s | / plain | / plain, same files | median of per-round ratios "
          "(plain; same files) | wall s |")
    print("|---|---|---|---|---|---|")
    for name, (cpu, wall) in best.items():
        # Paired: each round's run against the plain runs next to it, so a
        # slow phase of the machine weighs on both sides of a ratio.
        paired = [statistics.median(r[name] / r[base] for r in rounds)
                  for base in (plain_run, same_run)]
        print(f"| {name} | {cpu:.2f} | {cpu / best[plain_run][0]:.2f} "
              f"| {cpu / best[same_run][0]:.2f} "
              f"| {paired[0]:.2f}; {paired[1]:.2f} | {wall:.2f} |")


if __name__ == "__main__":
    main()
