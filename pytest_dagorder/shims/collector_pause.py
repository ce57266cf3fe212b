"""Bulk work without the cyclic garbage collector's passes.

The plugin builds its plan, and on an xdist controller its core, once per
process right after collection: tens of thousands of small objects, nearly
all acyclic (reference counting frees them) and most of them kept for the
whole run.  Every allocation counts towards CPython's collection thresholds,
and a pass over the oldest generation walks every tracked object of the
process, the collected session included: on a large suite the plan alone
set off full passes that plain pytest never makes (docs/performance.md).
Pausing the
collector for that work, and resuming it afterwards without forcing a
collection, removes those passes and changes nothing else.

The switch is process-wide (execnet's receiver thread shares it), so it is
the pytest side's policy, not the core's: the core only schedules.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import final


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside; as before afterwards (nesting is fine)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@final
class UntilTestsBegin:
    """Pauses that another thread may take only before the process runs its first test.

    ``gc.disable()`` is process-wide: a pause taken by a helper thread while a
    test runs would change how that test runs (objects that close a
    connection or release a lock in ``__del__`` would linger).  Such a thread
    pauses through :meth:`paused`, the main thread calls :meth:`begin` before
    its first test; a pause in progress then ends first, and any later one
    leaves the collector as it is.
    """

    __slots__ = ("_began", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._began = False  # no pause from now on

    @contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            if self._began:
                yield
            else:
                with collector_paused():
                    yield

    def begin(self) -> None:
        if not self._began:  # after the first test: one attribute read
            with self._lock:
                self._began = True
