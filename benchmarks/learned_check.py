"""Correctness with a learned edges file: the default's outcomes against serial, run after run.

For each suite of ``real_suites.py`` (set up under ``--work``, run in its
folder there, never checked out again) and the planted suite of
``gen_undeclared.py`` (``--planted DIR``):

* the learning pass, when its file is not there yet (or ``--learn``):
  ``--dag-find-missing -n 2 --dag-edges=EDGES/NAME.json``, timed;
* one serial run (``-p no:dagorder``), its outcomes from junit XML;
* the plan's runs of ``-p dagorder -n N --dag-edges=EDGES/NAME.json``, each
  compared test by test with the serial outcomes.  A plan item is ``Nc``
  (a fresh cache: no recorded durations) or ``Nw`` (the cache the previous
  run with the same ``-n`` left: its durations).  The default plan is
  ``-n 2`` cold 3 times, warm twice, then the same with ``-n 3``.

Prints, per suite, "k of R runs gave the serial outcomes" and, for every run
that did not, the tests that differ (its output is kept in ``--keep``).
The plugin is imported from this checkout (put first on ``PYTHONPATH``).

Run: ``python benchmarks/learned_check.py --work /work/suites --suites
shapepy,photoidx [--planted DIR] [--edges /tmp/learned] [--plan 2c,2w,3c]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_undeclared import clean
from real_suites import PG_PORT, ROOT, SUITES, Run, Suite, pytest_run, service, sh, suite_env

PLAN = "2c,2c,2c,2w,2w,3c,3c,3c,3w,3w"
PLANTED = Suite("planted", "", "", (), ())


def fresh(suite: Suite, tree: Path, env: dict[str, str]) -> None:
    """Each run starts as a checkout: the planted suite without what the last run
    wrote; a suite with a database server with its database made anew (its
    tests commit rows a second run would find)."""
    if suite is PLANTED:
        clean(tree)
    if suite.service == "postgres":
        psql = ["psql", "-h", "127.0.0.1", "-p", str(PG_PORT), "-U", "postgres", "-q", "-c"]
        sh([*psql, "DROP DATABASE IF EXISTS db_test WITH (FORCE)"])
        sh([*psql, "CREATE DATABASE db_test"])
        for step in suite.prepare:
            sh(list(step), cwd=tree / suite.cwd, env=env)


def learn(suite: Suite, python: Path, tree: Path, env: dict[str, str], edges: Path,
          keep: Path) -> str:
    edges.unlink(missing_ok=True)
    fresh(suite, tree, env)
    began = time.perf_counter()
    done = sh([str(python), "-m", "pytest", "-p", "no:randomly", *suite.argv,
               "--dag-find-missing", "-n", "2", f"--dag-edges={edges}"],
              cwd=tree / suite.cwd, env=env, check=False)
    took = time.perf_counter() - began
    out = keep / f"{suite.name}-learn.txt"
    out.write_text(done.stdout, encoding="utf-8")
    said = [line for line in done.stdout.splitlines() if line.startswith("dagorder:")]
    return (f"{suite.name}: learning pass {took:.0f} s, exit {done.returncode}, "
            f"output in {out}\n  " + "\n  ".join(said[-12:]))


def check(suite: Suite, python: Path, tree: Path, env: dict[str, str], edges: Path,
          plan: list[str], keep: Path) -> str:
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as raw:
        tmp = Path(raw)
        fresh(suite, tree, env)
        serial = pytest_run(python, tree, suite,
                            ["-p", "no:dagorder", "-o", f"cache_dir={tmp / 'serial-cache'}"],
                            tmp, env)
        lines.append(f"{suite.name}: serial {serial.seconds:.1f} s, "
                     f"{len(serial.outcomes)} tests")
        good = 0
        for k, item in enumerate(plan):
            n, warm = item[:-1], item.endswith("w")
            cache = tmp / f"cache-{n}"
            if not warm:
                shutil.rmtree(cache, ignore_errors=True)
            fresh(suite, tree, env)
            run: Run = pytest_run(python, tree, suite,
                                  ["-p", "dagorder", "-n", n, f"--dag-edges={edges}",
                                   "-o", f"cache_dir={cache}"], tmp, env)
            differ = sorted(t for t in serial.outcomes.keys() | run.outcomes.keys()
                            if serial.outcomes.get(t) != run.outcomes.get(t))
            header = next((line for line in run.output.splitlines()
                           if "free by evidence" in line or "affinity group" in line), "")
            if differ:
                out = keep / f"{suite.name}-run{k}-{item}.txt"
                out.write_text(run.output, encoding="utf-8")
                lines.append(f"  run {k} (-n {n} {'warm' if warm else 'cold'}): "
                             f"{len(differ)} differ, output in {out}: "
                             + "; ".join(f"{t} {serial.outcomes.get(t)} -> "
                                         f"{run.outcomes.get(t)}" for t in differ[:8]))
            else:
                good += 1
                lines.append(f"  run {k} (-n {n} {'warm' if warm else 'cold'}): serial "
                             f"outcomes, {run.seconds:.1f} s  {header.strip()[:140]}")
            print(lines[-1], flush=True)
        lines.append(f"{suite.name}: {good} of {len(plan)} runs gave the serial outcomes "
                     f"(edges file {edges})")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--work", type=Path, default=Path("/work/suites"))
    parser.add_argument("--suites", default="")
    parser.add_argument("--planted", type=Path, default=None,
                        help="the folder of a suite gen_undeclared.py wrote")
    parser.add_argument("--edges", type=Path, default=Path("/tmp/learned"))
    parser.add_argument("--keep", type=Path, default=Path("/tmp/learned/runs"))
    parser.add_argument("--plan", default=PLAN)
    parser.add_argument("--learn", action="store_true", help="learn anew even if the file is there")
    parser.add_argument("--learn-only", action="store_true")
    args = parser.parse_args()
    args.edges.mkdir(parents=True, exist_ok=True)
    args.keep.mkdir(parents=True, exist_ok=True)
    plan = args.plan.split(",")
    jobs: list[tuple[Suite, Path, Path]] = []
    for name in filter(None, args.suites.split(",")):
        suite = SUITES[name]
        jobs.append((suite, args.work / name / "venv" / "bin" / "python", args.work / name / "src"))
    if args.planted is not None:
        jobs.append((PLANTED, Path(sys.executable), args.planted))
    for suite, python, tree in jobs:
        env = suite_env(suite, python, tree)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
        edges = args.edges / f"{suite.name}.json"
        with service(suite, args.work, tree, env):
            if args.learn or not edges.exists():
                print(learn(suite, python, tree, env, edges, args.keep), flush=True)
            if not args.learn_only:
                print(check(suite, python, tree, env, edges, plan, args.keep), flush=True)


if __name__ == "__main__":
    main()
