"""A test's events from an xdist worker in two or three messages, not six.

Why.  xdist's worker sends every event of a test on its own: logstart,
the setup, call and teardown reports, logfinish and
``runtest_protocol_complete``.  Each is a frame written and flushed by the
worker, then read and decoded by one of the controller's receiver threads,
which share the controller's interpreter with its event loop.  With short
tests that fixed cost is a sizeable part of the run (20,000 trivial tests
at ``-n 4``: see docs/performance.md).  So a worker holds what comes after
a test's setup until its ``runtest_protocol_complete`` and sends it
together; while its tests are short (under :data:`SHORT` on average) it
also holds a test's start until its setup ended.  The controller hands the
events to xdist one by one, in order, as if each had come alone.

What stays as it was.  Every event xdist sends is delivered, in the order
it was sent.  A test's setup report goes as soon as the setup ended, with
the test's start: ``-v`` shows the start while the test runs (at once, once
tests take a while), a worker that crashes shows which test it was
running, and the timeline has the crashed test's bar.  A report that did
not pass goes at once with what was held before it (``-x`` and
``--maxfail`` act as soon as without batches), and any other event (a
warning, the end of the worker's session) sends what is held first.  What
waits: a passed call report, until its test's teardown ended (a passing
test's line shows after its teardown, not before); if the worker dies in
that teardown, the report dies with it, and xdist reports the crash on the
test as it always does (without batches the test would count once as
passed and once as failed).

When.  Only where the controller unpacks batches, which it says in
``workerinput`` (the DAG scheduler's modes, this plugin on both sides).
Anything else on either side leaves xdist's own path alone.  No thread:
nothing is sent but from where xdist itself sends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from .internals import replace_xdist_sendevent, wrap_xdist_receiver
from .pacing import Pacing

#: ``workerinput`` key: the controller unpacks batches from this worker.
BATCH_KEY = "dagorder_batches"
#: The event name of a batch; xdist's own names never collide with it.
BATCH_EVENT = "dagorder_batch"
#: Tests shorter than this on average (seconds, xdist's protocol time) have
#: their start held until their setup ended.  The controller batches its
#: dispatches below the same average (xdist.FAST_TEST is this value).
SHORT = 0.02
#: Events that may wait for the next one that goes: a passed report (not a
#: setup's), the end of a test's logging, and a test's start while tests
#: are short (see module docstring).
WAITING = frozenset({"testreport", "logfinish", "logstart"})

Event = tuple[str, dict[str, Any]]


class EventBatcher:
    """Stands in for a worker's ``WorkerInteractor.sendevent`` (see module docstring).

    ``inner`` is the interactor's own ``sendevent`` (an event on its own),
    ``send`` its channel's ``send`` (a batch).  xdist sends from its main
    thread, and from execnet's receiver thread when it gives tests back
    (work stealing): a lock keeps the held list whole.
    """

    def __init__(self, inner: Callable[..., None], send: Callable[[object], None]) -> None:
        self._inner = inner
        self._send = send
        self._held: list[Event] = []
        self._lock = threading.Lock()
        self._closed = False
        # Only its average is used: starting at a second, about twenty short
        # tests make it short.
        self._pace = Pacing(fast=SHORT, seconds=1.0, cap=1, initial=1.0)

    def sendevent(self, name: str, **kwargs: Any) -> None:
        # Called for every event of every test: decided inline, with few calls.
        with self._lock:
            if name == "runtest_protocol_complete":
                self._pace.record(float(kwargs.get("duration", 1.0)))
            if self._closed or name not in WAITING:
                wait = False
            elif name == "testreport":
                data = kwargs["data"]
                wait = data.get("outcome") == "passed" and data.get("when") != "setup"
            else:
                # logstart: only while tests are short
                wait = name == "logfinish" or self._pace.is_fast
            if wait:
                self._held.append((name, kwargs))
            elif self._held:
                # The test's end, a report that did not pass, anything else:
                # it goes at once, with what it follows.
                self._held.append((name, kwargs))
                self._flush()
            else:
                self._inner(name, **kwargs)

    def close(self) -> None:
        """Send what is held and stop holding."""
        with self._lock:
            self._closed = True
            self._flush()

    def _flush(self) -> None:
        # Called with the lock held.
        held = self._held
        if not held:
            return
        self._held = []
        if len(held) == 1:
            self._inner(held[0][0], **held[0][1])
        else:
            # A tuple: execnet writes a list item by item with its index.
            self._send((BATCH_EVENT, tuple(held)))


def unbatching(process: Callable[[Any], None]) -> Callable[[Any], None]:
    """Wrap xdist's ``process_from_remote``: a batch becomes its events, in order."""
    def process_from_remote(eventcall: Any) -> None:
        if type(eventcall) is tuple and eventcall[0] == BATCH_EVENT:
            for event in eventcall[1]:
                process(event)
        else:
            process(eventcall)
    return process_from_remote


def unpack_batches_from(node: Any) -> None:
    """Controller: unpack ``node``'s batches and tell the worker it may send them."""
    if wrap_xdist_receiver(node, unbatching):
        node.workerinput[BATCH_KEY] = True


def batch_events(config: pytest.Config) -> EventBatcher | None:
    """Worker: send each test's events together, if the controller unpacks them."""
    if not config.workerinput.get(BATCH_KEY):  # type: ignore[attr-defined]
        return None
    made: list[EventBatcher] = []

    def make(inner: Callable[..., None], send: Callable[[object], None]) -> Callable[..., None]:
        made.append(EventBatcher(inner, send))
        return made[0].sendevent

    replace_xdist_sendevent(config, make)
    return made[0] if made else None
