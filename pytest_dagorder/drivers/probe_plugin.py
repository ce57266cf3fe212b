"""The plugin inside each probe process of ``--dag-find-missing`` (loaded with ``-p``).

It reports each test's outcome (and, asked to, the paths the test touched)
as JSON lines into the file ``DAGORDER_PROBE_OUT`` names, holds a test
at a start line shared with another probe process (``DAGORDER_PROBE_BARRIER``)
so that two tests overlap on purpose, and keeps the probe from writing what a
normal run writes: the durations file, JUnit XML.

The paths come from Python's audit events (``open``, ``os.remove``,
``sqlite3.connect``, ...) while a test runs, less the interpreter's own
files and the session's temporary directory (each test's own).
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

_WRITE_FLAGS: Final = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
#: Audit events that change the path(s) among their arguments.
_CHANGES: Final = {"os.remove": 1, "os.rmdir": 1, "os.mkdir": 1, "os.rename": 2,
                   "shutil.rmtree": 1, "os.truncate": 1, "os.chmod": 1, "sqlite3.connect": 1}
_IGNORED_SUFFIXES: Final = (".py", ".pyc", ".pyi", ".so", ".pth", ".pyd")


class ProbeReporter:
    def __init__(self, config: pytest.Config, out: Path) -> None:
        self.out = out
        self.phases: dict[str, list[str]] = {}
        self.current: str | None = None
        self.writes: set[str] = set()
        self.reads: set[str] = set()
        self.ignored = tuple(str(Path(p).resolve()) for p in {
            sys.prefix, sys.base_prefix, sys.exec_prefix, "/dev", "/proc", "/sys"})
        self.basetemp: str | None = None
        self.barrier = os.environ.get(BARRIER)
        if os.environ.get(TRACE) == "1":
            sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.current is None:
            return
        if event == "open":
            path, mode, flags = (*args, None, None)[:3]
            writes = (any(c in mode for c in "wax+") if isinstance(mode, str)
                      else isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
            self._note(path, writes)
        elif event in _CHANGES:
            for path in args[:_CHANGES[event]]:
                self._note(path, True)

    def _note(self, path: object, writes: bool) -> None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str | os.PathLike) or str(path) in ("", ":memory:"):
            return
        full = os.path.abspath(os.fspath(path))
        if (full.endswith(_IGNORED_SUFFIXES) or "__pycache__" in full
                or full.startswith(self.ignored)
                or (self.basetemp is not None and full.startswith(self.basetemp))):
            return
        (self.writes if writes else self.reads).add(full)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        factory = getattr(session.config, "_tmp_path_factory", None)
        if factory is not None:
            self.basetemp = str(factory.getbasetemp().resolve())

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.current = nodeid
        self.writes, self.reads = set(), set()
        self.phases[nodeid] = []

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
        line = {"id": nodeid, "outcome": outcome, "writes": sorted(self.writes),
                "reads": sorted(self.reads - self.writes)}
        with self.out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        self.current = None


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
