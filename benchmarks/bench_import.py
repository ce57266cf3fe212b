"""Import time of ``from pytest_dagorder import DagScheduler, Task``, and whether it loads pytest.

Each measurement is a fresh interpreter (the import alone is timed, not the
interpreter's start); the plugin is byte-compiled first, as an install does
(this machine sets PYTHONDONTWRITEBYTECODE).  With ``--other DIR`` (another
checkout) the two sides alternate and each reports its best.

Run: ``python benchmarks/bench_import.py [--other DIR] [--rounds 10]``.
"""

from __future__ import annotations

import argparse
import compileall
import os
import subprocess
import sys
from pathlib import Path

CODE = (
    "import sys, time\n"
    "t = time.perf_counter()\n"
    "from pytest_dagorder import DagScheduler, Task\n"
    "print(time.perf_counter() - t, 'pytest' in sys.modules)\n"
)


def once(root: Path) -> tuple[float, bool]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(root)
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True,
                         text=True, check=True, cwd=root, timeout=60).stdout.split()
    return float(out[0]), out[1] == "True"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--other", type=Path, help="Another checkout to compare with")
    ap.add_argument("--rounds", type=int, default=10)
    opts = ap.parse_args()
    sides = [Path(__file__).resolve().parent.parent]
    if opts.other:
        sides.append(opts.other.resolve())
    for side in sides:
        compileall.compile_dir(str(side / "pytest_dagorder"), quiet=1)
    best: dict[Path, tuple[float, bool]] = {}
    for _ in range(opts.rounds):
        for side in sides:
            secs, loads = once(side)
            if side not in best or secs < best[side][0]:
                best[side] = (secs, loads)
    print("| checkout | import (ms, best) | loads pytest |")
    print("|---|---|---|")
    for side, (secs, loads) in best.items():
        print(f"| {side} | {secs * 1000:.1f} | {'yes' if loads else 'no'} |")


if __name__ == "__main__":
    main()
