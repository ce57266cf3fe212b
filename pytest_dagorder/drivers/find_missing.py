"""``--dag-find-missing``: find the prerequisites and shared resources a suite never declared.

The session collects and plans as usual, then runs no test in-process:
every question is a probe, a fresh pytest process that runs a chosen list
of node ids in serial order and reports each test's outcome (see
``probe_plugin.py``).  In turn:

1. the serial pass: the selection as one probe, which also records the
   paths each test touches.  A suite that does not pass serially is refused
   with the list of its failing tests: there is no order to restore.
2. screening: the tests in batches, each batch in reverse serial order, so
   that no test runs after the tests it could need; a test that fails there
   is searched.
3. the search (``core/missing.needed``): the tests of its serial prefix it
   needs, by bisection, as many probes at once as ``-n`` says.  The serial
   pass's record narrows it first: the tests that wrote a path the test
   touched, or changed the environment or a module-level value below the
   rootdir, are searched alone when the test passes after them (short
   probes); otherwise the whole prefix is.  A found set
   is then run in one process and the test in the next: if the test fails,
   it reads what they left in the process (a global, an environment
   variable) and must share their worker.  The serial pass settles it
   without a probe where it saw only files or only process state change.
4. conflicts: pairs of tests that touch one path (one of them writing) and
   that no edge orders are run at the same time on purpose, two processes
   held at a shared start line before the two tests; a pair where one fails
   is reported with a resource name.

Probes never touch the project: each runs in a copy of the rootdir (one per
probe slot, reset to the original before each probe) with its own
temporary directory, and writes no cache, durations or JUnit XML.  Test
files are never edited; what was found is printed as the declarations to
add, and written to the ``--dag-edges`` file when one is named.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from ..core.missing import (
    SearchStopped,
    Touches,
    conflict_candidates,
    implied,
    needed,
    ordered,
    resource_name,
)
from ..core.wording import plural
from ..glue import edges_file
from ..glue.settings import DRIVER_NAME, ENVIRONMENT, Settings, settings_of
from . import probe_plugin

#: Folders a probe's copy of the rootdir leaves out (version control, virtual
#: environments, caches): large, and no test reads them.
SKIPPED_DIRS: Final = frozenset({
    ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__",
    ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"})
#: Batches per probe slot in the screening: small enough that a failure
#: shows in a short run, few enough that process start-up stays a minor cost.
BATCHES_PER_SLOT: Final = 2
#: Attempts at overlapping a candidate pair before it counts as compatible.
OVERLAP_ATTEMPTS: Final = 2
#: At most this many candidate pairs are overlapped (the closest in order first).
MAX_PAIRS: Final = 200
#: A probe that runs longer than this many serial passes (plus a start-up
#: allowance) is stopped and counts as failed.
PROBE_TIMEOUT_FACTOR: Final = 3.0
PROBE_TIMEOUT_FLOOR: Final = 60.0
PROGRESS_EVERY: Final = 2.0

_Write = Callable[[str], None]


class ProbeError(Exception):
    """A probe process could not run the tests at all (its output's tail in ``args[0]``)."""


@dataclass(frozen=True, slots=True)
class Result:
    outcome: str
    touches: Touches
    #: The test changed the environment or a module-level value below the rootdir.
    state: bool = False


FAILED: Final = Result("failed", Touches())


class Sandbox:
    """A copy of the rootdir where probes run, put back as it was before each one."""

    def __init__(self, origin: Path, where: Path) -> None:
        self.origin = origin
        self.root = where / "root"
        self.tmp = where / "tmp"
        shutil.copytree(origin, self.root, symlinks=True, ignore=_ignored)
        self.files: dict[str, tuple[int, int]] = {}
        self.dirs: set[str] = set()
        for rel, st in self._walk():
            if st is None:
                self.dirs.add(rel)
            else:
                self.files[rel] = (st.st_size, st.st_mtime_ns)
        self.tmp.mkdir()

    def _walk(self) -> list[tuple[str, os.stat_result | None]]:
        out: list[tuple[str, os.stat_result | None]] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if d not in SKIPPED_DIRS]
            base = os.path.relpath(dirpath, self.root)
            for d in dirnames:
                out.append((os.path.normpath(os.path.join(base, d)), None))
            for f in filenames:
                rel = os.path.normpath(os.path.join(base, f))
                out.append((rel, os.lstat(os.path.join(dirpath, f))))
        return out

    def drop(self, paths: Sequence[str]) -> None:
        """Leave these files (relative to the rootdir) out of the copy for good."""
        for rel in paths:
            (self.root / rel).unlink(missing_ok=True)
            self.files.pop(os.path.normpath(rel), None)

    def reset(self) -> None:
        seen: set[str] = set()
        for rel, st in self._walk():
            path = self.root / rel
            if st is None:
                if rel not in self.dirs and path.exists():
                    shutil.rmtree(path, ignore_errors=True)
                continue
            seen.add(rel)
            if (st.st_size, st.st_mtime_ns) != self.files.get(rel):
                path.unlink(missing_ok=True)
                if rel in self.files:
                    shutil.copy2(self.origin / rel, path, follow_symlinks=False)
        for rel in self.files.keys() - seen:
            (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.origin / rel, self.root / rel, follow_symlinks=False)
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir()


def _ignored(dirpath: str, names: list[str]) -> list[str]:
    return [n for n in names if n in SKIPPED_DIRS
            or os.path.exists(os.path.join(dirpath, n, "pyvenv.cfg"))]


@dataclass
class Findings:
    """What the search found, by position in the serial order."""

    needs: dict[int, list[int]]
    same_process: set[int]
    conflicts: list[tuple[int, int, str]]
    unfinished: list[int]


class MissingFinder:
    """Runs the search in place of the test loop (registered for ``--dag-find-missing``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings: Settings = settings_of(config)
        # The probes are the parallel part: this process starts no xdist workers.
        if hasattr(config.option, "dist"):
            config.option.dist = "no"
            config.option.tx = []
            config.option.numprocesses = None
        self.slots = self.settings.find_workers
        self.lock = threading.Lock()
        self.probes_run = 0
        self.processes = 0
        self.left = 0
        self.deadline = float("inf")
        self.timeout = PROBE_TIMEOUT_FLOOR
        self.pool: queue.Queue[Sandbox] = queue.Queue()
        self.counter = 0
        self.workdir: Path | None = None
        self.sandboxes: list[Sandbox] = []
        self.ids: list[str] = []
        self.order: dict[str, int] = {}
        self.declared: list[list[int]] = []
        # A conftest may have started a service for this session and named it in
        # the environment: the probes must not share it.
        self.environment = config.stash.get(ENVIRONMENT, {}) or dict(os.environ)

    # -- the session -------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> object:
        if session.config.option.collectonly:
            return None
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        write = (lambda line: tr.write_line(line)) if tr is not None else (lambda line: None)
        items = list(session.items)
        if not items:
            return True
        began = time.monotonic()
        budget = self.settings.find_budget
        if budget is not None:
            self.deadline = began + budget
        with tempfile.TemporaryDirectory(prefix="dagorder-find-") as work:
            self.workdir = Path(work)
            try:
                found = self._find(session, items, write)
            except ProbeError as exc:
                write(f"dagorder: a probe could not run the tests:\n{exc.args[0]}")
                session.testsfailed = 1
                return True
        if found is None:
            return True
        self._report(items, found, write, time.monotonic() - began)
        return True

    def _find(self, session: pytest.Session, items: list[pytest.Item],
              write: _Write) -> Findings | None:
        ids = [it.nodeid for it in items]
        one = self.settings.find_missing
        if one:
            if one not in ids:
                raise pytest.UsageError(
                    f"--dag-find-missing={one!r} names no selected test; give the node id "
                    "of a collected test (see pytest --collect-only -q)")
            ids = ids[:ids.index(one) + 1]
        declared = self._declared(len(ids))
        self.order = {nid: k for k, nid in enumerate(ids)}
        self.ids, self.declared = ids, declared
        assert self.workdir is not None
        self.sandboxes = [Sandbox(self.config.rootpath, self.workdir / f"slot{k}")
                          for k in range(self.slots)]
        for sandbox in self.sandboxes:
            self.pool.put(sandbox)
        write(f"dagorder: finding missing declarations of "
              f"{plural(len(ids) if not one else 1, 'test')} with up to "
              f"{plural(self.slots, 'probe process', 'probe processes')} at once")
        began = time.monotonic()
        serial = self._probe(ids, trace=True)
        self.timeout = max(PROBE_TIMEOUT_FLOOR,
                           PROBE_TIMEOUT_FACTOR * (time.monotonic() - began))
        failing = [nid for nid in ids if serial.get(nid, FAILED).outcome
                   in ("failed", "xpassed")]
        if failing:
            write("dagorder: the selection does not pass serially, so there is no order to "
                  "restore; make these tests pass (or deselect them) first:")
            for nid in failing:
                write(f"    {nid}")
            session.testsfailed = len(failing)
            return None
        self._drop_leftovers(serial, write)
        passed = [k for k, nid in enumerate(ids) if serial[nid].outcome == "passed"]
        targets = [len(ids) - 1] if one else [k for k in passed if k > 0]
        write(f"dagorder: serial pass: {len(passed)} passed; "
              f"screening {plural(len(targets), 'test')}")
        suspects = self._screen(ids, targets) if not one else targets
        write(f"dagorder: {plural(len(suspects), 'test')} "
              f"{'fails' if len(suspects) == 1 else 'fail'} without the tests before them; "
              "searching")
        hints = {t: _hints(ids, serial, t) for t in suspects}
        needs, unfinished = self._search(ids, suspects, hints, write)
        same = self._same_process(ids, needs, serial)
        needs = implied(needs, declared, keep=lambda t, p: t in same)
        touches = [serial[nid].touches if nid in serial else Touches() for nid in ids]
        edges = [list(declared[k]) + needs.get(k, []) for k in range(len(ids))]
        linked = ordered(edges)
        pairs = conflict_candidates(touches, linked, MAX_PAIRS)
        if one:
            pairs = [p for p in pairs if len(ids) - 1 in p[:2]]
        write(f"dagorder: overlapping {plural(len(pairs), 'pair')} of tests that touch one path")
        conflicts = self._conflicts(ids, pairs, needs)
        return Findings(needs, same, conflicts, unfinished)

    def _drop_leftovers(self, serial: dict[str, Result], write: _Write) -> None:
        """Files the tests write that an earlier run left in the project would let a
        test pass without the test that writes them: the copies leave out those
        git does not track (a tracked one is part of the project)."""
        root = self.config.rootpath
        present = sorted({p for r in serial.values() for p in r.touches.writes
                          if not os.path.isabs(p) and (root / p).is_file()})
        if not present:
            return
        tracked = _tracked(root, present)
        if tracked is None:
            write(f"dagorder: {plural(len(present), 'file')} the tests write "
                  f"{'was' if len(present) == 1 else 'were'} in the project "
                  f"before the run (not a git checkout: kept), e.g. {present[0]}; a test "
                  "that needs them is found only once they are removed")
            return
        left = [p for p in present if p not in tracked]
        if left:
            write(f"dagorder: {plural(len(left), 'file')} the tests write "
                  f"{'was' if len(left) == 1 else 'were'} left in the project "
                  f"by an earlier run (git does not track them), e.g. {left[0]}; the probes "
                  "run without them")
            for sandbox in self.sandboxes:
                sandbox.drop(left)

    def _declared(self, n: int) -> list[list[int]]:
        runner = self.config.pluginmanager.get_plugin(DRIVER_NAME)
        plan = getattr(runner, "plan", None)
        graph = getattr(plan, "graph", None)
        if graph is None:
            return [[] for _ in range(n)]
        return [[p for p in (*graph.requires[k], *graph.after[k]) if p < n] for k in range(n)]

    # -- the steps ---------------------------------------------------------------------

    def _screen(self, ids: list[str], targets: list[int]) -> list[int]:
        count = max(1, min(len(targets), self.slots * BATCHES_PER_SLOT))
        batches = [targets[k::count] for k in range(count)]
        with cf.ThreadPoolExecutor(self.slots) as ex:
            runs = list(ex.map(lambda b: self._probe([ids[k] for k in reversed(b)]), batches))
        return [k for b, run in zip(batches, runs, strict=True) for k in b
                if run.get(ids[k], FAILED).outcome != "passed"]

    def _search(self, ids: list[str], suspects: list[int], hints: dict[int, list[int]],
                write: _Write) -> tuple[dict[int, list[int]], list[int]]:
        """Each suspect's needs: among its hints first (short probes), else its whole prefix."""
        width = max(1, self.slots // max(1, len(suspects)))
        self.left = len(suspects)
        probes_ex = cf.ThreadPoolExecutor(self.slots)

        def search(t: int) -> list[int]:
            def over(among: Sequence[int]) -> Callable[[Sequence[Sequence[int]]], list[bool]]:
                def probes(subsets: Sequence[Sequence[int]]) -> list[bool]:
                    if time.monotonic() > self.deadline:
                        raise SearchStopped
                    runs = [probes_ex.submit(
                        self._probe, [*(ids[among[k]] for k in s), ids[t]]) for s in subsets]
                    return [r.result().get(ids[t], FAILED).outcome == "passed" for r in runs]
                return probes

            try:
                if over([])([[]])[0]:
                    return []
                hinted = hints.get(t, [])
                if hinted and over(hinted)([range(len(hinted))])[0]:
                    return [hinted[k] for k in needed(len(hinted), over(hinted), width=width)]
                return needed(t, over(range(t)), width=width)
            finally:
                with self.lock:
                    self.left -= 1

        needs: dict[int, list[int]] = {}
        unfinished: list[int] = []
        with probes_ex, cf.ThreadPoolExecutor(min(64, max(1, len(suspects)))) as ex:
            futures = {t: ex.submit(search, t) for t in suspects}
            shown = (-1, -1)
            while True:
                _, pending = cf.wait(futures.values(), timeout=PROGRESS_EVERY)
                now = (self.left, self.probes_run)
                if now != shown and pending:
                    write(f"dagorder: {plural(now[0], 'test')} left to search, "
                          f"{plural(now[1], 'probe')} run")
                    shown = now
                if not pending:
                    break
            for t, fut in futures.items():
                try:
                    found = fut.result()
                except SearchStopped:
                    unfinished.append(t)
                    continue
                if found:
                    needs[t] = found
        return needs, unfinished

    def _same_process(self, ids: list[str], needs: dict[int, list[int]],
                      serial: dict[str, Result]) -> set[int]:
        """The tests that need their prerequisites' process, not only their files.

        Probed (the prerequisites in one process, the test in the next) unless
        the serial pass settles it: each prerequisite wrote a path the test
        touched and changed nothing in the process a later test could read
        (files only), or none wrote such a path (the process: at worst the
        two share a worker they did not need to).
        """
        def settled(t: int) -> bool | None:
            mine = serial.get(ids[t], FAILED).touches
            seen = [serial.get(ids[p], FAILED) for p in needs[t]]
            wrote = [not r.touches.writes.isdisjoint(mine.reads | mine.writes) for r in seen]
            if all(wrote) and not any(r.state for r in seen):
                return False
            if not any(wrote):
                return True
            return None

        def check(t: int) -> bool:
            sandbox = self.pool.get_nowait()
            try:
                sandbox.reset()
                self._run(sandbox, [ids[k] for k in needs[t]])
                after = self._run(sandbox, [ids[t]])
            finally:
                self.pool.put(sandbox)
            return after.get(ids[t], FAILED).outcome != "passed"

        known = {t: settled(t) for t in sorted(needs)}
        asked = [t for t, same in known.items() if same is None]
        with cf.ThreadPoolExecutor(self.slots) as ex:
            answers = list(ex.map(check, asked))
        known.update(zip(asked, answers, strict=True))
        return {t for t, same in known.items() if same}

    def _conflicts(self, ids: list[str], pairs: list[tuple[int, int, str]],
                   needs: dict[int, list[int]]) -> list[tuple[int, int, str]]:
        def chain(t: int) -> list[str]:
            seen: set[int] = set()
            stack = [t]
            while stack:
                for p in needs.get(stack.pop(), ()):
                    if p not in seen:
                        seen.add(p)
                        stack.append(p)
            return [ids[k] for k in sorted(seen)] + [ids[t]]

        def clash(pair: tuple[int, int, str]) -> bool:
            i, j, _ = pair
            for _ in range(OVERLAP_ATTEMPTS):
                if time.monotonic() > self.deadline:
                    return False
                sandbox = self.pool.get_nowait()
                try:
                    sandbox.reset()
                    runs = self._together(sandbox, [(chain(i), ids[i]), (chain(j), ids[j])])
                finally:
                    self.pool.put(sandbox)
                if any(r.get(nid, FAILED).outcome != "passed"
                       for r, nid in zip(runs, (ids[i], ids[j]), strict=True)):
                    return True
            return False

        with cf.ThreadPoolExecutor(max(1, self.slots // 2)) as ex:
            answers = list(ex.map(clash, pairs))
        return [p for p, hit in zip(pairs, answers, strict=True) if hit]

    # -- probes ------------------------------------------------------------------------

    def _probe(self, ids: list[str], *, trace: bool = False) -> dict[str, Result]:
        """``ids`` in a fresh process, in a freshly reset copy of the rootdir."""
        sandbox = self.pool.get_nowait()
        try:
            sandbox.reset()
            return self._run(sandbox, ids, trace=trace)
        finally:
            self.pool.put(sandbox)

    def _command(self, sandbox: Sandbox, ids: list[str], out: Path,
                 basetemp: Path) -> tuple[list[str], Path]:
        config = self.config
        root = config.rootpath
        args = [sys.executable, "-m", "pytest", "-p", probe_plugin.__name__,
                "-p", "no:cacheprovider", "-p", "no:randomly", "-q", "--no-header",
                "--rootdir", str(sandbox.root), f"--basetemp={basetemp}",
                "--dag-with-prerequisites", "-o", "console_output_style=classic"]
        if config.inipath is not None:
            args += ["-c", str(_inside(config.inipath, root, sandbox.root))]
        if config.pluginmanager.has_plugin("xdist"):
            args += ["-n", "0"]
        if config.pluginmanager.has_plugin("_cov"):
            args += ["--no-cov"]
        if self.settings.edges_path is not None:
            args += ["--dag-edges", str(_inside(self.settings.edges_path, root, sandbox.root))]
        args += _forwarded(config.invocation_params.args)
        args += [str(sandbox.root / nid) for nid in ids]
        cwd = _inside(config.invocation_params.dir, root, sandbox.root)
        return args, cwd if cwd.is_dir() else sandbox.root

    def _spawn(self, sandbox: Sandbox, ids: list[str], *, trace: bool = False,
               barrier: str | None = None) -> tuple[subprocess.Popen[bytes], Path]:
        with self.lock:
            self.counter += 1
            n = self.counter
            self.processes += 1
        out = sandbox.tmp.parent / f"probe-{n}.jsonl"
        out.unlink(missing_ok=True)
        ids = self._with_declared(ids)
        args, cwd = self._command(sandbox, ids, out, sandbox.tmp / f"basetemp-{n}")
        env = {k: v for k, v in self.environment.items()
               if not k.startswith(("PYTEST_XDIST_", "DAGORDER_PROBE_"))
               and k not in ("PYTEST_CURRENT_TEST",)}
        env.update({probe_plugin.OUT: str(out), "TMPDIR": str(sandbox.tmp),
                    "TEMP": str(sandbox.tmp), "TMP": str(sandbox.tmp)})
        if trace:
            env[probe_plugin.TRACE] = "1"
        if barrier is not None:
            env[probe_plugin.BARRIER] = barrier
        log = (sandbox.tmp.parent / f"probe-{n}.log").open("wb")
        try:
            proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()
        return proc, out

    def _collect(self, proc: subprocess.Popen[bytes], out: Path,
                 sandbox: Sandbox) -> dict[str, Result]:
        try:
            code = proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
            code = -1
        results: dict[str, Result] = {}
        if out.exists():
            for line in out.read_text(encoding="utf-8").splitlines():
                rec = json.loads(line)
                results[_relative(rec["id"], sandbox.root)] = Result(rec["outcome"], Touches(
                    frozenset(_relative(p, sandbox.root) for p in rec["writes"]),
                    frozenset(_relative(p, sandbox.root) for p in rec["reads"])),
                    bool(rec.get("state")))
        if not results and code not in (0, 1, 5, -1):
            log = out.with_suffix(".log")
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise ProbeError(tail)
        with self.lock:
            self.probes_run += 1
        return results

    def _with_declared(self, ids: list[str]) -> list[str]:
        """``ids`` and their declared prerequisites, transitively, in the serial order.

        Named on the command line rather than pulled back by the plugin: a test
        pulled back from outside a node-id selection comes from a module
        collected apart, with its own module-scoped fixtures.
        """
        def closure(k: int) -> list[int]:
            seen: set[int] = set()
            stack = [k]
            while stack:
                for p in self.declared[stack.pop()]:
                    if p not in seen:
                        seen.add(p)
                        stack.append(p)
            return sorted(seen)

        known = [self.order[nid] for nid in ids if nid in self.order]
        if len(known) != len(ids) or not any(self.declared[k] for k in known):
            return ids
        if known == sorted(known):  # the serial order: the prerequisites at their places
            return [self.ids[k] for k in sorted({*known, *(p for k in known
                                                           for p in closure(k))})]
        # Another order (the screening's): each test's prerequisites just before it.
        out: dict[int, None] = {}
        for k in known:
            out.update(dict.fromkeys(p for p in closure(k) if p not in out))
            out.setdefault(k, None)
        return [self.ids[k] for k in out]

    def _run(self, sandbox: Sandbox, ids: list[str], *, trace: bool = False
             ) -> dict[str, Result]:
        proc, out = self._spawn(sandbox, ids, trace=trace)
        return self._collect(proc, out, sandbox)

    def _together(self, sandbox: Sandbox,
                  runs: list[tuple[list[str], str]]) -> list[dict[str, Result]]:
        """Each list in its own process, at once, both held before their last test."""
        line = sandbox.tmp / f"line-{self.counter}"
        line.mkdir()
        started = [self._spawn(sandbox, ids, barrier=f"{line}|{len(runs)}|{held}")
                   for ids, held in runs]
        return [self._collect(proc, out, sandbox) for proc, out in started]

    # -- the report --------------------------------------------------------------------

    def _report(self, items: list[pytest.Item], found: Findings, write: _Write,
                seconds: float) -> None:
        ids = [it.nodeid for it in items]
        style = _style(self.config)
        if not found.needs and not found.conflicts:
            write("dagorder: no missing prerequisite and no conflict found")
        for t in sorted(found.needs):
            names = [ids[p] for p in found.needs[t]]
            write(f"dagorder: {ids[t]} needs {', '.join(names)}")
            for line in _declaration(style, ids[t], names):
                write(f"    {line}")
            if t in found.same_process:
                write(f"    # it reads what they leave in the process: under -n keep them on "
                      f"one worker: @pytest.mark.xdist_group({_quote(_short(ids[t]))}) on each")
        for i, j, path in found.conflicts:
            name = resource_name(path, str(self.config.rootpath))
            write(f"dagorder: {ids[i]} and {ids[j]} fail when run at the same time "
                  f"(both use {path})")
            write(f"    @pytest.mark.dag_resource({_quote(name)}) on each")
        if found.unfinished:
            many = len(found.unfinished) != 1
            write(f"dagorder: the time budget ran out before "
                  f"{plural(len(found.unfinished), 'test')} {'were' if many else 'was'} "
                  "searched:")
            for t in found.unfinished:
                write(f"    {ids[t]}")
        target = self.settings.edges_path
        wrote = ""
        if target is not None and (found.needs or found.conflicts):
            record = edges_file.EdgesFile(
                [edges_file.FileEdge(ids[t], ids[p], t in found.same_process)
                 for t in sorted(found.needs) for p in found.needs[t]], {})
            for i, j, p in found.conflicts:
                record.resources.setdefault(resource_name(p, str(self.config.rootpath)),
                                            []).extend([ids[i], ids[j]])
            edges_file.write(target, record)
            wrote = f"; written to {target}"
        elif found.needs or found.conflicts:
            wrote = "; add --dag-edges PATH to write them to a file later runs read"
        edges = sum(len(v) for v in found.needs.values())
        write(f"dagorder: {plural(edges, 'missing prerequisite')}, "
              f"{plural(len(found.conflicts), 'conflict')} "
              f"in {seconds:.1f} s with "
              f"{plural(self.processes, 'pytest process', 'pytest processes')}{wrote}")


def _hints(ids: list[str], serial: dict[str, Result], t: int) -> list[int]:
    """The tests before ``t`` most likely to be what it needs, from the serial pass:
    those that wrote a path ``t`` touched, and those that changed the process's state."""
    mine = serial.get(ids[t], FAILED).touches
    paths = mine.reads | mine.writes
    out = []
    for k in range(t):
        seen = serial.get(ids[k], FAILED)
        if seen.state or not seen.touches.writes.isdisjoint(paths):
            out.append(k)
    return out


def _tracked(root: Path, paths: Sequence[str]) -> set[str] | None:
    """Which of ``paths`` git tracks (None: not a git checkout, or no git)."""
    try:
        done = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", *paths],
                              capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return {os.path.normpath(p) for p in done.stdout.decode(errors="replace").split("\0") if p}


def _inside(path: Path, root: Path, copy: Path) -> Path:
    """``path`` in the copy of ``root`` if it lies below ``root``, else ``path``."""
    try:
        return copy / path.relative_to(root)
    except ValueError:
        return path


def _relative(path: str, root: Path) -> str:
    prefix = str(root) + os.sep
    return path[len(prefix):] if path.startswith(prefix) else path


#: Options of the user's command line a probe keeps: plugins, ini overrides,
#: warnings and how modules are imported.
_KEPT: Final = ("-p", "-o", "--override-ini", "-W", "--pythonwarnings", "--import-mode")


def _forwarded(args: Sequence[str]) -> list[str]:
    out: list[str] = []
    k = 0
    while k < len(args):
        arg = args[k]
        if arg in _KEPT and k + 1 < len(args):
            out += [arg, args[k + 1]]
            k += 1
        elif arg.split("=", 1)[0] in _KEPT or (arg.startswith("-p") and not arg.startswith("--")):
            out.append(arg)
        k += 1
    return out


def _style(config: pytest.Config) -> str:
    runner = config.pluginmanager.get_plugin(DRIVER_NAME)
    names: frozenset[str] = getattr(getattr(runner, "plan", None), "marker_names", frozenset())
    for marker in ("dependency", "depends", "order"):
        if marker in names:
            return marker
    return "dagorder"


def _quote(text: str) -> str:
    """A Python string literal in double quotes (the declarations are code to paste)."""
    return json.dumps(text)


def _short(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1]


def _target(test: str, prerequisite: str) -> str:
    """The prerequisite as ``test`` would name it: bare in its own module, else the node id."""
    mine, _, _ = test.partition("::")
    theirs, sep, rest = prerequisite.partition("::")
    return rest if sep and mine == theirs else prerequisite


def _declaration(style: str, test: str, prerequisites: list[str]) -> list[str]:
    names = [_target(test, p) for p in prerequisites]
    quoted = ", ".join(_quote(n) for n in names)
    if style == "dependency":
        scope = "module" if all(n != p for n, p in zip(names, prerequisites, strict=True)) \
            else "session"
        full = names if scope == "module" else prerequisites
        lines = [f"@pytest.mark.dependency(depends=[{', '.join(map(_quote, full))}]"
                 + (', scope="session")' if scope == "session" else ")")]
        return [*lines, "# and @pytest.mark.dependency() on " + ", ".join(prerequisites)]
    if style == "depends":
        return [f"@pytest.mark.depends(on=[{quoted}])"]
    if style == "order":
        after = quoted if len(names) == 1 else f"[{quoted}]"
        return [f"@pytest.mark.order(after={after})"]
    return [f"@depends_on({quoted})"]
