"""Real dependency suites, unedited: serial with their own plugin against ``-p dagorder -n 2``.

For each suite: a git checkout at a pinned commit (cloned from GitHub, or
an existing clone given with ``--source NAME=PATH``), a venv under
``--work`` with the suite's test requirements and this checkout (editable),
then rounds of, alternating:

* serial, with the suite's own plugins (``-p no:dagorder``), the way its
  CI runs it;
* ``-p dagorder -n 2`` twice with a fresh cache: cold (no recorded
  durations), then warm (the durations of the cold run), each writing a
  timeline whose figures give the makespan, the lower bound (max(C, W/N),
  or the staggered bound where that is tighter: see pytest_dagorder/core/bounds.py)
  and, when affinity groups ran, the bound they allow;
* the machine's parallel reference: plain xdist ``-n 2`` on the same tests
  with their dependencies ignored (``-p no:dagorder`` and the suite's
  dependency and ordering plugins blocked), its makespan taken by a small
  recorder plugin from the same report times the timeline uses (first
  setup start to last teardown end); its outcomes are only counted (tests
  that need their prerequisites' effects may fail or skip there).

Every run writes junit XML; a ``-n 2`` run whose outcomes differ from the
serial run's is reported (test ids) and counts as a failure of the suite.
Prints one row per suite: best serial time, best warm ``-n 2`` time (each
as pytest reports it, collection included), warm makespan / the bound the
constraints allow, warm makespan / serial test time, warm makespan /
plain xdist's.

``--affinity`` passes ``--dag-affinity`` to the ``-n 2`` runs (default:
the plugin's default).  The machine is usually shared: take the best of
several rounds (``--rounds``).

Run: ``python benchmarks/real_suites.py --work DIR [--suites shapepy,pynurbs]
[--rounds 3] [--source shapepy=PATH | --mirrors DIR]``.  ``--find`` runs the
learning pass instead (``--dag-find-missing -n 2``, timed against a serial
run, both wall times, alternating, best of ``--rounds``; it writes
``WORK/NAME/edges.json`` or ``--edges``); ``--learned`` makes the ``-n 2``
runs read that file.  ``--plugin DIR`` puts a checkout of this plugin first
on the suites' PYTHONPATH.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Suite:
    name: str
    repo: str  # owner/name on GitHub
    commit: str
    requirements: tuple[str, ...]
    args: tuple[str, ...]  # what the suite's CI passes to pytest, relative to the checkout
    #: Folders put on PYTHONPATH (the package's source, used without building it).
    paths: tuple[str, ...] = ()
    #: Installed from the checkout itself (``pip install -e``) instead of ``paths``.
    editable: bool = False
    #: Files its build would generate (path in the checkout, text).
    generated: tuple[tuple[str, str], ...] = ()
    #: Environment of its test runs (values are paths in the checkout).
    env: tuple[tuple[str, str], ...] = ()
    #: Its own requirements files (paths in the checkout).
    requirement_files: tuple[str, ...] = ()
    #: Folder (in the checkout) its CI runs pytest from.
    cwd: str = ""
    #: A server its tests need, started for the runs on loopback (see :func:`service`).
    service: str = ""
    #: Commands run once in ``cwd`` after the service is up (the suite's own set-up steps).
    prepare: tuple[tuple[str, ...], ...] = ()
    #: Options every run here adds (serial, ``-n``, the learning pass): tests that
    #: fail serially on this machine, modules whose imports are not installed.
    local: tuple[str, ...] = ()

    @property
    def argv(self) -> tuple[str, ...]:
        """The suite's arguments for a run on this machine."""
        return (*self.args, *self.local)


PLUGINS = ("pytest-dependency==0.6.1", "pytest-order", "pytest-timeout")
#: pytest-timeout's per-test limits (1 s on some of shapepy's tests) trip
#: whenever two workers share the CPUs with other jobs: off on both sides.
NO_TIMEOUT = ("-p", "no:timeout")
#: The plain xdist side: dependencies ignored, every plugin that declares or
#: orders them blocked (blocking one that is not installed does nothing).
PLAIN = ("-p", "no:dagorder", "-p", "no:dependency", "-p", "no:pytest_order",
         "-p", "no:depends", "-n", "2")
#: The recorder the plain side loads (``-p`` of this module name, from a
#: folder put on PYTHONPATH): the controller's first report start and last
#: report stop, written at the session's end.
SPAN_MODULE = "real_suites_span"
SPAN = '''
import json, os

span = []


def pytest_runtest_logreport(report):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        span.append((report.start, report.stop))


def pytest_sessionfinish(session):
    if span and not os.environ.get("PYTEST_XDIST_WORKER"):
        with open(os.environ["REAL_SUITES_SPAN"], "w") as f:
            json.dump([min(a for a, _ in span), max(b for _, b in span)], f)
'''

SUITES = {s.name: s for s in (
    Suite("shapepy", "compmec/shapepy", "fb7dfeb4795c2233c56a0d942eed5a597ad89fe1",
          ("numpy<2", "matplotlib", "pynurbs", *PLUGINS), ("tests", *NO_TIMEOUT), editable=True),
    Suite("pynurbs", "compmec/pynurbs", "9d97385a6f1802639ecf061b655e7f9d1c3e797c",
          ("numpy<2", *PLUGINS), ("tests", *NO_TIMEOUT), ("src",)),
    Suite("labgrid", "labgrid-project/labgrid", "ebe353518f4cd022d0c9cd3c959cb551efc405d5",
          ("pytest-dependency==0.6.1", "psutil", "pytest-mock"),
          ("tests/test_graphstrategy.py", "-p", "no:labgrid"), editable=True),
    # Its CI runs the tests against a build: the version module its setup.py
    # writes, the scripts from their folder.
    Suite("archive-tools", "RKrahl/archive-tools", "28dd450c92c940a9f6d873aa7553ae3540273c3b",
          ("pytest-dependency==0.6.1", "PyYAML", "lark", "packaging", "python-dateutil",
           "imapclient", "setuptools"),
          ("tests",), ("src",),
          generated=(("src/archive/_meta.py", 'release = version = "0"\n'),),
          env=(("BUILD_SCRIPTS_DIR", "scripts"),)),
    # Its OpenVidu test needs docker and xfails without it, as in its CI.
    Suite("slurk", "clp-research/slurk", "715471f30644818abea4b6af27728579c8c0db2b",
          ("pytest-depends==1.0.1", "docker"), ("tests",), requirement_files=("requirements.txt",)),
    # 151 modules of 4 tests: the first computes a module global (``global
    # faces``) that the other three read.  Its package folder's __init__.py
    # is Blender's add-on entry (it imports bpy), which pytest would import to
    # set the package up: emptied, as outside Blender.  The newest mathutils
    # needs Eigen's headers to build; 3.3.0 does not.
    Suite("bpypolyskel", "prochitecture/bpypolyskel", "bd1ce5b2e9dc2028595e6a3e116926e1c58e45dd",
          ("mathutils==3.3.0", "pytest-dependency==0.6.1", "pytest-timeout"),
          ("tests", *NO_TIMEOUT), generated=(("__init__.py", ""),)),
    # pytest-dependency: the 21 tests of test_03_photoidx.py edit one index
    # file through a chain of CLI calls (a module fixture's folder), each
    # declaring only some of the tests whose edits it relies on.  Its build
    # writes the package's __init__.py; the tests run the script from its
    # folder.  PySide2 is for the GUI only, which no test imports.
    Suite("photoidx", "RKrahl/photoidx", "b7771de183bc09fc0ef1d89e778e7db2f7868b58",
          ("pytest-dependency==0.6.1", "PyYAML", "ExifRead", "packaging"),
          ("tests",), (".",),
          generated=(("photoidx/__init__.py",
                      '"""Maintain indices for photo collections"""\n__version__ = "0"\n'),),
          env=(("BUILD_SCRIPTS_DIR", "scripts"),)),
    # No declarations; a module fixture creates an sqlite file at a fixed path
    # that the 22 tests of its module use.  Its CI: ``pip install -e .[cicd]``
    # (linters left out here), pytest from the root (its testpaths).
    Suite("ensembl-genomio", "Ensembl/ensembl-genomio", "ce248b0a9fd35060be903108dc367bbc4875f582",
          ("pytest-datadir", "pytest-dependency==0.6.1", "pytest-mock", "deepdiff"),
          (), editable=True,
          # Fails serially on ext4 (this machine): it expects a_agp.agp listed before
          # b_agp.agp, and Path.iterdir() gives ext4's hash order (b first).
          local=("--deselect", "src/python/tests/manifest/test_manifest.py::"
                 "test_get_files_checksum_multifiles[2 agp files with same name]")),
    # pytest-dependency with pytest-order's --order-dependencies, against a
    # PostgreSQL database its CI migrates first (the commit before the one
    # that dropped the declarations).  Its CI deselects the ``data`` tests.
    Suite("wikibase-metadata", "wmde/wikibase-metadata", "79f2a94cce33100645cfc57550973487253fd315",
          ("pytest-dependency==0.6.1", "pytest-order", "pytest-asyncio", "pytest-mock",
           "freezegun", "psycopg2-binary", "alembic-postgresql-enum"),
          ("-m", "not data", "--order-dependencies"), ("backend",),
          requirement_files=("backend/requirements.txt",), cwd="backend",
          env=(("SETTINGS_FILE", "backend/test-settings.ini"),), service="postgres",
          prepare=(("alembic", "upgrade", "head"),),
          # Its one ``data`` test's module imports great_expectations (a dev requirement,
          # not installed here): a collection error even when ``-m "not data"`` drops it.
          local=("--ignore", "tests/test_data_expectations.py")),
)}


def sh(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None,
       check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, check=check, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def origin(suite: Suite, sources: dict[str, str], mirrors: Path | None) -> str:
    """Where to clone from: ``--source``, else a mirror of ``--mirrors``, else GitHub.

    A mirror is a bare git directory ``MIRRORS/owner+name/repo`` (the layout
    of a fetched snapshot); ``--source`` takes such a directory, its parent,
    or any clone.
    """
    given = sources.get(suite.name)
    if given is None and mirrors is not None:
        given = str(mirrors / suite.repo.replace("/", "+"))
    if given is None:
        return f"https://github.com/{suite.repo}"
    path = Path(given)
    if (path / "repo").is_dir() and not (path / "HEAD").exists() and not (path / ".git").exists():
        path = path / "repo"
    return str(path)


def checkout(suite: Suite, work: Path, source: str) -> Path:
    dest = work / suite.name / "src"
    if not dest.exists():
        sh(["git", "clone", "-q", source, str(dest)])
    sh(["git", "checkout", "-q", suite.commit], cwd=dest)
    for path, text in suite.generated:
        (dest / path).write_text(text, encoding="utf-8")
    return dest


def venv(suite: Suite, work: Path, tree: Path) -> Path:
    env_dir = work / suite.name / "venv"
    python = env_dir / "bin" / "python"
    if not python.exists():
        sh([sys.executable, "-m", "venv", str(env_dir)])
        pip = [str(python), "-m", "pip", "install", "-q"]
        files = [arg for f in suite.requirement_files for arg in ("-r", str(tree / f))]
        sh([*pip, "-e", str(ROOT), *suite.requirements, *files])
        if suite.editable:
            sh([*pip, "-e", str(tree)])
    return python


@dataclass
class Run:
    seconds: float  # as pytest reports it ("N passed in X s")
    outcomes: dict[str, str]
    makespan: float = 0.0
    bound: float = 0.0  # the tightest bound without groups
    simple: float = 0.0  # max(C, W/N)
    grouped: float = 0.0  # the bound the affinity groups allow (0: no groups)
    tests: float = 0.0  # sum of the tests' times in the junit file
    output: str = ""  # what pytest printed


@dataclass
class Rows:
    serial: list[Run] = field(default_factory=list)
    cold: list[Run] = field(default_factory=list)
    warm: list[Run] = field(default_factory=list)
    plain: list[Run] = field(default_factory=list)
    differ: set[str] = field(default_factory=set)


SECONDS = re.compile(r" in ([0-9.]+)s")
FIGURES = re.compile(r"Makespan ([0-9.]+) (m?s);.*?max\(C, W/N\) = ([0-9.]+) (m?s)")
STAGGERED = re.compile(r"nor, as no test starts before its prerequisites can end, "
                       r"([0-9.]+) (m?s)")
GROUPED = re.compile(r"With affinity groups.*?no schedule beats ([0-9.]+) (m?s)")


def _s(value: str, unit: str) -> float:
    return float(value) / (1000 if unit == "ms" else 1)


def pytest_run(python: Path, tree: Path, suite: Suite, extra: list[str], tmp: Path,
               env: dict[str, str]) -> Run:
    junit = tmp / "junit.xml"
    timeline = tmp / "timeline.html"
    cmd = [str(python), "-m", "pytest", "-q", "-p", "no:randomly", *suite.argv,
           f"--junitxml={junit}", *extra]
    dag = "dagorder" in extra
    if dag:
        cmd.append(f"--dag-timeline={timeline}")
    done = sh(cmd, cwd=tree / suite.cwd, env=env, check=False)
    found = SECONDS.findall(done.stdout.splitlines()[-1] if done.stdout else "")
    if done.returncode not in (0, 1) or not found:
        raise SystemExit(f"{suite.name}: {' '.join(cmd)} exited {done.returncode}:\n"
                         f"{done.stdout[-3000:]}")
    outcomes, tests = _junit(junit)
    run = Run(float(found[-1]), outcomes, tests=tests, output=done.stdout)
    if dag:
        page = timeline.read_text(encoding="utf-8")
        fig = FIGURES.search(page)
        if fig:
            run.makespan = _s(fig[1], fig[2])
            run.simple = run.bound = _s(fig[3], fig[4])
        staggered = STAGGERED.search(page)
        if staggered:
            run.bound = max(run.bound, _s(staggered[1], staggered[2]))
        grouped = GROUPED.search(page)
        if grouped:
            run.grouped = _s(grouped[1], grouped[2])
    return run


def plain_run(python: Path, tree: Path, suite: Suite, tmp: Path, env: dict[str, str]) -> Run:
    """Plain xdist, dependencies ignored: its makespan from the :data:`SPAN` recorder."""
    (tmp / f"{SPAN_MODULE}.py").write_text(SPAN, encoding="utf-8")
    span = tmp / "span.json"
    span.unlink(missing_ok=True)
    env = dict(env, REAL_SUITES_SPAN=str(span),
               PYTHONPATH=os.pathsep.join(filter(None, (str(tmp), env.get("PYTHONPATH")))))
    # Its own cache folder: the dag side's warm run must read only its cold run.
    run = pytest_run(python, tree, suite, [*PLAIN, "-p", SPAN_MODULE,
                                           "-o", f"cache_dir={tmp / 'plain-cache'}"],
                     tmp, env)
    first, last = json.loads(span.read_text(encoding="utf-8"))
    run.makespan = last - first
    return run


def _junit(path: Path) -> tuple[dict[str, str], float]:
    outcomes: dict[str, str] = {}
    total = 0.0
    for case in ET.parse(path).getroot().iter("testcase"):
        key = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        outcomes[key] = next((k for k in ("error", "failure", "skipped") if k in kinds), "passed")
        total += float(case.get("time") or 0)
    return outcomes, total


def suite_env(suite: Suite, python: Path, tree: Path) -> dict[str, str]:
    """The environment of the suite's runs: its venv first on PATH, its paths, its variables."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join((str(python.parent), env.get("PATH", "")))
    if suite.paths:
        env["PYTHONPATH"] = os.pathsep.join(str(tree / p) for p in suite.paths)
    env.pop("PYTEST_ADDOPTS", None)
    env.update((key, str(tree / value)) for key, value in suite.env)
    return env


PG_PORT = 54329


@contextlib.contextmanager
def service(suite: Suite, work: Path, tree: Path, env: dict[str, str]) -> Iterator[None]:
    """Start the suite's server on loopback for its runs (and run its ``prepare`` steps).

    ``postgres``: a cluster under ``WORK/NAME/pg`` owned by the ``postgres``
    user (the server refuses root), trust authentication, listening on
    127.0.0.1 only; the database ``db_test`` made anew each time, its URL in
    ``DATABASE_URL``.
    """
    if suite.service != "postgres":
        yield
        return
    data = work / suite.name / "pg"
    as_pg = ["runuser", "-u", "postgres", "--"]
    if not data.exists():
        data.mkdir(parents=True)
        shutil.chown(data, "postgres", "postgres")
        sh([*as_pg, "initdb", "-D", str(data), "-U", "postgres", "--auth=trust"],
           env=dict(env, PATH=env["PATH"] + ":/usr/lib/postgresql/15/bin"))
    opts = f"-p {PG_PORT} -k {data} -c listen_addresses=127.0.0.1"
    sh([*as_pg, "pg_ctl", "-D", str(data), "-o", opts, "-w", "-t", "60", "-l",
        str(data / "log"), "start"])
    try:
        psql = ["psql", "-h", "127.0.0.1", "-p", str(PG_PORT), "-U", "postgres", "-q", "-c"]
        sh([*psql, "DROP DATABASE IF EXISTS db_test"])
        sh([*psql, "CREATE DATABASE db_test"])
        env["DATABASE_URL"] = f"postgresql+asyncpg://postgres:postgres@127.0.0.1:{PG_PORT}/db_test"
        for step in suite.prepare:
            sh(list(step), cwd=tree / suite.cwd, env=env)
        yield
    finally:
        sh([*as_pg, "pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop"], check=False)


def find(suite: Suite, python: Path, tree: Path, work: Path, env: dict[str, str],
         rounds: int = 1, edges: Path | None = None, tmpdir: Path | None = None) -> str:
    """The learning pass (``--dag-find-missing -n 2``) against the plain serial run,
    both as wall times of the whole command (interpreter start-up, collection and
    every process included), alternating, best of ``rounds`` each.

    Writes ``edges`` (default ``WORK/NAME/edges.json``, anew), which ``--learned``
    then reads.  ``tmpdir``: the learning pass's ``TMPDIR`` (where its copies
    live), the serial run's left as the environment has it.
    """
    finding = dict(env, TMPDIR=str(tmpdir)) if tmpdir is not None else env
    edges = edges or work / suite.name / "edges.json"
    serials: list[float] = []
    finds: list[float] = []
    said: list[str] = []
    done = None
    for k in range(rounds):
        for side in (("serial", "find") if k % 2 == 0 else ("find", "serial")):
            began = time.perf_counter()
            if side == "serial":
                with tempfile.TemporaryDirectory() as raw:
                    pytest_run(python, tree, suite, ["-p", "no:dagorder", "-o",
                                                     f"cache_dir={Path(raw) / 'cache'}"],
                               Path(raw), env)
                serials.append(time.perf_counter() - began)
                continue
            edges.unlink(missing_ok=True)
            done = sh([str(python), "-m", "pytest", "-p", "no:randomly", *suite.argv,
                       "--dag-find-missing", "-n", "2", f"--dag-edges={edges}"],
                      cwd=tree / suite.cwd, env=finding, check=False)
            finds.append(time.perf_counter() - began)
            said.append(f"round {k}: finder {finds[-1]:.1f} s, exit {done.returncode}")
    assert done is not None
    (work / suite.name / "find.txt").write_text(done.stdout, encoding="utf-8")
    said += [line for line in done.stdout.splitlines()
             if line.startswith("dagorder:") and ("declared edges" in line or "probes in" in line
                                                  or "budget" in line or "serial pass" in line
                                                  or "making the probes'" in line)]
    load = os.getloadavg()[0]
    return (f"{suite.name}: finder {min(finds):.1f} s against serial {min(serials):.1f} s "
            f"(wall, best of {rounds}): {min(finds) / min(serials):.1f} x serial; load "
            f"{load:.1f}; output in {work / suite.name / 'find.txt'}\n  " + "\n  ".join(said))


def measure(suite: Suite, python: Path, tree: Path, rounds: int, affinity: str | None,
            work: Path, env: dict[str, str], learned: bool = False) -> Rows:
    rows = Rows()
    dag = ["-p", "dagorder", "-n", "2"]
    if affinity:
        dag.append(f"--dag-affinity={affinity}")
    if learned:
        dag.append(f"--dag-edges={work / suite.name / 'edges.json'}")
    for k in range(rounds):
        with tempfile.TemporaryDirectory() as raw:
            tmp = Path(raw)
            cache = ["-o", f"cache_dir={tmp / 'cache'}"]
            # A/B alternated: which side goes first changes every round.
            sides = ("serial", "dag", "plain")
            for side in (sides if k % 2 == 0 else sides[::-1]):
                if side == "plain":
                    rows.plain.append(plain_run(python, tree, suite, tmp, env))
                    continue
                if side == "serial":
                    rows.serial.append(pytest_run(python, tree, suite,
                                                  ["-p", "no:dagorder", *cache], tmp, env))
                    continue
                shutil.rmtree(tmp / "cache", ignore_errors=True)
                rows.cold.append(pytest_run(python, tree, suite, [*dag, *cache], tmp, env))
                rows.warm.append(pytest_run(python, tree, suite, [*dag, *cache], tmp, env))
        base = rows.serial[-1].outcomes
        for name, run in (("cold", rows.cold[-1]), ("warm", rows.warm[-1])):
            differ = {t for t in base.keys() | run.outcomes.keys()
                      if base.get(t) != run.outcomes.get(t)}
            if differ:  # kept for a look at what went wrong
                kept = work / suite.name / f"differ-{k}-{name}.txt"
                kept.write_text(run.output, encoding="utf-8")
                print(f"{suite.name}: round {k} {name}: {len(differ)} outcomes differ "
                      f"from serial; output in {kept}", flush=True)
            rows.differ |= differ
    return rows


def _median(runs: list[Run]) -> float:
    spans = sorted(r.makespan for r in runs)
    return spans[len(spans) // 2] if len(spans) % 2 else sum(spans[len(spans) // 2 - 1:][:2]) / 2


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0 else "-"


def report(suite: Suite, rows: Rows) -> str:
    serial = min(rows.serial, key=lambda r: r.seconds)
    warm = min(rows.warm, key=lambda r: r.makespan)
    cold = min(rows.cold, key=lambda r: r.makespan)
    plain = min(rows.plain, key=lambda r: r.makespan)
    plain_differ = sum(serial.outcomes.get(t) != o for t, o in plain.outcomes.items())
    bound = warm.grouped or warm.bound
    counts: dict[str, int] = {}
    for outcome in serial.outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return (f"{suite.name}: {len(serial.outcomes)} tests {counts}; outcomes differ from serial: "
            f"{len(rows.differ)} {sorted(rows.differ)[:10]}\n"
            f"  serial {serial.seconds:.3g} s (tests {serial.tests:.3g} s); "
            f"-n 2 warm {min(r.seconds for r in rows.warm):.3g} s, "
            f"cold {min(r.seconds for r in rows.cold):.3g} s\n"
            f"  warm makespan {warm.makespan:.3g} s, bound {warm.bound:.3g} s "
            f"(max(C, W/N) {warm.simple:.3g} s), "
            f"with groups {warm.grouped:.3g} s: makespan / bound allowed "
            f"{_ratio(warm.makespan, bound)}; warm makespan / serial tests "
            f"{_ratio(warm.makespan, serial.tests)}; bound allowed / serial tests "
            f"{_ratio(bound, serial.tests)}; cold makespan / bound "
            f"{_ratio(cold.makespan, cold.grouped or cold.bound)}\n"
            f"  plain xdist -n 2, dependencies ignored: makespan {plain.makespan:.3g} s "
            f"(best of {len(rows.plain)}), {_ratio(plain.makespan, bound)} x the bound; "
            f"warm makespan / plain {_ratio(warm.makespan, plain.makespan)}; medians: "
            f"warm {_median(rows.warm):.3g} s, plain {_median(rows.plain):.3g} s; "
            f"plain outcomes that differ from serial: {plain_differ}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--suites", default=",".join(SUITES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--affinity", default=None)
    parser.add_argument("--source", action="append", default=[],
                        help="NAME=PATH: clone this suite from PATH (a clone, a bare git "
                             "directory, or a fetched mirror's folder) instead of GitHub")
    parser.add_argument("--mirrors", type=Path, default=None,
                        help="a folder of fetched mirrors (OWNER+NAME/repo): clone from there")
    parser.add_argument("--setup-only", action="store_true")
    parser.add_argument("--find", action="store_true",
                        help="run the learning pass (--dag-find-missing -n 2) and time it "
                             "against a serial run; writes WORK/NAME/edges.json")
    parser.add_argument("--edges", type=Path, default=None,
                        help="with --find: write the learned file here (default "
                             "WORK/NAME/edges.json)")
    parser.add_argument("--find-tmpdir", type=Path, default=None,
                        help="with --find: the learning pass's TMPDIR, where its copies live "
                             "(/dev/shm: in memory); the serial runs keep the environment's")
    parser.add_argument("--plugin", type=Path, default=None,
                        help="a checkout of this plugin put first on the suites' PYTHONPATH "
                             "(their venvs have another one installed)")
    parser.add_argument("--learned", action="store_true",
                        help="the -n 2 runs read WORK/NAME/edges.json (what --find learned)")
    args = parser.parse_args()
    sources = dict(s.split("=", 1) for s in args.source)
    args.work.mkdir(parents=True, exist_ok=True)
    for name in args.suites.split(","):
        suite = SUITES[name]
        started = time.perf_counter()
        tree = checkout(suite, args.work, origin(suite, sources, args.mirrors))
        python = venv(suite, args.work, tree)
        env = suite_env(suite, python, tree)
        if args.plugin is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(args.plugin), env.get("PYTHONPATH", "")) if p)
        with service(suite, args.work, tree, env):
            if args.setup_only:
                print(f"{name}: ready in {time.perf_counter() - started:.0f} s; serial: cd "
                      f"{tree / suite.cwd} && {python} -m pytest -p no:dagorder "
                      f"{' '.join(suite.argv)}", flush=True)
                continue
            if args.find:
                print(find(suite, python, tree, args.work, env, args.rounds, args.edges,
                           args.find_tmpdir), flush=True)
                continue
            rows = measure(suite, python, tree, args.rounds, args.affinity, args.work, env,
                           args.learned)
        print(report(suite, rows), flush=True)


if __name__ == "__main__":
    main()
