"""The learning pass of one suite of ``real_suites.py``, each line of its output
stamped with the seconds since the command started: the time of each phase
(the finder prints a line as each ends).

    python benchmarks/find_phases.py NAME --work DIR --edges FILE [--plugin CHECKOUT]

Runs ``pytest -p no:randomly ARGS --dag-find-missing -n 2 --dag-edges=FILE`` in
the suite's checkout (``real_suites.py`` sets it up), as ``--find`` does.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_suites as rs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name", choices=sorted(rs.SUITES))
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--edges", type=Path, required=True)
    parser.add_argument("--plugin", type=Path, default=None)
    args = parser.parse_args()
    suite = rs.SUITES[args.name]
    tree = rs.checkout(suite, args.work, rs.origin(suite, {}, None))
    python = rs.venv(suite, args.work, tree)
    env = rs.suite_env(suite, python, tree)
    if args.plugin is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(args.plugin), env.get("PYTHONPATH", "")) if p)
    args.edges.unlink(missing_ok=True)
    with rs.service(suite, args.work, tree, env):
        began = time.perf_counter()
        proc = subprocess.Popen(
            [str(python), "-m", "pytest", "-p", "no:randomly", *suite.argv,
             "--dag-find-missing", "-n", "2", f"--dag-edges={args.edges}"],
            cwd=tree / suite.cwd, env=env, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            print(f"{time.perf_counter() - began:7.1f} {line}", end="", flush=True)
        code = proc.wait()
    print(f"{time.perf_counter() - began:7.1f} exit {code}; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
