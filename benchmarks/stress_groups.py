"""Stress: suites whose tests keep state in their group's process, run again and again.

Two suites from the end-to-end tests, each run ``--rounds`` times in a fresh
directory under ``-n 3`` (``--n`` to change), counting runs that did not
pass every test:

* ``exclusive``: a module chain ``setup -> exclusive reader -> after`` with
  module state, an ``xdist_group`` member marked ``dag_exclusive``, a
  ``dag_resource`` member of a module chain, and free tests
  (tests/test_e2e_exclusive_groups.py);
* ``documents``: a 15-item and a 3-item document of a conftest collector
  whose items share one namespace, plus declared tests
  (tests/test_e2e_documents.py).

Run: ``python benchmarks/stress_groups.py [--rounds 20] [--n 3] [--suite exclusive]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from helpers import prelude  # noqa: E402
from test_e2e_documents import CONFTEST, DECLARED, DOCUMENTS  # noqa: E402
from test_e2e_exclusive_groups import SUITE  # noqa: E402

EXPECTED = {"exclusive": "20 passed", "documents": "21 passed"}


class _Dir:
    """What helpers.prelude needs of a pytester: its path."""

    def __init__(self, path: Path) -> None:
        self.path = path


def write(suite: str, where: Path) -> None:
    where.joinpath("pytest.ini").write_text("[pytest]\nfilterwarnings =\n    error\n")
    head = prelude(_Dir(where))  # type: ignore[arg-type]
    if suite == "exclusive":
        modules = SUITE
    else:
        where.joinpath("conftest.py").write_text(textwrap.dedent(CONFTEST))
        for name, text in DOCUMENTS.items():
            where.joinpath(name).write_text(text)
        modules = {"test_declared": DECLARED}
    for name, body in modules.items():
        where.joinpath(f"{name}.py").write_text(head + textwrap.dedent(body))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--n", default="3")
    ap.add_argument("--suite", choices=[*EXPECTED, "all"], default="all")
    args = ap.parse_args()
    suites = list(EXPECTED) if args.suite == "all" else [args.suite]
    for suite in suites:
        bad = 0
        began = time.perf_counter()
        for k in range(args.rounds):
            with tempfile.TemporaryDirectory() as tmp:
                where = Path(tmp)
                write(suite, where)
                proc = subprocess.run(
                    [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                     "-n", args.n, "-p", "dagorder"],
                    cwd=where, capture_output=True, text=True, timeout=300)
                last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
                if proc.returncode != 0 or EXPECTED[suite] not in last:
                    bad += 1
                    print(f"{suite} round {k}: exit {proc.returncode}: {last}")
        print(f"{suite}: {args.rounds} runs under -n {args.n}, {bad} failed "
              f"({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
