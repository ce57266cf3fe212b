"""What one probe copy of a suite's rootdir costs, in each of several folders.

The learning pass copies the rootdir once per probe slot (``find_missing._copy_tree``:
what ``_ignored`` leaves out, left out) into its work folder, in the temporary
directory.  This times that copy into a new folder under each ``--into`` (the
default ``/tmp`` and ``/dev/shm``) and its removal, best of ``--rounds``::

    python benchmarks/copy_cost.py --work /work/suites labgrid ensembl-genomio
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_dagorder.finder.find_missing import _copy_tree


def timed(source: Path, into: str, rounds: int) -> tuple[float, float, int]:
    """The best copy and removal seconds of ``source`` under ``into``, and its files."""
    copies, removals, files = [], [], 0
    for _ in range(rounds):
        where = Path(tempfile.mkdtemp(prefix="copy-cost-", dir=into))
        began = time.perf_counter()
        _copy_tree(source, where / source.name)
        copies.append(time.perf_counter() - began)
        files = sum(1 for p in where.rglob("*") if p.is_file())
        began = time.perf_counter()
        shutil.rmtree(where)
        removals.append(time.perf_counter() - began)
    return min(copies), min(removals), files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suites", nargs="+", help="suite names under --work (NAME/src)")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--into", action="append", default=None,
                        help="a folder to copy into (default: /tmp and /dev/shm)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for name in args.suites:
        source = args.work / name / "src"
        for into in args.into or ["/tmp", "/dev/shm"]:
            copy, removal, files = timed(source, into, args.rounds)
            print(f"{name}: {files} files copied into {into} in {copy:.3f} s "
                  f"({1000 * copy / max(files, 1):.2f} ms a file), removed in {removal:.3f} s",
                  flush=True)


if __name__ == "__main__":
    main()
