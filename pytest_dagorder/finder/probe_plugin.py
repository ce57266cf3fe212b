"""The plugin inside each probe process of ``--dag-find-missing`` (loaded with ``-p``).

It reports each test's outcome (and, asked to, the paths the test touched)
as JSON lines into the file ``DAGORDER_PROBE_OUT`` names, holds a test
at a start line shared with another probe process (``DAGORDER_PROBE_BARRIER``)
so that two tests overlap on purpose, and keeps the probe from writing what a
normal run writes: the durations file, JUnit XML.

The paths come from Python's audit events (``open``, ``os.remove``,
``sqlite3.connect``, ...) while a test runs, less the interpreter's own
files, the session's temporary directory (each test's own) and what
``tempfile`` made under a random name (no other process can name it).  A path
counts as written when the test changed it (a file's size or time of
change, a file or folder made or removed), read otherwise: a test that
opens a database and only queries it reads it.  Also recorded: whether the
test changed the process's state a later test could read (the environment,
module-level values of modules below the rootdir), and the addresses the
test connected to (``socket.connect``): a database server's state lives
there, outside every copy of the rootdir.

Asked to (``DAGORDER_PROBE_ALONE``: a file of node ids), the probe also runs
each of those tests a second time in a fresh process, right before its turn
in the serial run, with the files the tests before it left in place: the
serial run goes on in a child process, and before each such test it asks
this process, which collected and ran nothing, to fork another child that
runs the test alone (pytest-forked's route: a fork costs milliseconds where
a new pytest process costs its start-up and collection).  Its record says
``"alone": true``; that is the evidence whether the test reads what its
prerequisites left in their process (``find_missing.py``).
"""

from __future__ import annotations

import _thread
import contextlib
import fnmatch
import functools
import importlib
import io
import json
import marshal
import operator
import os
import select
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, NoReturn

import pytest

from ..migration.runtime import WAITED, named_test
from ..options.settings import DRIVER_NAME, settings_of
from . import state_record, work_folder

OUT: Final = "DAGORDER_PROBE_OUT"
#: ``<read fd> <write fd>``: serve probes (see :func:`_serve`) instead of running.
SERVE: Final = "DAGORDER_PROBE_SERVE"
#: A file of node ids to run, also, each alone in a fresh process (see above).
ALONE: Final = "DAGORDER_PROBE_ALONE"
#: Seconds a test run alone may take before it is stopped (recorded as ``timeout``).
ALONE_TIMEOUT: Final = "DAGORDER_PROBE_ALONE_TIMEOUT"
TRACE: Final = "DAGORDER_PROBE_TRACE"
#: ``<directory>|<processes>|<node id>``: wait, before that test's setup,
#: until that many probe processes reached the line.
BARRIER: Final = "DAGORDER_PROBE_BARRIER"
#: A bounded wait: a partner that never arrives does not hang the probe.
BARRIER_TIMEOUT: Final = 30.0
#: ``<file>|<finder's pid>``: start up, then wait before collecting until that
#: file exists (the finder wrote what the run reads); ends if the finder is gone.
HOLD: Final = "DAGORDER_PROBE_HOLD"

#: Audit events that change the path(s) among their arguments.
_CHANGES: Final = {"os.remove": 1, "os.rmdir": 1, "os.mkdir": 1, "os.rename": 2,
                   "shutil.rmtree": 1, "os.truncate": 1, "os.chmod": 1, "sqlite3.connect": 1}
_IGNORED_SUFFIXES: Final = (".py", ".pyc", ".pyi", ".so", ".pth", ".pyd")
#: The kernel's folders: what a test opens there (``/dev/null``, ``/proc/self``)
#: is no file another test reads.  Shared memory (``/dev/shm``) is a folder
#: like any other: a path fixed there is shared by every process, and the
#: probes' copies live there where the temporary directory does
#: (``TMPDIR=/dev/shm``).
_KERNEL: Final = ("/dev/", "/proc/", "/sys/")
_SHARED_MEMORY: Final = os.path.join(work_folder.SHARED_MEMORY, "")
#: Audit events naming a file or folder ``tempfile`` made under a random name
#: (``mkstemp``, ``NamedTemporaryFile``, ``mkdtemp``, ``TemporaryDirectory``).
_PRIVATE: Final = ("tempfile.mkstemp", "tempfile.mkdtemp")


class ProbeReporter:
    def __init__(self, config: pytest.Config, out: Path) -> None:
        self.out = out
        self.config = config
        self.phases: dict[str, list[str]] = {}
        self.current: str | None = None
        #: Each path the running test touched, as it was when first touched.
        self.before: dict[str, tuple[bool, bool, int, int] | None] = {}
        #: The addresses the running test connected to (``host:port``, a socket path).
        self.services: set[str] = set()
        self.state: tuple[dict[str, str], dict[str, object]] | None = None
        #: The state the last test left (the next one's start), when tracing.
        self.last: tuple[dict[str, str], dict[str, object]] | None = None
        #: Module name -> (the module, whether it lies below the rootdir).
        self.modules: dict[str, tuple[object, bool]] = {}
        #: ``sys.modules`` as the last record saw it, and its modules below the rootdir.
        self.imported: tuple[object, ...] = ()
        self.seen: tuple[str, ...] = ()
        self.rooted: list[tuple[str, object]] = []
        #: Module name -> what :meth:`_watched` made of its names.
        self.watching: dict[str, state_record.ModuleRecord] = {}
        #: What the last record read, all modules' at once.
        self.whole: state_record.WholeRecord | None = None
        self.root = str(config.rootpath) + os.sep
        self.tracing = os.environ.get(TRACE) == "1"
        # Ended by a separator: a folder, not every name that starts alike
        # (``/dev`` is no prefix of ``/devel/project``).
        self.ignored = tuple(sorted({os.path.join(str(Path(p).resolve()), "") for p in (
            sys.prefix, sys.base_prefix, sys.exec_prefix)}))
        self.basetemp: str | None = None
        #: What ``tempfile`` made in this process under random names, and those
        #: folders with a trailing separator (their contents): no other process
        #: can name them, so what the tests do there is no shared state (a
        #: module fixture's ``mkdtemp`` folder made at set-up and removed at
        #: teardown would read as a path its users share).
        self.private: set[str] = set()
        self.private_dirs: tuple[str, ...] = ()
        self.barrier = os.environ.get(BARRIER)
        #: This process runs one test alone (its records say so).
        self.is_alone = False
        self.started = 0.0
        if self.tracing:
            sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event in _PRIVATE:
            # Also outside a test: a module may make its folder when imported.
            self._private(args[0] if args else None, event == "tempfile.mkdtemp")
            return
        if self.current is None:
            return
        if event == "open":
            path = args[0] if args else None
            self._note(path)
        elif event in _CHANGES:
            for path in args[:_CHANGES[event]]:
                self._note(path)
        elif event == "socket.connect" and len(args) > 1 and _reachable(args[0], args[1]):
            self.services.add(_address(args[1]))

    def _note(self, path: object) -> None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str | os.PathLike) or str(path) in ("", ":memory:"):
            return
        full = os.path.abspath(os.fspath(path))
        if (full.endswith(_IGNORED_SUFFIXES) or "__pycache__" in full
                or full.startswith(self.ignored)
                or (full.startswith(_KERNEL) and not full.startswith(_SHARED_MEMORY))
                or (self.basetemp is not None and full.startswith(self.basetemp))
                or full in self.private or full.startswith(self.private_dirs)):
            return
        if full not in self.before:
            self.before[full] = _stat(full)

    def _private(self, path: object, folder: bool) -> None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return
        full = os.path.abspath(path)
        self.private.add(full)
        if folder:
            self.private_dirs += (full + os.sep,)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        factory = getattr(session.config, "_tmp_path_factory", None)
        if factory is not None:
            self.basetemp = str(factory.getbasetemp().resolve())

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        hold = os.environ.get(HOLD)
        if hold is not None:
            _hold(hold)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> object:
        alone = os.environ.get(ALONE)
        serve = os.environ.get(SERVE)
        if (alone is None and serve is None) or session.config.option.collectonly:
            return None
        if session.testsfailed and not session.config.option.continue_on_collection_errors:
            raise session.Interrupted(
                f"{session.testsfailed} error{'s' * (session.testsfailed != 1)} "
                "during collection")
        if serve is not None:
            reading, writing = (int(fd) for fd in serve.split())
            _serve(session, self, reading, writing)
            return True
        assert alone is not None
        names = set(Path(alone).read_text(encoding="utf-8").splitlines())
        limit = float(os.environ.get(ALONE_TIMEOUT, "60"))
        _serial_with_alone(session, self, names, limit, list(session.items))
        return True

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.started = time.monotonic()
        self.current = nodeid
        self.before = {}
        self.services = set()
        self.phases[nodeid] = []
        if self.tracing:
            # What the test before left is what this one starts from (nothing
            # runs between two tests' protocols): taken once, not twice.
            self.state = self.last if self.last is not None else self._state()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        item.config.stash[WAITED] = []
        if self.barrier is not None:
            where, count, nodeid = self.barrier.split("|", 2)
            if item.nodeid == nodeid:
                _wait_at(Path(where), int(count))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        else:
            outcome = report.outcome
        self.phases.setdefault(report.nodeid, []).append(outcome)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        phases = self.phases.pop(nodeid, [])
        outcome = next((o for o in ("failed", "xfailed", "skipped", "xpassed") if o in phases),
                       "passed")
        writes = sorted(p for p, was in self.before.items() if _changed(was, _stat(p)))
        self.last = self._state() if self.state is not None else None
        line = {"id": nodeid, "outcome": outcome, "writes": writes,
                "reads": sorted(self.before.keys() - set(writes)),
                "state": self.state is not None and self.last != self.state,
                "state_tests": self._tests_state(),
                "services": sorted(self.services),
                "seconds": round(time.monotonic() - self.started, 4)}
        if self.is_alone:
            line["alone"] = True
        if waits := _waited(self.config):
            line["waits"] = waits
        with self.out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        self.current = None


    def _tests_state(self) -> bool:
        """Whether the state the test changed (see :meth:`_state`) is the
        environment or a value of a test module or ``conftest.py``, rather than
        of the suite's own package: a package's lazy set-up (slurk's first test
        fills ``slurk.config``) is made again by any process that runs the code
        needing it, while a value a test module holds is what its tests read."""
        before, after = self.state, self.last
        if before is None or after is None or before == after:
            return False
        if before[0] != after[0]:
            return True
        values = before[1].keys() | after[1].keys()
        changed = {k.rsplit(".", 1)[0] for k in values
                   if before[1].get(k) != after[1].get(k)}
        patterns = [*self.config.getini("python_files"), "conftest.py"]
        for name in changed:
            module = self.modules.get(name, (None, False))[0]
            where = os.path.basename(str(getattr(module, "__file__", None) or ""))
            if module is None or any(fnmatch.fnmatch(where, p) for p in patterns):
                return True
        return False

    def _state(self) -> tuple[dict[str, str], dict[str, object]]:
        """The environment, and a fingerprint of the module-level values of the
        modules below the rootdir (what a test may leave for a later one).

        Taken at every test's end in the serial pass: it must cost little
        whatever the modules hold (a ``repr`` of every value cost bpypolyskel's
        serial pass 20 x the plain run: its test modules hold large lists), and it
        runs none of the suite's code (a ``repr`` may be slow or change things):
        see :func:`state_record.fingerprint`.  A value's summary is taken again
        only when what it read may have changed (``state_record._Watch``): the
        record is the one that summarizing every value afresh gives."""
        rooted = self._rooted()
        whole = self.whole
        if whole is not None and whole.rooted is rooted and whole.holds():
            return dict(os.environ), whole.again()
        opaque = len(state_record.OPAQUE)
        values: dict[str, object] = {}
        modules = []
        for name, module in rooted:
            modules.append(self._watched(name, module))
            values.update(modules[-1].summaries())
        self.whole = state_record.WholeRecord(rooted, modules, values, opaque)
        return dict(os.environ), values

    def _watched(self, name: str, module: object) -> state_record.ModuleRecord:
        """The module's values a state record looks at, worked out again only
        when one of the module's names was bound, rebound or removed, or a value
        whose class may change did (its class assigned, ``__call__`` added): of a
        test module's dozens of names, its imports, functions and classes are
        passed by at every record without a look."""
        names = dict(vars(module))  # one copy: a thread may bind a name meanwhile
        keys, now = tuple(names), tuple(names.values())
        known = self.watching.get(name)
        if known is not None and known.holds(keys, now):
            return known
        known = self.watching[name] = state_record.ModuleRecord(name, keys, now)
        return known

    def _rooted(self) -> list[tuple[str, object]]:
        """The modules below the rootdir, worked out again only when ``sys.modules``
        changed (a test imported something): a suite's process holds a thousand
        modules or more, a hundred of them its own, and the question comes at
        every test."""
        modules = dict(sys.modules)  # one copy: a thread may import meanwhile
        names, now = tuple(modules), tuple(modules.values())
        # Compared by the names and the modules' identities (kept alive in
        # ``imported``): an object a library put in ``sys.modules`` may have an ``__eq__``.
        if names != self.seen or len(now) != len(self.imported) \
                or not all(map(operator.is_, now, self.imported)):
            self.imported, self.seen = now, names
            self.rooted = [(name, module) for name, module in zip(names, now, strict=True)
                           if self._below_root(name, module)]
        return self.rooted

    def _below_root(self, name: str, module: object) -> bool:
        """Whether the module's file lies below the rootdir (outside site-packages),
        remembered per module object: the question comes twice a test."""
        known = self.modules.get(name)
        if known is not None and known[0] is module:
            return known[1]
        where = getattr(module, "__file__", None) or ""
        mine = isinstance(where, str) and where.startswith(self.root) \
            and "site-packages" not in where
        self.modules[name] = (module, mine)
        return mine


def _serve(session: pytest.Session, reporter: ProbeReporter, reading: int,
           writing: int) -> None:
    """Run probes for the finder, each in a child forked from this collected
    process, which runs no test itself: a probe costs a fork, not a pytest start
    and a collection.  One JSON request per line on ``reading``: ``{"runs":
    [...], "limit": seconds}``, each run ``{"ids", "out", "trace", "barrier",
    "alone", "alone_limit"}`` or ``{"check": ...}`` (:func:`_run_check`); the
    runs of one request start at once (two tests overlapped at a start line) and
    ``{"done": ...}`` answers when all ended (a run past the limit is killed).  A
    child is as fresh as a new process: the modules were imported by the
    collection, no fixture was set up."""
    by_id: dict[str, pytest.Item] = {}
    for item in session.items:
        by_id.setdefault(item.nodeid, item)
    # The finder reads only the outcomes: no child formats a failure's traceback
    # (``--tb=no``'s report, from here on: collecting errors were shown above).
    # A failure's long report reads and parses the test's source: most of what a
    # failing test costs a forked child (docs/performance.md), and the alone
    # checks fail by design wherever a test needs its prerequisites' process.
    session.config.option.tbstyle = "no"
    with os.fdopen(reading, "rb") as requests:
        for line in requests:
            request = json.loads(line)
            end = time.monotonic() + float(request["limit"])
            children: list[int] = []
            killed = False
            # Each run's exit status goes with the answer: a child that ended
            # before its tests' records (it raised, a test ended the process)
            # must not read as those tests failing.
            statuses: list[int] = []
            for run in request["runs"]:
                if run.get("check"):
                    late, status = _run_check(run["check"], end, (reading, writing),
                                              reporter._rooted())
                    killed |= late
                    # pytest's statuses of a session whose tests ran are no failure.
                    statuses.append(0 if status in (0, 1) else status)
                    continue
                items = [by_id[n] for n in run["ids"] if n in by_id]
                reporter.out = Path(run["out"])
                if run.get("alone"):
                    _serial_with_alone(session, reporter, set(run["alone"]),
                                       float(run["alone_limit"]), items, run.get("rules"))
                    continue
                if run.get("lane"):
                    _serial_in_lanes(session, reporter, set(run["lane"]), items, end)
                    continue
                children.append(_fork_run(session, reporter, items, run))
            for child in children:
                while True:
                    if (code := _exited(child)) is not None:
                        statuses.append(code)
                        break
                    if _killed_when_late(child, end):
                        killed = True
                        break
                    time.sleep(0.002)
            os.write(writing, (json.dumps({"done": True, "killed": killed,
                                           "statuses": statuses}) + "\n").encode())


def _exited(child: int) -> int | None:
    """The child's exit status once it ended (reaped), else None."""
    pid, raw = os.waitpid(child, os.WNOHANG)
    return os.waitstatus_to_exitcode(raw) if pid else None


def _killed_when_late(child: int, end: float) -> bool:
    """Past ``end`` (a bound on the child's run), kill and reap the child: True;
    else False (it may run on)."""
    if time.monotonic() <= end:
        return False
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    return True


def _run_lane(items: list[pytest.Item], nexts: dict[int, int | None], orders_r: int,
              answers_w: int) -> None:
    """One lane of :func:`_serial_in_lanes`: each test the parent orders, then "d"."""
    runner = items[0].config.pluginmanager.get_plugin(DRIVER_NAME)
    if runner is not None and hasattr(runner, "run"):
        runner.run = None  # prerequisites run in the other lane
    with os.fdopen(orders_r, "rb") as orders:
        for line in orders:
            k = int(line)
            following = nexts[k]
            nextitem = items[following] if following is not None else None
            items[k].config.hook.pytest_runtest_protocol(item=items[k], nextitem=nextitem)
            os.write(answers_w, b"d")


def _end_child(body: Callable[[], int | None]) -> NoReturn:
    """Run ``body`` in a forked child, then end the child: it never returns into
    pytest (with the status ``body`` returned, 1 when it raised), its output
    flushed first."""
    code = 0
    try:
        code = body() or 0
    except BaseException as exc:
        code = 1
        if isinstance(exc, Exception):  # the probe's log says why it ended
            traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _fork_run(session: pytest.Session, reporter: ProbeReporter, items: list[pytest.Item],
              run: dict[str, Any]) -> int:
    """``items`` in order, in a child; its pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child:
        return child

    def run_items() -> None:
        reporter.barrier = run.get("barrier")
        if run.get("trace") and not reporter.tracing:
            reporter.tracing = True
            sys.addaudithook(reporter._audit)
        for i, item in enumerate(items):
            nextitem = items[i + 1] if i + 1 < len(items) else None
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if session.shouldfail or session.shouldstop:
                break

    _end_child(run_items)


#: At most this many tests run alone in one fresh process (a batch; the
#: child's exit status counts the verdicts it gave).
BATCH_MAX: Final = 64


def _serial_with_alone(session: pytest.Session, reporter: ProbeReporter, names: set[str],
                       limit: float, items: list[pytest.Item],
                       rules: dict[str, Any] | None = None) -> None:
    """The serial run of ``items`` in a child; before each test of ``names``, that
    test alone in another child forked from this process (which runs no test
    itself), or with the tests of ``names`` after it as one batch (see
    :func:`_batch`) when ``rules`` give their serial outcomes.  ``rules["only"]``:
    every test is one of ``names``, and no serial run: each runs alone only,
    once, in order (the finder's ``_alone_only`` says when that suffices)."""
    members = [k for k, item in enumerate(items) if item.nodeid in names]
    done: set[int] = set()
    if rules is not None and rules.get("only"):
        for at in members:
            if at not in done:
                done.update(_alone_from(items, members, at, done, reporter, limit, rules))
        return
    asks_r, asks_w = os.pipe()
    go_r, go_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:  # the serial run
        os.close(asks_r)
        os.close(go_w)

        def run_serially() -> None:
            for i, item in enumerate(items):
                if item.nodeid in names:
                    os.write(asks_w, f"{i}\n".encode())
                    if os.read(go_r, 1) != b"g":
                        break
                nextitem = items[i + 1] if i + 1 < len(items) else None
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
                if session.shouldfail or session.shouldstop:
                    break

        _end_child(run_serially)
    os.close(asks_w)
    os.close(go_r)
    try:
        with os.fdopen(asks_r, "rb") as asks:
            for line in asks:
                at = int(line)
                if at not in done:
                    done.update(_alone_from(items, members, at, done, reporter, limit, rules))
                os.write(go_w, b"g")
    finally:
        os.close(go_w)
        os.waitpid(child, 0)


def _alone_from(items: list[pytest.Item], members: list[int], at: int, done: set[int],
                reporter: ProbeReporter, limit: float,
                rules: dict[str, Any] | None) -> list[int]:
    """The test at ``at`` alone, with those :func:`_batch` joins to it: the
    positions that got their verdict."""
    batch = _batch(items, members, at, done, rules)
    count = _alone([items[k] for k in batch], reporter, limit, rules)
    if count == 0:  # stopped or broken: its first test alone, at once
        count = _alone([items[at]], reporter, limit, rules)
    return batch[:max(1, count)]


def _serial_in_lanes(session: pytest.Session, reporter: ProbeReporter, lane: set[str],
                     items: list[pytest.Item], end: float) -> None:
    """``items`` in the serial order, taking turns in two processes forked from this
    one: the tests of ``lane`` in one, the others in the other (each tears down
    toward its own next test, as a worker does).  Whether a dependent needs
    only some of its prerequisites in its process: those go into its lane,
    the rest run in the other one, their files in place.  Every wait ends by
    ``end`` (a process that does not answer is killed)."""
    mine = [[k for k, it in enumerate(items) if (it.nodeid in lane) == (side == 1)]
            for side in (0, 1)]
    pipes = [(os.pipe(), os.pipe()) for _ in mine]  # (orders, answers) per lane
    children: list[int] = []
    sys.stdout.flush()
    sys.stderr.flush()
    for side, own in enumerate(mine):
        child = os.fork()
        if child == 0:
            (orders_r, _), (_, answers_w) = pipes[side]
            for fd in {fd for pair in pipes for ends in pair for fd in ends} - {orders_r,
                                                                              answers_w}:
                os.close(fd)  # the parent's ends and the other lane's: EOF reaches it
            nexts = dict(zip(own, [*own[1:], None], strict=True))
            _end_child(functools.partial(_run_lane, items, nexts, orders_r, answers_w))
        children.append(child)
    for (orders_r, _), (_, answers_w) in pipes:
        os.close(orders_r)
        os.close(answers_w)
    try:
        for k, item in enumerate(items):
            (_, orders_w), (answers_r, _) = pipes[1 if item.nodeid in lane else 0]
            os.write(orders_w, f"{k}\n".encode())
            left = end - time.monotonic()
            ready = select.select([answers_r], [], [], max(0.0, left))[0] if left > 0 else []
            if not ready or os.read(answers_r, 1) != b"d":
                break  # past its time, or the lane died: the rest is not run
    finally:
        for (_, orders_w), (answers_r, _) in pipes:
            os.close(orders_w)
            os.close(answers_r)
        for child in children:
            while not os.waitpid(child, os.WNOHANG)[0] and not _killed_when_late(child, end):
                time.sleep(0.002)


def _batch(items: list[pytest.Item], members: list[int], at: int, done: set[int],
           rules: dict[str, Any] | None) -> list[int]:
    """The tests (positions in ``items``) to run in one fresh process at the
    serial position ``at``: the test there, then later tests of ``members`` not
    checked yet, in serial order.

    A test joins the batch only if none of its declared prerequisites
    (transitively: ``rules["prerequisites"]``) is in it, and no test before it in
    the batch changed the process's state in the serial pass
    (``rules["stateful"]`` ends a batch).  So what a joining test finds in its
    process is what the fresh process had plus what tests that are not its
    prerequisites and changed no state left: a dependence on its prerequisites'
    process cannot be masked.  Its files are those before the batch's first
    test (the serial run's tests between are not run here): a test that then
    fails is not judged; its verdict is taken anew as the first of a batch at
    its own place (see :func:`_alone`).  The first test is run as it would be
    alone."""
    if rules is None:
        return [at]
    prerequisites: dict[str, list[str]] = rules.get("prerequisites", {})
    stateful = set(rules.get("stateful", ()))
    batch = [at]
    ids = {items[at].nodeid}
    if items[at].nodeid in stateful:
        return batch
    for k in members:
        if k <= at or k in done:
            continue
        if len(batch) >= BATCH_MAX:
            break
        nid = items[k].nodeid
        if ids.intersection(prerequisites.get(nid, ())):
            continue
        batch.append(k)
        ids.add(nid)
        if nid in stateful:
            break
    return batch


def _alone(batch: list[pytest.Item], reporter: ProbeReporter, limit: float,
           rules: dict[str, Any] | None) -> int:
    """``batch`` in one child of this (collected, untouched) process, in order:
    how many of its tests got a verdict.  The first always does; a later one
    only while each gave its serial outcome (``rules["expect"]``): at the first
    that does not, the child ends, and that test's verdict is left to a batch
    of its own.  0: the child was stopped by the time limit (``limit`` a test)
    or broke; a batch of one stopped by it is recorded as a timeout."""
    expect: dict[str, str] = (rules or {}).get("expect", {})
    out = reporter.out
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        count = 0
        try:
            # Its prerequisites ran in another process: the serial driver must
            # not skip it for not having seen them.
            runner = batch[0].config.pluginmanager.get_plugin(DRIVER_NAME)
            if runner is not None and hasattr(runner, "run"):
                runner.run = None
            reporter.is_alone = True
            scratch = out.with_name(f"{out.name}.batch-{os.getpid()}")
            reporter.out = scratch
            for k, item in enumerate(batch):
                scratch.unlink(missing_ok=True)
                nextitem = batch[k + 1] if k + 1 < len(batch) else None
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
                record = scratch.read_text(encoding="utf-8") if scratch.exists() else ""
                got = json.loads(record.splitlines()[-1])["outcome"] if record else "failed"
                if k > 0 and got != expect.get(item.nodeid, "passed"):
                    break
                with out.open("a", encoding="utf-8") as f:
                    f.write(record)
                count += 1
            scratch.unlink(missing_ok=True)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(count)
    end = time.monotonic() + limit * len(batch)
    while True:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            return max(0, os.waitstatus_to_exitcode(status))
        if _killed_when_late(child, end):
            if len(batch) > 1:
                return 0
            line = {"id": batch[0].nodeid, "outcome": "timeout", "writes": [], "reads": [],
                    "state": False, "seconds": limit, "alone": True}
            with out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")
            return 1
        time.sleep(0.002)


def _reachable(sock: object, address: object) -> bool:
    """Whether a connection to ``address`` could reach a service: not where a Unix
    socket's path names nothing (the connection fails: no state is shared).  A
    session fixture that tries a daemon which is not there (slurk's
    ``docker.from_env()``, at ``/var/run/docker.sock``) would make the suite
    read as reaching a service, and the finder then runs each alone run's
    prerequisites alone before it and nothing beside the serial pass."""
    if getattr(sock, "family", None) != socket.AF_UNIX or not isinstance(address, str | bytes):
        return True
    path = os.fsdecode(address)
    # An abstract address (a leading NUL) names no file: it may be there.
    return path.startswith("\0") or os.path.lexists(path)


def _address(address: object) -> str:
    """A connected address as text: ``host:port`` (an IP socket), else the path."""
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    if isinstance(address, bytes):
        return os.fsdecode(address)
    return str(address)


def _stat(path: str) -> tuple[bool, bool, int, int] | None:
    """(exists, is a folder, size, time of change), None if it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    folder = os.path.isdir(path)
    return True, folder, st.st_size, st.st_mtime_ns


def _changed(was: tuple[bool, bool, int, int] | None,
             now: tuple[bool, bool, int, int] | None) -> bool:
    if was is None or now is None:
        return was != now
    # A folder changes when any entry in it does: only its making or removal counts.
    return not was[1] and was != now


def _wait_at(where: Path, count: int) -> None:
    (where / str(os.getpid())).touch()
    end = time.monotonic() + BARRIER_TIMEOUT
    while len(list(where.iterdir())) < count and time.monotonic() < end:
        time.sleep(0.002)


def _hold(spec: str) -> None:
    """Wait until the file of ``spec`` exists: a run started (interpreter,
    conftests, xdist's workers) while the finder still searched, collecting
    only once the findings it reads are written.  The wait lasts as long as
    the finder does: it starts the run and stops it on every exit; a finder
    killed outright ends the wait (and this process) here."""
    where, _, pid = spec.rpartition("|")
    go = Path(where)
    while not go.exists():
        try:
            os.kill(int(pid), 0)
        except OSError:
            os._exit(1)
        time.sleep(0.02)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    out = os.environ.get(OUT)
    if out is None:
        return
    # A probe writes none of what a normal run leaves behind.
    # Nor a stall report: the finder bounds every probe itself.
    for name, value in (("dag_store_durations", False), ("xmlpath", None),
                        ("dag_stall_report", "0")):
        if hasattr(config.option, name):
            setattr(config.option, name, value)
    config.pluginmanager.register(ProbeReporter(config, Path(out)), "dagorder-probe")


def _waited(config: pytest.Config) -> list[str]:
    """The node ids the run-time ``depends()`` calls made for the test that
    ended waited for (those that name a test of the run), in call order."""
    waited = config.stash.get(WAITED, [])
    if not waited:  # also: no settings where the plugin is not loaded
        return []
    config.stash[WAITED] = []
    automark = settings_of(config).automark_dependency
    out: list[str] = []
    for node, scope, name in waited:
        nid = named_test(node, scope, name, automark)
        if nid is not None and nid not in out:
            out.append(nid)
    return out


# -- the -n 2 check, forked --------------------------------------------------------------

#: What execnet's worker bootstrap is handed by the launcher (``worker_launch.py``).
LAUNCHER_SOURCE: Final = Path(__file__).with_name("worker_launch.py")
#: The longest ``#!`` line every Linux kernel reads whole (before 5.1: 128 bytes).
SHEBANG_MAX: Final = 127
#: The longest path of a Unix socket (``sun_path``, less its closing NUL).
SOCKET_PATH_MAX: Final = 107
#: Bound on reading one launcher's request once it connected.
REQUEST_TIMEOUT: Final = 10.0
#: ``sys.path`` as the interpreter made it, before pytest put the rootdir and the
#: conftests' folders first: what a forked controller or worker starts from.
_START_PATH: Final = list(sys.path)


def _interpreter_env(env: dict[str, str]) -> dict[str, str]:
    """The variables the interpreter reads as it starts (``PYTHON*``: hash seed,
    flags, path ...; the locale: the streams' encoding): a fork has this
    process's, so a worker whose environment names others starts fresh."""
    return {k: v for k, v in env.items()
            if (k.startswith("PYTHON") and k != "PYTHONDONTWRITEBYTECODE")
            or k in ("LANG", "LC_ALL", "LC_CTYPE")}


_START_ENV: Final = _interpreter_env(dict(os.environ))


def _run_check(check: dict[str, Any], end: float, finder_fds: tuple[int, int],
               rooted: list[tuple[str, object]]) -> tuple[bool, int]:
    """The ``-n 2`` check of the findings (``find_missing._check_n2``) as a child
    forked from this collected process, which ran no test: the child runs
    ``pytest ARGS`` as the check's controller (its modules imported already,
    as they would be imported again), and each of its xdist workers is a
    further child of this process (:func:`_worker`), forked when the
    launcher execnet starts as the worker's interpreter asks for it, before
    the worker's bootstrap runs: the workers start from a process that ran no
    test either, and they collect and run as workers of a real ``-n 2`` run.
    Where the launcher cannot be used (a ``noexec`` folder, a long path),
    when it cannot reach this process, or where a module of the suite reads
    xdist's variables (:func:`_reads_xdist_variables` of ``rooted``, the modules
    below the rootdir), the workers are fresh interpreters.  Whether it was
    killed at ``end``, and its pytest's exit status (0 where it was stopped)."""
    where = Path(check["where"])
    listener, launcher = (None, None) if _reads_xdist_variables(rooted) else _fork_server(where)
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        if listener is not None:
            listener.close()
        _end_child(lambda: _controller(check, launcher, finder_fds))
    waiting: dict[int, socket.socket] = {}  # worker pid -> its launcher's connection
    killed, status = False, 0
    records = _Records(Path(check["env"][OUT]), check["expect"], check["root"] + os.sep)
    try:
        while True:
            if (code := _exited(child)) is not None:
                status = code
                break
            if _killed_when_late(child, end):
                killed = True
                break
            if listener is None:
                time.sleep(0.01)
                continue
            _launch(listener, waiting, finder_fds)
            _reap(waiting)
            if records.whole():
                # Every test's record is in: each worker tore its last test down
                # (xdist runs it once told to shut down), so no outcome can
                # change; what is left is xdist's shutdown, the workers' and the
                # controller's exits (labgrid: a fifth of the check), stopped.
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
                break
    finally:
        for pid, conn in waiting.items():  # left by a killed controller: ended too
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            conn.close()
        if listener is not None:
            listener.close()
    return killed, status


def _launch(listener: socket.socket, waiting: dict[int, socket.socket],
            finder_fds: tuple[int, int]) -> None:
    """A worker forked for the launcher that connects within a moment, if one does."""
    ready, _, _ = select.select([listener], [], [], 0.01)
    if not ready:
        return
    conn, _ = listener.accept()

    def worker(conn: socket.socket, request: dict[str, Any]) -> NoReturn:
        listener.close()
        for other in waiting.values():
            other.close()
        _worker(conn, request, finder_fds)

    _answer(conn, waiting, worker)


class _Records:
    """The records a run appends to ``out``, read as the file grows (each byte
    once): whole once each test of ``expect`` (node ids relative to ``root``,
    as a record names a test below it) has one; never, for none."""

    def __init__(self, out: Path, expect: list[str], root: str) -> None:
        self.out = out
        self.root = root
        self.left = set(expect)
        self.watching = bool(self.left)
        self.read = 0
        self.partial = b""

    def _named(self, nid: str) -> str:
        """A record's node id relative to the rootdir (as the finder reads it)."""
        return nid[len(self.root):] if nid.startswith(self.root) else nid

    def whole(self) -> bool:
        if not self.watching:
            return False
        try:
            with self.out.open("rb") as f:
                f.seek(self.read)
                chunk = f.read()
        except OSError:
            return False
        self.read += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        for line in lines:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                self.left.discard(self._named(json.loads(line)["id"]))
        return not self.left


#: What the source of a module that reads xdist's variables names.
_XDIST_VARIABLES: Final = b"PYTEST_XDIST_"


def _reads_xdist_variables(rooted: list[tuple[str, object]]) -> bool:
    """Whether one of the suite's modules (``rooted``: :meth:`ProbeReporter._rooted`'s)
    names xdist's environment variables (``PYTEST_XDIST_WORKER``, ...) in its
    source.  One that reads them as it is imported (a database named per
    worker) read them unset here, and a worker forked from here keeps that
    module as it is (pytest imports a test module once), where each of xdist's
    own workers imports it with them set."""
    for _, module in rooted:
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path.endswith(".py"):
            continue
        with contextlib.suppress(OSError):
            if _XDIST_VARIABLES in Path(path).read_bytes():
                return True
    return False


def _fork_server(where: Path) -> tuple[socket.socket | None, str | None]:
    """A listening socket and the launcher file that reaches it, under ``where``;
    (None, None) where a worker cannot be started that way."""
    python = sys.executable
    path = str(where / "fork.sock")
    launcher = where / "python"
    if (not hasattr(socket, "AF_UNIX") or not hasattr(socket, "recv_fds")
            or len(path.encode()) > SOCKET_PATH_MAX
            or len(f"#!{python} -IS".encode()) > SHEBANG_MAX
            or not python or " " in python):
        return None, None
    try:
        if os.statvfs(where).f_flag & getattr(os, "ST_NOEXEC", 0):
            return None, None
        launcher.write_text(f"#!{python} -IS\n"
                            + LAUNCHER_SOURCE.read_text(encoding="utf-8")
                            + f"\nmain({path!r}, {python!r})\n", encoding="utf-8")
        launcher.chmod(0o700)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(8)
    except OSError:
        return None, None
    return listener, str(launcher)


def _controller(check: dict[str, Any], launcher: str | None,
                finder_fds: tuple[int, int]) -> int:
    """In the forked controller: become ``python -m pytest ARGS`` started in the
    check's folder with its environment, its output to its log; its status."""
    for fd in finder_fds:  # the finder's pipes stay with the server alone
        os.close(fd)
    log = os.open(check["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    _take_over(check["cwd"], check["env"], [check["cwd"], *_START_PATH[1:]])
    sys.argv[:] = [sys.argv[0], *check["args"]]
    if launcher is not None:
        # execnet starts each worker as ``sys.executable -u -c BOOTSTRAP``.
        sys.executable = launcher
    return int(pytest.main(check["args"]))


def _take_over(cwd: str, env: dict[str, str], path: list[str]) -> None:
    """What a process started in ``cwd`` with ``env`` would have as its own."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = path
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    tempfile.tempdir = None
    importlib.invalidate_caches()


def _answer(conn: socket.socket, waiting: dict[int, socket.socket],
            worker: Callable[[socket.socket, dict[str, Any]], NoReturn]) -> None:
    """Read a launcher's request and fork a worker for it, which runs ``worker``
    with the request (:func:`_fork_shallow`); nothing in this process for a
    refusal or a failed read (the launcher then starts a fresh interpreter)."""
    fds: list[int] = []
    pid = -1
    try:
        conn.settimeout(REQUEST_TIMEOUT)
        data, fds, _, _ = socket.recv_fds(conn, 65536, 3)
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            more = conn.recv(65536)
            if not more:
                raise EOFError
            data += more
        request = marshal.loads(data[4:])
        argv = request.get("argv")
        if len(fds) != 3 or not (
                isinstance(argv, list) and argv[:1] == ["-u"] and len(argv) in (3, 4)
                and argv[-2] == "-c" and argv[1:-2] in ([], ["-B"])) \
                or _interpreter_env(request["env"]) != _START_ENV:
            conn.sendall(b"no\n")
        else:
            sys.stdout.flush()
            sys.stderr.flush()

            def child() -> NoReturn:
                conn.settimeout(None)
                request["fds"] = fds
                worker(conn, request)

            pid = _fork_shallow(child)
            waiting[pid] = conn
            conn.sendall(b"pid %d\n" % pid)
    except (OSError, EOFError, ValueError, KeyError, TypeError):
        pass
    for fd in fds:
        os.close(fd)
    if pid <= 0:
        conn.close()


def _fork_shallow(child: Callable[[], NoReturn]) -> int:
    """``os.fork()`` from a new thread whose Python stack holds that call only, the
    child running ``child()`` there (its one thread, so its main thread:
    signals and ``threading.main_thread()`` as in a fresh interpreter); the
    child's pid here.

    Not from this thread: its child would run everything on top of this
    process's stack (its pytest session, the server's loop), and CPython (3.11
    on) keeps frames in 16 KiB chunks, mapped when a call needs a new one and
    unmapped when it returns: code whose calls go back and forth across a
    chunk's end maps and unmaps one per call.  shapepy's bool2d tests
    did so at the depth this stack gave them, and ran 2-3 times slower in the
    ``-n 2`` check's forked workers than in fresh ones (half their time in the
    kernel); a fresh worker's stack starts empty, as this thread's does."""
    got: list[int] = []
    forked = _thread.allocate_lock()
    forked.acquire()

    def fork() -> None:
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:
            try:
                child()
            finally:
                os._exit(1)
        got.append(pid)
        forked.release()

    with warnings.catch_warnings():
        # Python 3.12+ warns of a fork with other threads alive: this thread
        # waits for the fork, and the child runs only ``child``.
        warnings.simplefilter("ignore", DeprecationWarning)
        _thread.start_new_thread(fork, ())
        forked.acquire()
    if got[0] < 0:
        raise OSError("fork failed")
    return got[0]


def _reap(waiting: dict[int, socket.socket]) -> None:
    """Tell each launcher whose worker ended how it ended."""
    for pid in list(waiting):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, 0
        if not done:
            continue
        conn = waiting.pop(pid)
        if os.WIFSIGNALED(status):
            line = b"signal %d\n" % os.WTERMSIG(status)
        else:
            line = b"exit %d\n" % os.waitstatus_to_exitcode(status)
        with contextlib.suppress(OSError):  # a launcher killed before its worker ended
            conn.sendall(line)
        conn.close()


def _worker(conn: socket.socket, request: dict[str, Any], finder_fds: tuple[int, int]) -> NoReturn:
    """In a forked worker: wait for the launcher's go, take over its descriptors,
    arguments, environment and folder, then run execnet's bootstrap in a fresh
    ``__main__`` as ``python -u -c BOOTSTRAP`` would; end with its status.

    What differs from a fresh interpreter: the modules this process imported
    (pytest, its plugins, the conftests and test modules of this copy, which
    the worker's collection finds imported, as the probes' children do); one
    hash seed for both workers; the worker's parent is this process (the
    launcher stands in for it towards execnet); exit handlers do not run
    (``os._exit``, as every forked probe ends).  Neither the worker nor this
    process ran a test before the fork."""
    for fd in finder_fds:
        os.close(fd)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    answers = conn.makefile("rb")
    if answers.readline() != b"go\n":  # the launcher gave up: it started a fresh one
        os._exit(1)
    for target, fd in enumerate(request["fds"]):
        os.dup2(fd, target)
        os.close(fd)
    argv = request["argv"]
    _take_over(request["cwd"], request["env"], ["", *_START_PATH[1:]])
    sys.dont_write_bytecode = "-B" in argv or sys.dont_write_bytecode
    sys.argv[:] = ["-c"]
    # The interpreter's own streams over the launcher's descriptors (this process's
    # are pytest's capture, which refuses reads); ``-u``: unbuffered output, as
    # execnet asks of its workers.
    encoding = sys.__stdout__.encoding if sys.__stdout__ is not None else "utf-8"
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)),
                                 encoding=encoding)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True,
                                  encoding=encoding)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True,
                                  encoding=encoding, errors="backslashreplace")
    threading.Thread(target=_watch, args=(answers,), daemon=True).start()
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    code = 0
    try:
        exec(compile(argv[-1], "<string>", "exec"), main.__dict__)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # what an interpreter prints of an uncaught exception
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
    os._exit(code)


def _watch(answers: io.BufferedReader) -> None:
    """A worker's thread: the signals its launcher forwards, and its launcher's end."""
    while True:
        try:
            line = answers.readline().split()
        except OSError:
            line = []
        if len(line) == 2 and line[0] == b"sig":
            os.kill(os.getpid(), int(line[1]))
            continue
        # The launcher is gone (killed): a worker does not outlive it.
        os.kill(os.getpid(), signal.SIGKILL)
