"""Task states: the vocabulary the scheduler's state machine and its placement share.

Only the state machine (:mod:`.state_machine`) changes a task's state; placement
(:mod:`.placement`) reads it to tell live queue entries from stale ones.
"""

from __future__ import annotations

from collections.abc import Hashable
from enum import Enum
from typing import Final, Literal, get_args

#: What a failure does to the rest of the run: skip its dependents, stop the
#: run, or run its dependents anyway.  (Here, not in the state machine, so the
#: options can be defined without loading it.)
FailurePolicy = Literal["skip", "stop", "run"]
FAILURE_POLICIES: Final[tuple[FailurePolicy, ...]] = get_args(FailurePolicy)

#: Whatever a driver names its workers by (a worker process's handle, a thread slot).
Worker = Hashable


class State(Enum):
    WAITING = "waiting"
    READY = "ready"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL: Final = frozenset((State.PASSED, State.FAILED, State.SKIPPED))


def check(cond: bool, message: str, *args: object) -> None:
    """Raise AssertionError(message) unless ``cond``: the invariant checks' one idiom.

    Not an ``assert`` statement, so the checks also run under ``python -O``.
    With ``args``, the message is ``message.format(*args)``, worded only when
    the check fails: a check made per task at every event formats nothing.
    """
    if not cond:
        raise AssertionError(message.format(*args) if args else message)
