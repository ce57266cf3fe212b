"""How many tasks to hand a worker at once: a moving average of durations, and batches.

Pure; shared by the xdist controller and the thread-pool runner.  One
hand-out costs a fixed amount (a message each way and a barrier on an xdist
worker; a lock round on a thread), so short tasks go out several at a time:
about ``seconds`` of work per batch at the average duration, at most
``cap``.  The time bound keeps a stop prompt: what a worker holds when told
to stop is done in about ``seconds``.  :class:`Lag` tells how far the
controller's view of a worker trails it, so that what a worker holds is
counted as the worker has it, not as the controller last heard.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import final

#: Weight of the newest sample: the average follows a change of pace within
#: a few tasks, and one outlier moves it by a fifth.
WEIGHT = 0.2


@final
class Pacing:
    __slots__ = ("average", "cap", "fast", "seconds")

    def __init__(self, *, fast: float, seconds: float, cap: int, initial: float) -> None:
        self.fast = fast  # tasks shorter than this (on average) are batched
        self.seconds = seconds
        self.cap = cap
        self.average = initial

    @property
    def is_fast(self) -> bool:
        return self.average < self.fast

    def record(self, duration: float) -> bool:
        """Add one task's duration; True if that changed :attr:`is_fast`."""
        was_fast = self.is_fast
        self.average = (1 - WEIGHT) * self.average + WEIGHT * duration
        return self.is_fast != was_fast

    def batch(self) -> int:
        """Tasks per hand-out: 1 for slow tasks, else about ``seconds`` worth (<= cap)."""
        if not self.is_fast:
            return 1
        return max(1, min(self.cap, int(self.seconds / max(self.average, 1e-6))))


@final
class Lag:
    """How far behind a worker the controller's view of it is, in seconds.

    The controller learns that a test ended only when it handles that
    test's report, after every event queued before it; when it is short of
    CPU (more workers than cores) it runs seconds behind the workers, and a
    worker it tops up "at half a batch left" has in truth run dry.  A report
    carries the worker's wall-clock time of its end: ``now - stamp`` is the
    delay plus the two clocks' offset.  The smallest such gap seen for a
    worker stands for the offset (and the least transport time), so a
    worker on another machine with a skewed clock is measured alike; what a
    report's gap exceeds it by is the lag.  Capped at ``cap`` seconds: a
    clock stepped back on a worker must not make it look ever further behind.
    """

    __slots__ = ("_least", "cap")

    def __init__(self, *, cap: float) -> None:
        self.cap = cap
        self._least: dict[Hashable, float] = {}

    def observe(self, worker: Hashable, now: float, stamp: float) -> float:
        """The lag of ``worker`` told by a report stamped ``stamp`` handled at ``now``."""
        gap = now - stamp
        least = self._least.get(worker)
        if least is None or gap < least:
            self._least[worker] = gap
            return 0.0
        return min(self.cap, gap - least)

    def forget(self, worker: Hashable) -> None:
        self._least.pop(worker, None)
