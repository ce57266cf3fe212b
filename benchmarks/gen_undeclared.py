"""A suite with prerequisites and conflicts nobody declared, and the measurement of
``--dag-find-missing`` on it.

The suite: 300 tests in 20 modules that pass serially, with 15 undeclared
dependencies of four kinds (a file at a fixed path written in one module and
read in a later one, a row of a shared sqlite file, a module-level value of
a helper module set in one module and read in another, an environment
variable) and 3 pairs of tests that cannot run at the same time (two write
and read back one output file, one pair empties and fills one sqlite table).
``truth.json`` beside it lists them.

    python benchmarks/gen_undeclared.py DIR              # write the suite
    python benchmarks/gen_undeclared.py DIR --measure    # and measure the finder
    python benchmarks/gen_undeclared.py DIR --measure --keep-edges   # only the -n 4 runs

``--measure``: one serial run (timed), ``--dag-find-missing -n 4 --dag-edges
edges.json`` (timed; its pytest processes counted), the findings compared
with ``truth.json`` (every one found, none extra), then ``--runs`` runs
under ``-n 4`` with the edges file, each against the serial outcomes, and
as many without it (to show the suite needs them).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

MODULES = 20
PER_MODULE = 15
KINDS = ("file",) * 4 + ("sqlite",) * 4 + ("global",) * 4 + ("env",) * 3
CONFLICTS = ("file", "file", "sqlite")
#: Each test's own work, as an integration test waits on a service.
SLEEP = 0.01
WINDOW = 0.15

HEAD = '''import json, os, pathlib, sqlite3, time
import suite_state
ROOT = pathlib.Path(__file__).parent
'''


def body(role: tuple[str, ...] | None, name: str) -> str:
    lines = [f"    time.sleep({SLEEP})"]
    if role is None:
        return "\n".join(lines)
    kind, side, key = role
    if kind == "file" and side == "write":
        lines += ['    (ROOT / "data").mkdir(exist_ok=True)',
                  f'    (ROOT / "data" / "{key}.json").write_text(json.dumps({{"v": "{key}"}}))']
    elif kind == "file":
        lines += [f'    assert json.loads((ROOT / "data" / "{key}.json").read_text())["v"] == '
                  f'"{key}"']
    elif kind == "sqlite" and side == "write":
        lines += ['    con = sqlite3.connect(ROOT / "shared.sqlite", timeout=30)',
                  '    with con:',
                  '        con.execute("CREATE TABLE IF NOT EXISTS kv '
                  '(k TEXT PRIMARY KEY, v TEXT)")',
                  f'        con.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", ("{key}", '
                  f'"{key}"))',
                  '    con.close()']
    elif kind == "sqlite":
        lines += ['    con = sqlite3.connect(ROOT / "shared.sqlite", timeout=30)',
                  f'    rows = con.execute("SELECT v FROM kv WHERE k = ?", ("{key}",)).fetchall()',
                  '    con.close()',
                  f'    assert rows == [("{key}",)]']
    elif kind == "global" and side == "write":
        lines += [f'    suite_state.put("{key}", "{key}")']
    elif kind == "global":
        lines += [f'    assert suite_state.get("{key}") == "{key}"']
    elif kind == "env" and side == "write":
        lines += [f'    os.environ["SUITE_{key.upper()}"] = "{key}"']
    elif kind == "env":
        lines += [f'    assert os.environ.get("SUITE_{key.upper()}") == "{key}"']
    elif kind == "conflict-file":
        lines += [f'    path = ROOT / "out" / "{key}.txt"',
                  '    path.parent.mkdir(exist_ok=True)',
                  f'    path.write_text("{name}")',
                  f'    time.sleep({WINDOW})',
                  f'    assert path.read_text() == "{name}"']
    elif kind == "conflict-sqlite":
        lines += ['    con = sqlite3.connect(ROOT / "scratch.sqlite", timeout=30)',
                  '    with con:',
                  '        con.execute("CREATE TABLE IF NOT EXISTS s (who TEXT)")',
                  '        con.execute("DELETE FROM s")',
                  f'        con.execute("INSERT INTO s VALUES (?)", ("{name}",))',
                  f'    time.sleep({WINDOW})',
                  '    rows = con.execute("SELECT who FROM s").fetchall()',
                  '    con.close()',
                  f'    assert rows == [("{name}",)]']
    return "\n".join(lines)


def generate(where: Path, seed: int = 43) -> dict[str, object]:
    rng = random.Random(seed)
    where.mkdir(parents=True, exist_ok=True)
    (where / "pytest.ini").write_text("[pytest]\n")
    (where / "suite_state.py").write_text(
        "_STATE = {}\n\n\ndef put(key, value):\n    _STATE[key] = value\n\n\n"
        "def get(key):\n    return _STATE.get(key)\n")
    free = [(m, t) for m in range(MODULES) for t in range(PER_MODULE)]
    rng.shuffle(free)
    roles: dict[tuple[int, int], tuple[str, ...]] = {}

    def take(lo: int, hi: int) -> tuple[int, int]:
        for k, (m, _t) in enumerate(free):
            if lo <= m < hi:
                return free.pop(k)
        raise RuntimeError("no free slot")

    def nid(slot: tuple[int, int]) -> str:
        return f"test_m{slot[0]:02d}.py::test_t{slot[1]:02d}"

    truth: dict[str, list[dict[str, str]]] = {"needs": [], "conflicts": []}
    for k, kind in enumerate(KINDS):
        writer = take(0, MODULES - 1)
        reader = take(writer[0] + 1, MODULES)
        key = f"{kind[0]}{k}"
        roles[writer] = (kind, "write", key)
        roles[reader] = (kind, "read", key)
        truth["needs"].append({"test": nid(reader), "after": nid(writer), "kind": kind})
    for k, kind in enumerate(CONFLICTS):
        a = take(0, MODULES // 2)
        b = take(MODULES // 2, MODULES)
        roles[a] = roles[b] = (f"conflict-{kind}", "both", f"report{k}")
        truth["conflicts"].append({"tests": [nid(a), nid(b)], "kind": kind})
    for m in range(MODULES):
        parts = [HEAD]
        for t in range(PER_MODULE):
            name = f"test_t{t:02d}"
            parts.append(f"\ndef {name}():\n{body(roles.get((m, t)), f'm{m:02d}.{name}')}\n")
        (where / f"test_m{m:02d}.py").write_text("\n".join(parts))
    (where / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


def clean(where: Path) -> None:
    """What a run of the suite leaves behind, removed (each run starts as a checkout)."""
    for name in ("data", "out"):
        shutil.rmtree(where / name, ignore_errors=True)
    for name in ("shared.sqlite", "scratch.sqlite"):
        (where / name).unlink(missing_ok=True)


#: CPU seconds (user + system) of the last :func:`pytest` call's process and its children.
LAST_CPU = [0.0]


def pytest(where: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    began = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-p", "no:randomly", *args], cwd=where, capture_output=True,
                          text=True, timeout=3600, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_CPU[0] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done, time.perf_counter() - began


def outcomes(text: str) -> dict[str, str]:
    return {m.group(2): m.group(1) for m in re.finditer(r"^(PASSED|FAILED|ERROR|SKIPPED) (\S+)",
                                                        text, re.M)}


def measure(where: Path, runs: int, *, find: bool = True) -> None:
    truth = json.loads((where / "truth.json").read_text())
    clean(where)
    serial, serial_s = pytest(where, "-rA", "-q")
    base = outcomes(serial.stdout)
    serial_cpu = LAST_CPU[0]
    print(f"serial: {sum(v == 'PASSED' for v in base.values())} passed of {len(base)} "
          f"in {serial_s:.1f} s ({serial_cpu:.1f} s CPU)", flush=True)
    if find:
        find_and_compare(where, truth, serial_s, serial_cpu)
    check_runs(where, base, runs)


def find_and_compare(where: Path, truth: dict[str, list[dict[str, object]]],
                     serial_s: float, serial_cpu: float) -> None:
    clean(where)
    (where / "edges.json").unlink(missing_ok=True)
    found, found_s = pytest(where, "--dag-find-missing", "-n", "4", "--dag-edges", "edges.json")
    tail = found.stdout.strip().splitlines()[-3:]
    print("\n".join(tail), flush=True)
    processes = re.search(r"with (\d+) pytest processes", found.stdout)
    edges = json.loads((where / "edges.json").read_text())
    got = {(e["test"], e["after"]) for e in edges["edges"]}
    want = {(n["test"], n["after"]) for n in truth["needs"]}
    got_pairs = {tuple(sorted(r["tests"])) for r in edges["resources"]}
    want_pairs = {tuple(sorted(c["tests"])) for c in truth["conflicts"]}
    print(f"edges: {len(got & want)} of {len(want)} found, {len(got - want)} extra "
          f"{sorted(got - want)}; conflicts: {len(got_pairs & want_pairs)} of {len(want_pairs)} "
          f"found, {len(got_pairs - want_pairs)} extra")
    print(f"finder: {found_s:.1f} s, {processes.group(1) if processes else '?'} pytest "
          f"processes; {found_s / serial_s:.1f} x the serial run's wall time, "
          f"{LAST_CPU[0] / serial_cpu:.1f} x its CPU time", flush=True)


def check_runs(where: Path, base: dict[str, str], runs: int) -> None:
    if runs < 1:
        return
    for label, extra, count in (("with the edges file", ["--dag-edges", "edges.json"], runs),
                                ("without it", [], max(1, runs // 4))):
        same = 0
        for _ in range(count):
            clean(where)
            done, _s = pytest(where, "-n", "4", "-rA", "-q", *extra)
            same += outcomes(done.stdout) == base
        print(f"-n 4 {label}: serial outcomes in {same} of {count} runs", flush=True)
    clean(where)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("where", type=Path)
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--keep-edges", action="store_true",
                        help="with --measure: check the runs against the edges.json there, "
                        "without finding again")
    args = parser.parse_args()
    generate(args.where)
    if args.measure:
        measure(args.where, args.runs, find=not args.keep_edges)


if __name__ == "__main__":
    main()
