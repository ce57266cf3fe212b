"""The worker's plan, shipped to the controller when it asks.

A worker says hello after its collection (:func:`~.wire.hello`: its
collection's census); the controller asks the first worker whose
collection came in for its facts (:data:`~.wire.PLAN_REQUEST`).  The request
arrives in execnet's receiver thread, the collection in the main thread,
in either order: whichever comes second sends the plan.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ...planning.facts import Census, Facts
from ...shims.collector_pause import UntilTestsBegin
from . import wire


class PlanShipper:
    """Ships the plan once both the request and the collection are in.

    ``channel``: the worker's side channel; ``before_tests``: the collector's
    pause, taken only while no test has begun (see collector_pause.py).
    """

    def __init__(self, channel: Any, before_tests: UntilTestsBegin) -> None:
        self.channel = channel
        self._before_tests = before_tests
        self._lock = threading.Lock()
        self._unshipped: Callable[[], Facts] | None = None
        self._asked = False

    def collected(self, census: Census, make: Callable[[], Facts]) -> None:
        """The collection is in (main thread): say hello, ship the facts if asked.

        ``census``: what the hello says; ``make``: gathers the facts.
        """
        self.channel.send(wire.hello(census))
        with self._lock:
            self._unshipped = make
        self._ship_if_asked()  # a request may have come first

    def asked(self) -> None:
        """The controller asked for the plan (execnet's receiver thread)."""
        with self._lock:
            self._asked = True
        self._ship_if_asked()

    def _ship_if_asked(self) -> None:
        """Send the plan once both the request and the collection are in.

        Runs in execnet's receiver thread (the request) or the main thread
        (the collection), whichever comes second; the lock lets exactly one
        send it.  The main thread then waits for its first tests, which come
        only after the controller has the plan: nothing changes the items
        while the receiver thread reads them.
        """
        with self._lock:
            make = self._unshipped if self._asked else None
            if make is None:
                return
            self._unshipped = None
        # See collector_pause.py: the pause is process-wide, so it is taken only while
        # no test has begun (the main thread is at most finishing the
        # collection's bookkeeping, itself paused, or waiting for its first
        # tests, which come after the plan).
        with self._before_tests.paused():
            self.channel.send(wire.encode(make()))
