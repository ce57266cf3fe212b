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
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Final

import pytest

OUT: Final = "DAGORDER_PROBE_OUT"
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

    def pytest_runtest_logstart(self, nodeid: str) -> None:
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
                "state": self.state is not None and self._state() != self.state}
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
    for name, value in (("dag_store_durations", False), ("xmlpath", None)):
        if hasattr(config.option, name):
            setattr(config.option, name, value)
    config.pluginmanager.register(ProbeReporter(config, Path(out)), "dagorder-probe")
