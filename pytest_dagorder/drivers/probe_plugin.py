"""The plugin inside each probe process of ``--dag-find-missing`` (loaded with ``-p``).

It reports each test's outcome (and, asked to, the paths the test touched)
as JSON lines into the file ``DAGORDER_PROBE_OUT`` names, holds a test
at a start line shared with another probe process (``DAGORDER_PROBE_BARRIER``)
so that two tests overlap on purpose, and keeps the probe from writing what a
normal run writes: the durations file, JUnit XML.

The paths come from Python's audit events (``open``, ``os.remove``,
``sqlite3.connect``, ...) while a test runs, less the interpreter's own
files and the session's temporary directory (each test's own).  A path
counts as written when the test changed it (a file's size or time of
change, a file or folder made or removed), read otherwise: a test that
opens a database and only queries it reads it.  Also recorded: whether the
test changed the process's state a later test could read (the environment,
module-level values of modules below the rootdir).

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

import json
import os
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any, Final

import pytest

from ..glue.settings import DRIVER_NAME

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

#: Audit events that change the path(s) among their arguments.
_CHANGES: Final = {"os.remove": 1, "os.rmdir": 1, "os.mkdir": 1, "os.rename": 2,
                   "shutil.rmtree": 1, "os.truncate": 1, "os.chmod": 1, "sqlite3.connect": 1}
_IGNORED_SUFFIXES: Final = (".py", ".pyc", ".pyi", ".so", ".pth", ".pyd")


class ProbeReporter:
    def __init__(self, config: pytest.Config, out: Path) -> None:
        self.out = out
        self.phases: dict[str, list[str]] = {}
        self.current: str | None = None
        #: Each path the running test touched, as it was when first touched.
        self.before: dict[str, tuple[bool, bool, int, int] | None] = {}
        self.state: tuple[dict[str, str], dict[str, str]] | None = None
        self.root = str(config.rootpath) + os.sep
        self.tracing = os.environ.get(TRACE) == "1"
        self.ignored = tuple(str(Path(p).resolve()) for p in {
            sys.prefix, sys.base_prefix, sys.exec_prefix, "/dev", "/proc", "/sys"})
        self.basetemp: str | None = None
        self.barrier = os.environ.get(BARRIER)
        #: This process runs one test alone (its records say so).
        self.is_alone = False
        self.started = 0.0
        if self.tracing:
            sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.current is None:
            return
        if event == "open":
            path = args[0] if args else None
            self._note(path)
        elif event in _CHANGES:
            for path in args[:_CHANGES[event]]:
                self._note(path)

    def _note(self, path: object) -> None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str | os.PathLike) or str(path) in ("", ":memory:"):
            return
        full = os.path.abspath(os.fspath(path))
        if (full.endswith(_IGNORED_SUFFIXES) or "__pycache__" in full
                or full.startswith(self.ignored)
                or (self.basetemp is not None and full.startswith(self.basetemp))):
            return
        if full not in self.before:
            self.before[full] = _stat(full)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        factory = getattr(session.config, "_tmp_path_factory", None)
        if factory is not None:
            self.basetemp = str(factory.getbasetemp().resolve())

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
        self.phases[nodeid] = []
        if self.tracing:
            self.state = self._state()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
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
        line = {"id": nodeid, "outcome": outcome, "writes": writes,
                "reads": sorted(self.before.keys() - set(writes)),
                "state": self.state is not None and self._state() != self.state,
                "seconds": round(time.monotonic() - self.started, 4)}
        if self.is_alone:
            line["alone"] = True
        with self.out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        self.current = None


    def _state(self) -> tuple[dict[str, str], dict[str, str]]:
        """The environment, and a fingerprint of the module-level values of the
        modules below the rootdir (what a test may leave for a later one)."""
        values: dict[str, str] = {}
        for name, module in list(sys.modules.items()):
            where = getattr(module, "__file__", None) or ""
            if not where.startswith(self.root) or "site-packages" in where:
                continue
            for key, value in list(vars(module).items()):
                if key.startswith("__") or callable(value) or isinstance(value, type(sys)):
                    continue
                try:
                    values[f"{name}.{key}"] = repr(value)[:2000]
                except Exception:  # a value whose repr fails counts by identity
                    values[f"{name}.{key}"] = f"id {id(value)}"
        return dict(os.environ), values


def _serve(session: pytest.Session, reporter: ProbeReporter, reading: int,
           writing: int) -> None:
    """Run probes for the finder, each in a child forked from this collected
    process, which runs no test itself: a probe costs a fork, not a pytest start
    and a collection.  One JSON request per line on ``reading``: ``{"runs":
    [...], "limit": seconds}``, each run ``{"ids", "out", "trace", "barrier",
    "alone", "alone_limit"}``; the runs of one request start at once (two tests
    overlapped at a start line) and ``{"done": ...}`` answers when all ended (a
    run past the limit is killed).  A child is as fresh as a new process: the
    modules were imported by the collection, no fixture was set up."""
    by_id: dict[str, pytest.Item] = {}
    for item in session.items:
        by_id.setdefault(item.nodeid, item)
    with os.fdopen(reading, "rb") as requests:
        for line in requests:
            request = json.loads(line)
            end = time.monotonic() + float(request["limit"])
            children: list[int] = []
            for run in request["runs"]:
                items = [by_id[n] for n in run["ids"] if n in by_id]
                reporter.out = Path(run["out"])
                if run.get("alone"):
                    _serial_with_alone(session, reporter, set(run["alone"]),
                                       float(run["alone_limit"]), items)
                    continue
                if run.get("lane"):
                    _serial_in_lanes(session, reporter, set(run["lane"]), items, end)
                    continue
                children.append(_fork_run(session, reporter, items, run))
            killed = False
            for child in children:
                while not os.waitpid(child, os.WNOHANG)[0]:
                    if time.monotonic() > end:
                        os.kill(child, signal.SIGKILL)
                        os.waitpid(child, 0)
                        killed = True
                        break
                    time.sleep(0.002)
            os.write(writing, (json.dumps({"done": True, "killed": killed}) + "\n").encode())


def _fork_run(session: pytest.Session, reporter: ProbeReporter, items: list[pytest.Item],
              run: dict[str, Any]) -> int:
    """``items`` in order, in a child; its pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child:
        return child
    code = 0
    try:
        reporter.barrier = run.get("barrier")
        if run.get("trace") and not reporter.tracing:
            reporter.tracing = True
            sys.addaudithook(reporter._audit)
        for i, item in enumerate(items):
            nextitem = items[i + 1] if i + 1 < len(items) else None
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if session.shouldfail or session.shouldstop:
                break
    except BaseException:  # a child never returns into pytest
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _serial_with_alone(session: pytest.Session, reporter: ProbeReporter, names: set[str],
                       limit: float, items: list[pytest.Item]) -> None:
    """The serial run of ``items`` in a child; before each test of ``names``, that
    test alone in another child forked from this process (which runs no test
    itself)."""
    asks_r, asks_w = os.pipe()
    go_r, go_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:  # the serial run
        os.close(asks_r)
        os.close(go_w)
        code = 0
        try:
            for i, item in enumerate(items):
                if item.nodeid in names:
                    os.write(asks_w, f"{i}\n".encode())
                    if os.read(go_r, 1) != b"g":
                        break
                nextitem = items[i + 1] if i + 1 < len(items) else None
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
                if session.shouldfail or session.shouldstop:
                    break
        except BaseException:
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(asks_w)
    os.close(go_r)
    try:
        with os.fdopen(asks_r, "rb") as asks:
            for line in asks:
                _alone(items[int(line)], reporter, limit)
                os.write(go_w, b"g")
    finally:
        os.close(go_w)
        os.waitpid(child, 0)


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
            code = 0
            try:
                runner = items[0].config.pluginmanager.get_plugin(DRIVER_NAME)
                if runner is not None and hasattr(runner, "run"):
                    runner.run = None  # prerequisites run in the other lane
                with os.fdopen(orders_r, "rb") as orders:
                    for line in orders:
                        k = int(line)
                        following = nexts[k]
                        nextitem = items[following] if following is not None else None
                        items[k].config.hook.pytest_runtest_protocol(item=items[k],
                                                                     nextitem=nextitem)
                        os.write(answers_w, b"d")
            except BaseException:
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
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
            while not os.waitpid(child, os.WNOHANG)[0]:
                if time.monotonic() > end:
                    os.kill(child, signal.SIGKILL)
                    os.waitpid(child, 0)
                    break
                time.sleep(0.002)


def _alone(item: pytest.Item, reporter: ProbeReporter, limit: float) -> None:
    """``item`` alone, in a child of this (collected, untouched) process."""
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        try:
            # Its prerequisites ran in another process: the serial driver must
            # not skip it for not having seen them.
            runner = item.config.pluginmanager.get_plugin(DRIVER_NAME)
            if runner is not None and hasattr(runner, "run"):
                runner.run = None
            reporter.is_alone = True
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=None)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
    end = time.monotonic() + limit
    while True:
        done, _ = os.waitpid(child, os.WNOHANG)
        if done:
            return
        if time.monotonic() > end:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            line = {"id": item.nodeid, "outcome": "timeout", "writes": [], "reads": [],
                    "state": False, "seconds": limit, "alone": True}
            with reporter.out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")
            return
        time.sleep(0.002)


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
