"""Task moves: the table of every move a task may make, and each task's story.

:data:`TRANSITIONS` lists every (state before, state after) a task may move
by and the causes that may move it; the state machine's one state-changing
function checks each move against it.  A :class:`History`, kept when a
driver explains a run, records every move with its cause (:class:`Transition`),
so one test's story can be told in order.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, final

from . import wording
from .states import State, Worker

_W, _R, _RUN = State.WAITING, State.READY, State.RUNNING
_P, _F, _S = State.PASSED, State.FAILED, State.SKIPPED

#: Every move a task makes, with the causes that may make it.  The state
#: machine checks every move against it; a move is recorded (a
#: :class:`Transition`) where the machine keeps a :class:`History`.
TRANSITIONS: Final[Mapping[tuple[State, State], frozenset[str]]] = {
    (_W, _R): frozenset({"free", "released"}),  # no prerequisite / its last one ended
    (_R, _RUN): frozenset({"started"}),
    (_W, _RUN): frozenset({"held"}),  # behind prerequisites running on that worker
    (_RUN, _R): frozenset({"put back"}),  # its worker left
    (_RUN, _W): frozenset({"put back"}),  # held there, its prerequisites still open
    **{(b, a): frozenset({"ended"}) for b in (_W, _R, _RUN) for a in (_P, _F)},
    (_W, _F): frozenset({"ended", "failed check"}),  # a checked prerequisite did not pass
    **{(b, _S): frozenset({"skipped"}) for b in (_W, _R, _RUN)},
}


def moves_allowed(table: Mapping[tuple[State, State], frozenset[str]]
                  ) -> frozenset[tuple[str, str, str]]:
    """``table`` as (before, after, cause) by the states' names: what the check
    every move makes looks up (a name hashes at the speed of a str; an enum
    member's hash is a Python call)."""
    return frozenset((before._name_, after._name_, cause)
                     for (before, after), causes in table.items() for cause in causes)


@dataclass(frozen=True, slots=True)
class Transition:
    """One move of a task and its cause (a key of :data:`TRANSITIONS`).

    ``by``: the task whose end caused it (released by, skipped or failed
    because of), or, held, the prerequisite it was held for; ``worker``:
    where it started, was held, was put back from or ended; ``detail``: the
    outcome it ended with, or the skip's reason; ``waited``: started, how
    many tasks started on other workers while it was ready and its affinity
    group was running on this worker (placement kept it for that worker).
    """

    before: State
    after: State
    cause: str
    by: int | None = None
    worker: Worker | None = None
    detail: str | None = None
    waited: int = 0

    def describe(self, name: Callable[[int], str],
                 worker_name: Callable[[Worker], str] | None = str) -> str:
        """The move for people: ``released by test_a``, ``held on w0 for test_a``,
        ``skipped because prerequisite test_a failed``; ``worker_name``: how
        to name a worker (None: not at all, one process ran everything)."""
        worker = (None if self.worker is None or worker_name is None
                  else worker_name(self.worker))
        return wording.move(self.cause, None if self.by is None else name(self.by), worker,
                            self.detail, self.waited)


@final
class History:
    """Every task's moves, oldest first, each with its cause.

    For a start, also how many tasks started on other workers while the task
    was ready and its affinity group was running on this worker
    (:attr:`Transition.waited`): ``group_of(task)`` names the task's group
    (None: free), by identity.
    """

    __slots__ = ("_group_began", "_group_of", "_moves", "_own_starts", "_ready_at", "_starts")

    def __init__(self, group_of: Callable[[int], object | None]) -> None:
        self._moves: dict[int, list[Transition]] = {}
        self._group_of = group_of
        # The position in the run's starts at which each ready task became
        # ready, and each worker's starts by position, so a start can say how
        # many tasks started elsewhere while it was ready.
        self._starts = 0
        self._ready_at: dict[int, int] = {}
        self._own_starts: dict[Worker, list[int]] = {}
        self._group_began: dict[int, int] = {}  # by id() of the group: its first start

    def record(self, i: int, before: State, after: State, cause: str, by: int | None,
               worker: Worker | None, detail: str | None) -> None:
        """Task ``i`` moves from ``before`` to ``after`` (already checked against
        :data:`TRANSITIONS`)."""
        waited = 0
        if after is State.READY:
            self._ready_at[i] = self._starts
        elif after is State.RUNNING and worker is not None:
            own = self._own_starts.setdefault(worker, [])
            group = self._group_of(i)
            began = (self._starts if group is None
                     else self._group_began.setdefault(id(group), self._starts))
            since = self._ready_at.pop(i, self._starts)
            if before is State.READY and began < since:
                # Its group ran on this worker already when it became ready:
                # every start elsewhere since is one it could not take.
                waited = self._starts - since - (len(own) - bisect_left(own, since))
            own.append(self._starts)
            self._starts += 1
        self._moves.setdefault(i, []).append(
            Transition(before, after, cause, by, worker, detail, waited))

    def of(self, task: int) -> list[Transition]:
        """``task``'s moves so far, oldest first."""
        return list(self._moves.get(task, ()))
