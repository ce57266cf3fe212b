"""What the controller sent each worker and has not heard back about."""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController


class Ledger:
    """Per worker: the indices sent and not yet complete (barriers too), and
    the real tests in flight (sent, not yet settled); per sent test, its worker."""

    def __init__(self) -> None:
        self.sent: dict[WorkerController, deque[int]] = {}
        self.inflight: dict[WorkerController, int] = {}
        self.running_at: dict[int, WorkerController] = {}
        #: Per worker: when (wall clock) it got to the first index it has not
        #: completed (its previous one completed, or it was idle and was sent
        #: work); what a stall report says the worker has been busy with since.
        self.head_since: dict[WorkerController, float] = {}

    def add(self, node: WorkerController) -> None:
        if node in self.sent:
            raise ValueError(f"node {node} added twice")
        self.sent[node] = deque()
        self.inflight[node] = 0

    def remove(self, node: WorkerController) -> deque[int]:
        """Forget ``node``; what it was sent and had not completed, in order."""
        self.inflight.pop(node, None)
        self.head_since.pop(node, None)
        return self.sent.pop(node, deque())

    def sent_to(self, node: WorkerController, tasks: list[int], indices: list[int]) -> None:
        """``node`` was sent ``indices``: the real tests ``tasks`` (and a barrier)."""
        for i in tasks:
            self.running_at[i] = node
        self.inflight[node] += len(tasks)
        pending = self.sent[node]
        if not pending:
            self.head_since[node] = time.time()
        pending.extend(indices)

    def completed(self, node: WorkerController, index: int) -> None:
        """``node`` is done with ``index`` (its reports, if any, came first)."""
        pending = self.sent.get(node)
        if pending is not None and index in pending:
            pending.remove(index)
            self.head_since[node] = time.time()

    def settled(self, i: int) -> None:
        """Test ``i``'s outcome is known: it no longer counts as in flight."""
        node = self.running_at.pop(i, None)
        if node is not None and node in self.inflight:
            self.inflight[node] -= 1

    def forget_tasks_of(self, node: WorkerController) -> None:
        for i in [i for i, n in self.running_at.items() if n is node]:
            del self.running_at[i]
