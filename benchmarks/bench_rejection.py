"""How long a typo'd target shared by many tests takes to be reported.

One module of N tests under a module-wide ``pytestmark`` that names a
prerequisite: once spelled right (``test_base``), once with a typo
(``test_bse``, rejected with a suggestion).  Both are timed with
``--collect-only -q`` (serial, no cache); the rejection should cost about
what collection costs, whatever N.  Every command runs ``--rounds`` times
and the minimum counts (noise only ever adds time).

Run: ``python benchmarks/bench_rejection.py [--tests 1000 10000] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_suite(root: Path, tests: int, target: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    lines = ["import pytest", "", "from pytest_dagorder import depends_on", "",
             "", "def test_base():", "    pass", "",
             # Every other test inherits the declaration (test_base is exempt:
             # a module marker naming a member applies to the others).
             f"pytestmark = pytest.mark.depends_on({target!r})", ""]
    lines += [f"def test_{k}():\n    pass\n" for k in range(tests - 1)]
    (root / "test_many.py").write_text("\n".join(lines))


def seconds(root: Path, expect: int) -> float:
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
           "-p", "no:xdist"]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONHASHSEED="0"))
    wall = time.perf_counter() - start
    if proc.returncode != expect:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}, not {expect}:\n"
                         f"{proc.stdout[-2000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tests", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{'tests':>7}  {'valid (s)':>9}  {'typo (s)':>9}")
    for n in args.tests:
        with tempfile.TemporaryDirectory() as tmp:
            good, bad = Path(tmp, "good"), Path(tmp, "bad")
            write_suite(good, n, "test_base")
            write_suite(bad, n, "test_bse")
            valid, typo = [], []
            for _ in range(args.rounds):
                valid.append(seconds(good, 0))
                typo.append(seconds(bad, 2))  # a collection error
            print(f"{n:>7}  {min(valid):>9.2f}  {min(typo):>9.2f}")


if __name__ == "__main__":
    main()
