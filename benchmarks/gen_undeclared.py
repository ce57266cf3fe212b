"""A suite with prerequisites and conflicts nobody declared, and the measurement of
``--dag-find-missing`` on it.

The suite: 300 tests in 20 modules that pass serially, with 15 undeclared
dependencies of four kinds (a file at a fixed path written in one module and
read in a later one, a row of a shared sqlite file, a module-level value of
a helper module set in one module and read in another, an environment
variable) and 3 pairs of tests that cannot run at the same time (two write
and read back one output file, one pair empties and fills one sqlite table).
Besides, 12 declared edges (``depends_on``) whose truth the generator knows:
6 whose dependent reads what its prerequisite left in the process (a value
of the helper module, a class attribute, an environment variable: they must
keep one process) and 6 whose dependent does not (it reads a file the
prerequisite wrote, which is in place whatever process ran it, or only needs
the order: evidence may free them).  ``truth.json`` beside it lists them all.

    python benchmarks/gen_undeclared.py DIR              # write the suite
    python benchmarks/gen_undeclared.py DIR --measure    # and measure the finder
    python benchmarks/gen_undeclared.py DIR --measure --keep-edges   # only the -n 4 runs
    python benchmarks/gen_undeclared.py DIR --check      # the edges.json there against the truth

``--measure``: one serial run (timed), ``--dag-find-missing -n 4 --dag-edges
edges.json`` (timed; its pytest processes counted), the findings compared
with ``truth.json`` (every one found, none extra), then ``--runs`` runs
under ``-n 4`` with the edges file, each against the serial outcomes, and
as many without it (to show the suite needs them).

``--check``: reads ``edges.json`` in DIR (what ``--dag-find-missing`` wrote)
and says, for each declared edge, whether its verdict (separable, or needs
one process) is the truth; and which undeclared needs and conflicts it found.
A verdict that frees an edge whose dependent reads in-process state is the
wrong one that changes outcomes; keeping a separable edge only costs speed.
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
#: Declared edges: (kind, same module?).  The first three kinds leave their
#: value in the process (must stay grouped); the last two do not.
DECLARED = (("proc-global", True), ("proc-global", False), ("proc-class", True),
            ("proc-class", False), ("proc-env", True), ("proc-env", False),
            ("decl-file", True), ("decl-file", False), ("decl-file", False),
            ("decl-order", True), ("decl-order", False), ("decl-order", False))
#: Each test's own work, as an integration test waits on a service.
SLEEP = 0.01
WINDOW = 0.15

HEAD = '''import json, os, pathlib, sqlite3, time
import suite_state
from pytest_dagorder import depends_on
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
    elif kind == "proc-global" and side == "write":
        lines += [f'    suite_state.put("{key}", "{key}")']
    elif kind == "proc-global":
        lines += [f'    assert suite_state.get("{key}") == "{key}"']
    elif kind == "proc-class" and side == "write":
        lines += [f'    suite_state.Registry.entries.append("{key}")']
    elif kind == "proc-class":
        lines += [f'    assert "{key}" in suite_state.Registry.entries']
    elif kind == "proc-env" and side == "write":
        lines += [f'    os.environ["DECL_{key.upper()}"] = "{key}"']
    elif kind == "proc-env":
        lines += [f'    assert os.environ.get("DECL_{key.upper()}") == "{key}"']
    elif kind == "decl-file" and side == "write":
        lines += ['    (ROOT / "data").mkdir(exist_ok=True)',
                  f'    (ROOT / "data" / "{key}.txt").write_text("{key}")']
    elif kind == "decl-file":
        lines += [f'    assert (ROOT / "data" / "{key}.txt").read_text() == "{key}"']
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
        "def get(key):\n    return _STATE.get(key)\n\n\n"
        "class Registry:\n    entries = []\n")
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
    truth["declared"] = []
    declares: dict[tuple[int, int], tuple[int, int]] = {}
    for k, (kind, same) in enumerate(DECLARED):
        if same:
            # Two free tests of one module, the writer first in collection (serial) order.
            writer, reader = next(((m, t), (m2, t2)) for m, t in free for m2, t2 in free
                                  if m2 == m and t2 > t)
            free.remove(writer)
            free.remove(reader)
        else:
            writer = take(0, MODULES - 1)
            reader = take(writer[0] + 1, MODULES)
        key = f"d{k}"
        roles[writer] = (kind, "write", key)
        roles[reader] = (kind, "read", key)
        declares[reader] = writer
        truth["declared"].append({"test": nid(reader), "after": nid(writer), "kind": kind,
                                  "separable": not kind.startswith("proc-"),
                                  "same_process": kind.startswith("proc-")})
    for m in range(MODULES):
        parts = [HEAD]
        for t in range(PER_MODULE):
            name = f"test_t{t:02d}"
            mark = f'@depends_on("{nid(declares[(m, t)])}")\n' if (m, t) in declares else ""
            parts.append(f"\n{mark}def {name}():\n{body(roles.get((m, t)), f'm{m:02d}.{name}')}\n")
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


def measure(where: Path, runs: int, *, find: bool = True, workers: str = "4") -> None:
    truth = json.loads((where / "truth.json").read_text())
    clean(where)
    serial, serial_s = pytest(where, "-rA", "-q")
    base = outcomes(serial.stdout)
    serial_cpu = LAST_CPU[0]
    print(f"serial: {sum(v == 'PASSED' for v in base.values())} passed of {len(base)} "
          f"in {serial_s:.1f} s ({serial_cpu:.1f} s CPU)", flush=True)
    if find:
        find_and_compare(where, truth, serial_s, serial_cpu)
    if find:
        check(where)
    check_runs(where, base, runs, workers)


def find_and_compare(where: Path, truth: dict[str, list[dict[str, object]]],
                     serial_s: float, serial_cpu: float) -> None:
    clean(where)
    (where / "edges.json").unlink(missing_ok=True)
    found, found_s = pytest(where, "--dag-find-missing", "-n", "4", "--dag-edges", "edges.json")
    tail = found.stdout.strip().splitlines()[-3:]
    print("\n".join(tail), flush=True)
    processes = re.search(r"(\d+) pytest processes", found.stdout)
    edges = json.loads((where / "edges.json").read_text())
    declared = {(d["test"], d["after"]) for d in truth.get("declared", [])}
    got = {(e["test"], e["after"]) for e in edges["edges"]} - declared
    want = {(n["test"], n["after"]) for n in truth["needs"]}
    got_pairs = {tuple(sorted(r["tests"])) for r in edges["resources"]}
    want_pairs = {tuple(sorted(c["tests"])) for c in truth["conflicts"]}
    print(f"edges: {len(got & want)} of {len(want)} found, {len(got - want)} extra "
          f"{sorted(got - want)}; conflicts: {len(got_pairs & want_pairs)} of {len(want_pairs)} "
          f"found, {len(got_pairs - want_pairs)} extra")
    print(f"finder: {found_s:.1f} s, {processes.group(1) if processes else '?'} pytest "
          f"processes; {found_s / serial_s:.1f} x the serial run's wall time, "
          f"{LAST_CPU[0] / serial_cpu:.1f} x its CPU time", flush=True)


def verdict(entry: dict[str, object]) -> bool | None:
    """An edges-file entry's verdict: True separable, False one process, None none given."""
    for key in ("separable", "free"):
        if isinstance(entry.get(key), bool):
            return bool(entry[key])
    said = entry.get("verdict")
    if isinstance(said, dict):
        said = said.get("verdict") or said.get("kind")
    if isinstance(said, str):
        return said.lower().replace("-", "_").replace(" ", "_") in ("separable", "free")
    return None


def check(where: Path) -> bool:
    """The verdicts of ``edges.json`` in ``where`` against the generator's truth."""
    truth = json.loads((where / "truth.json").read_text())
    edges = json.loads((where / "edges.json").read_text())
    # Verdicts live in the file's "verdicts" list (an entry of "edges" may say it too).
    by_pair = {(e["test"], e["after"]): e
               for e in [*edges.get("edges", []), *edges.get("verdicts", [])]}
    right = wrong = unknown = 0
    for d in truth["declared"]:
        entry = by_pair.get((d["test"], d["after"]))
        said = verdict(entry) if entry is not None else None
        if said is None:
            # No verdict on a declared edge: the default keeps it (safe, not free).
            unknown += 1
            mark = "no verdict (kept)"
        elif said == d["separable"]:
            right += 1
            mark = "right"
        else:
            wrong += 1
            mark = "WRONG: frees in-process state" if said else "wrong: keeps a separable edge"
        said_text = {None: "-", True: "separable", False: "one process"}[said]
        print(f"  {d['kind']:<12} {d['after']} -> {d['test']}: truth "
              f"{'separable' if d['separable'] else 'one process'}, verdict {said_text}: {mark}")
    unsafe = sum(1 for d in truth["declared"] if not d["separable"]
                 and verdict(by_pair.get((d["test"], d["after"])) or {}) is True)
    got = {(e["test"], e["after"]) for e in edges.get("edges", [])
           if (e["test"], e["after"]) not in {(d["test"], d["after"]) for d in truth["declared"]}}
    want = {(n["test"], n["after"]) for n in truth["needs"]}
    got_pairs = {tuple(sorted(r["tests"])) for r in edges.get("resources", [])}
    want_pairs = {tuple(sorted(c["tests"])) for c in truth["conflicts"]}
    print(f"declared edges: {right} right, {wrong} wrong ({unsafe} unsafe), {unknown} without a "
          f"verdict, of {len(truth['declared'])}; undeclared needs: {len(got & want)} of "
          f"{len(want)} found, {len(got - want)} extra; conflicts: "
          f"{len(got_pairs & want_pairs)} of {len(want_pairs)} found, "
          f"{len(got_pairs - want_pairs)} extra", flush=True)
    return unsafe == 0 and not (want - got)


def check_runs(where: Path, base: dict[str, str], runs: int, workers: str = "4") -> None:
    if runs < 1:
        return
    for n in workers.split(","):
        for label, extra, count in (("with the edges file", ["--dag-edges", "edges.json"], runs),
                                    ("without it", [], max(1, runs // 4))):
            same = 0
            for _ in range(count):
                clean(where)
                done, _s = pytest(where, "-n", n, "-rA", "-q", *extra)
                same += outcomes(done.stdout) == base
            print(f"-n {n} {label}: serial outcomes in {same} of {count} runs", flush=True)
    clean(where)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("where", type=Path)
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--keep-edges", action="store_true",
                        help="with --measure: check the runs against the edges.json there, "
                        "without finding again")
    parser.add_argument("--workers", default="4",
                        help="with --measure: the -n of the runs, comma-separated (2,3)")
    parser.add_argument("--check", action="store_true",
                        help="only compare the edges.json in WHERE with truth.json there")
    args = parser.parse_args()
    if args.check:
        sys.exit(0 if check(args.where) else 1)
    generate(args.where)
    if args.measure:
        measure(args.where, args.runs, find=not args.keep_edges, workers=args.workers)


if __name__ == "__main__":
    main()
