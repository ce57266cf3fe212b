"""Never hang silently: once no test has reported for a while, say who runs what, and where.

Under xdist (:class:`StallWatch`, :class:`WorkerDumps`, :class:`ControllerDumps`)
and serially (:class:`SerialStall`); only for a run the plugin schedules.

The controller learns nothing while every worker is stuck: xdist's loop
waits on its event queue and calls nothing of the scheduler's until an event
comes.  So a daemon thread (:class:`StallWatch`) compares the time of the
last event (a test started or reported) with ini ``dag_stall_report``; the
first time the quiet spell reaches it, it writes which test each worker has
been running since when, and each worker's stack, and goes back to waiting.
The run itself is not touched.

A worker's stack cannot be asked for: its main thread may wait in C code
(a selector with no timeout) or hold the interpreter in a C loop, and the
side channel is read by a Python thread that would need the interpreter
too.  faulthandler's watchdog is a C thread: each local worker arms it once
(:class:`WorkerDumps`), to dump every thread's stack every ``seconds`` into a
file of a directory the controller made.  A test stuck since the last event
has been running for at least ``seconds`` when the controller writes, so
one of those dumps was made while it was stuck: the last one.  While
nothing hangs this costs one dump per worker every ``seconds`` and nothing
per test but a failed one: pytest's faulthandler plugin cancels the timer at
every failed test (``pytest_exception_interact``), so the worker arms it
again after.  pytest's own ``faulthandler_timeout`` re-arms the same
faulthandler timer around every test; where it is set the worker leaves the
timer to it (its dumps go to the terminal's stderr) and the report says so.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

import pytest

from ..options import wording

#: workerinput key: the directory a local worker dumps its stack into.
STALL_KEY = "dagorder_stall_dir"
#: How long the report waits for a dump made after a worker's test started
#: (the worker's timer and the controller's need not fire in step).
DUMP_GRACE = 3.0
#: Every dump faulthandler's timer makes starts with this.
_DUMP_HEAD = "Timeout ("


def leaves_faulthandler_alone(config: pytest.Config) -> bool:
    """pytest's ``faulthandler_timeout`` uses the one faulthandler timer per test."""
    try:
        return float(config.getini("faulthandler_timeout") or 0) > 0
    except (ValueError, TypeError):
        return False


def dump_file(directory: str, worker: str) -> str:
    return os.path.join(directory, f"{worker}.txt")


class WorkerDumps:
    """A worker's side: the repeating faulthandler timer and its file."""

    def __init__(self, config: pytest.Config, seconds: float) -> None:
        directory = config.workerinput.get(STALL_KEY)  # type: ignore[attr-defined]
        self.file: IO[str] | None = None
        self.seconds = seconds
        if directory is None or seconds <= 0 or leaves_faulthandler_alone(config):
            return
        worker = str(config.workerinput.get("workerid", os.getpid()))  # type: ignore[attr-defined]
        try:
            self.file = open(dump_file(str(directory), worker), "w")  # noqa: SIM115 - kept open for the C thread
        except OSError:
            return  # no stack in the report, which says so
        self.rearm()

    def rearm(self) -> None:
        """Arm the timer (again: pytest cancels it at every failed test, see DagWorker)."""
        if self.file is not None:
            faulthandler.dump_traceback_later(self.seconds, repeat=True, file=self.file)

    def close(self) -> None:
        if self.file is not None:
            faulthandler.cancel_dump_traceback_later()
            self.file.close()
            self.file = None


class StallWatch:
    """A thread writing the report once per quiet spell (the controller's or the serial run's)."""

    def __init__(self, seconds: float, describe: Callable[[], list[str]],
                 write: Callable[[list[str]], None]) -> None:
        self.seconds = seconds
        self._describe = describe
        self._write = write
        self._last = time.monotonic()
        # Events seen so far, and how many there were at the last report: a
        # spell is reported once, and again only after some test has reported.
        self._beats = 0
        self._reported_at = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="dagorder-stall-watch",
                                        daemon=True)

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def start(self) -> None:
        if not self.started and not self._stop.is_set():
            self._thread.start()

    def beat(self) -> None:
        """A test started or reported (called on the main thread)."""
        self._last = time.monotonic()
        self._beats += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=DUMP_GRACE + 1)

    def _watch(self) -> None:
        while True:
            quiet = time.monotonic() - self._last
            reported = self._reported_at == self._beats
            wait = self.seconds if reported else self.seconds - quiet
            if self._stop.wait(max(wait, 0.01)):
                return
            beats = self._beats
            if beats == self._reported_at or time.monotonic() - self._last < self.seconds:
                continue
            self._reported_at = beats
            try:
                self._write(self._describe())
            except Exception as exc:  # the report must never end the run
                print(f"pytest-dagorder: stall report failed: {exc!r}", file=sys.stderr)


@dataclass(frozen=True)
class WorkerState:
    """One worker at the stall report."""

    name: str
    test: str | None  # the node id of the test it runs; None: none
    since: float | None  # wall clock: when it got to that test (or became idle)
    stack: str | None  # faulthandler's dump of its threads
    no_stack: str | None  # why there is no stack


def report_lines(seconds: float, workers: Sequence[WorkerState]) -> list[str]:
    now = time.time()
    lines = [wording.stall_head(seconds)]
    lines.extend(wording.stall_worker(w.name, w.test, None if w.since is None else now - w.since,
                                      w.since) for w in workers)
    for w in workers:
        if w.stack:
            lines.append(wording.stall_stack_head(w.name))
            lines.extend("    " + line for line in w.stack.rstrip().splitlines())
        elif w.no_stack:
            lines.append(wording.stall_no_stack(w.name, w.no_stack))
    return lines


def last_dump(path: str, after: float | None) -> str | None:
    """The last dump in ``path`` if made after ``after``, waited for up to :data:`DUMP_GRACE`."""
    deadline = time.monotonic() + DUMP_GRACE
    while True:
        try:
            fresh = after is None or os.path.getmtime(path) >= after
        except OSError:
            return None
        if fresh:
            break
        if time.monotonic() >= deadline:
            return None  # made before the test started: not where it waits
        time.sleep(0.1)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    head = text.rfind(_DUMP_HEAD)
    if head < 0:
        return None
    # The heading line (faulthandler's own "Timeout (h:mm:ss)!") says nothing here.
    return text[head:].partition("\n")[2] or None


class ControllerDumps:
    """The directory local workers dump into; made on first use, removed at the end."""

    def __init__(self) -> None:
        self.directory: str | None = None

    def for_node(self, node: Any) -> str | None:
        spec = getattr(getattr(node, "gateway", None), "spec", None)
        if spec is None or not getattr(spec, "popen", False) or getattr(spec, "via", None):
            return None  # a remote worker's file would not be on this machine
        if self.directory is None:
            self.directory = tempfile.mkdtemp(prefix="pytest-dagorder-stall-")
        return self.directory

    def remove(self) -> None:
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None


class SerialStall:
    """The serial driver's watch: the same report, for the one process running the tests.

    Registered as a plugin for a run the serial driver schedules.  Here the
    watch's own thread writes the stacks of the other threads (``other_stacks``), so
    faulthandler's one timer stays free for the process's other users (pytest's
    ``faulthandler_timeout``, a conftest's own); a test that holds the
    interpreter in a C loop therefore gets no report serially.  The report goes
    to a copy of the terminal's stderr, made before any test: descriptor 2 itself
    is captured while a test runs.
    """

    def __init__(self, seconds: float, name: str) -> None:
        self.seconds = seconds
        self.name = name
        self.current: tuple[str, float] | None = None  # node id, since (wall clock)
        self.out = os.dup(2)
        self.watch = StallWatch(seconds, self._describe, self._write)
        self.watch.start()

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.current = (nodeid, time.time())
        self.watch.beat()

    def pytest_runtest_logfinish(self) -> None:
        self.current = None
        self.watch.beat()

    def close(self) -> None:
        self.watch.stop()
        if self.out >= 0:
            os.close(self.out)
            self.out = -1

    def _describe(self) -> list[str]:
        current = self.current
        test, since = current if current is not None else (None, None)
        return report_lines(self.seconds, [WorkerState(self.name, test, since, None, None)])

    def _write(self, lines: list[str]) -> None:
        out = self.out
        if out < 0:
            return
        bar = "!" * 30
        text = "\n".join(["", f"{bar} stall (pytest-dagorder) {bar}", *lines,
                          wording.stall_serial_stack_head(self.name), other_stacks(), ""])
        os.write(out, text.encode("utf-8", "replace"))


def other_stacks() -> str:
    """Every thread's stack but the calling one's (the watch's own frames inform
    nobody), most recent call first, as faulthandler writes them."""
    own = threading.get_ident()
    names = {t.ident: t.name for t in threading.enumerate()}
    blocks = []
    for ident, frame in sys._current_frames().items():
        if ident == own:
            continue
        calls = [f'  File "{f.f_code.co_filename}", line {f.f_lineno} in {f.f_code.co_name}'
                 for f in _outward(frame)]
        blocks.append("\n".join([f"Thread {ident:#x} ({names.get(ident, 'unnamed')}), most "
                                 "recent call first:", *calls]))
    return "\n\n".join(blocks)


def _outward(frame: Any) -> list[Any]:
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out
