"""How many tasks to hand a worker at once: a moving average of durations, and batches.

Pure; shared by the distributed controller and the thread-pool runner.  One
hand-out costs a fixed amount (a message each way and a barrier on a worker
process; a lock round on a thread), so short tasks go out several at a time:
about ``seconds`` of work per batch at the average duration, at most
``cap``.  The time bound keeps a stop prompt: what a worker holds when told
to stop is done in about ``seconds``.
"""

from __future__ import annotations

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
