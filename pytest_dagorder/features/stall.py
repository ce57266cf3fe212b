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

A worker's stack cannot be asked for over the side channel: that is read by
execnet's thread, which the worker's main thread may keep waiting.  So each
local worker runs a thread of its own (:class:`WorkerDumps`): once the test
it runs has run for ``seconds``, and again every ``seconds`` while it runs,
it writes every other thread's stack into a file of a directory the
controller made.  A test stuck since the last event has been running for at
least ``seconds`` when the controller writes, so its dump is there (or comes
within :data:`DUMP_GRACE`).  The thread writes only while it holds the
interpreter, when no other thread's frames change: faulthandler's
watchdog (``dump_traceback_later``) reads them without it, and on CPython
3.11 that crashes a process whose main thread is busy (a worker running
deep calls died from one dump in a few).  A test that holds the interpreter
in a C loop therefore gets no stack, as serially.  Per test it costs two
hook calls that each set one attribute; while nothing hangs, nothing else.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from ..options import wording

#: workerinput key: the directory a local worker dumps its stack into.
STALL_KEY = "dagorder_stall_dir"
#: How long the report waits for a dump made after a worker's test started
#: (the worker's thread and the controller's need not wake in step).
DUMP_GRACE = 3.0
#: The first line of every dump a worker writes.
_DUMP_HEAD = "pytest-dagorder stack dump"


def dump_file(directory: str, worker: str) -> str:
    return os.path.join(directory, f"{worker}.txt")


class WorkerDumps:
    """A worker's side: the thread writing its stacks, registered as a plugin
    for the test hooks that tell it when a test runs."""

    def __init__(self, path: str, seconds: float) -> None:
        self.path = path
        self.seconds = seconds
        self._since: float | None = None  # monotonic: when the running test started
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="dagorder-stall-dumps",
                                        daemon=True)
        self._thread.start()

    @classmethod
    def for_worker(cls, config: pytest.Config, seconds: float) -> WorkerDumps | None:
        """A local worker's dumps, or None (report off, or the worker is remote)."""
        directory = config.workerinput.get(STALL_KEY)  # type: ignore[attr-defined]
        if directory is None or seconds <= 0:
            return None
        worker = str(config.workerinput.get("workerid", os.getpid()))  # type: ignore[attr-defined]
        return cls(dump_file(str(directory), worker), seconds)

    def pytest_runtest_logstart(self) -> None:
        self._since = time.monotonic()

    def pytest_runtest_logfinish(self) -> None:
        self._since = None

    def close(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=DUMP_GRACE)

    def _watch(self) -> None:
        wait = self.seconds
        while not self._stop.wait(wait):
            since = self._since
            if since is None:
                wait = self.seconds
                continue
            wait = since + self.seconds - time.monotonic()
            if wait <= 0:
                self._dump()
                wait = self.seconds

    def _dump(self) -> None:
        # Replaced whole, so that the controller never reads half a dump.
        part = self.path + ".part"
        try:
            with open(part, "w", encoding="utf-8") as f:
                f.write(f"{_DUMP_HEAD}\n{other_stacks()}\n")
            os.replace(part, self.path)
        except OSError:
            pass  # no stack in the report, which says so


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
    stack: str | None  # its threads' stacks, as its dump file holds them
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


def last_dump(path: str, after: float) -> str | None:
    """The dump in ``path`` if made after ``after``, waited for up to :data:`DUMP_GRACE`."""
    deadline = time.monotonic() + DUMP_GRACE
    while True:
        try:
            fresh = os.path.getmtime(path) >= after
        except OSError:
            fresh = False  # none yet
        if fresh:
            break
        if time.monotonic() >= deadline:
            return None  # none made while the test runs
        time.sleep(0.1)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head, _, text = f.read().partition("\n")
    except OSError:
        return None
    return text if head == _DUMP_HEAD and text.strip() else None


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

    Registered as a plugin for a run the serial driver schedules.  As a
    worker's dumps, the watch's own thread writes the stacks of the other
    threads (:func:`other_stacks`): a test that holds the interpreter in a C
    loop gets no report.  The report goes
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
                          wording.stall_stack_head(self.name), other_stacks(), ""])
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
