"""From what workers report to core events: which test a report is about, and
what a worker queued on its side channel (published values, ``pytest.exit()``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from ...core.published import Relay
from ...live_run.dag_run import DagRun
from . import wire
from .ledger import Ledger
from .skips import SkipEmitter

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController

#: How many prerequisites that ran elsewhere a failure's hint names.
MOST_NAMED = 3
#: Most prerequisites looked at for a failed test's note (one report's worth of work).
MOST_LOOKED_AT = 10_000
#: Most side-channel messages taken from one worker per report or barrier.
SIDE_CHANNEL_BATCH = 10_000


class ReportFeed:
    """Feeds the test reports of a run to its core (see :meth:`feed`)."""

    def __init__(self, run: DagRun, ledger: Ledger, skips: SkipEmitter,
                 channels: Mapping[WorkerController, Any], relay: Relay | None,
                 log: Callable[[str], None]) -> None:
        self.run = run
        self.ledger = ledger
        self.skips = skips
        self.channels = channels
        self.relay = relay
        self.log = log
        # pytest.exit() requests read from a worker's side channel, not yet acted on.
        self.exit_requests: dict[WorkerController, wire.ExitRequest] = {}
        #: Per settled test, the worker that ran it (its gateway id).
        self.ran_on: dict[int, str] = {}

    def feed(self, report: pytest.TestReport) -> int | None:
        """Fold ``report`` into its test's outcome; the test's index once that is
        settled (its last report), else None."""
        run = self.run
        if self.relay is not None:
            self.read_side_channel(getattr(report, "node", None))
        elif run.tracker.inert(report):
            # Two reports of three: nothing to fold, nothing to dispatch, and
            # the time comes whole with the test's completion (see
            # mark_test_complete): which test it is about is not even looked up.
            return None
        i = run.record(report, self.index_of(report), timed=False)
        if i is None:
            return None
        node = getattr(report, "node", None)
        if node is not None:
            self.ran_on[i] = node.gateway.id
        if self.relay is not None:
            self.relay.settled(i)
        if self.skips.awaiting.pop(i, None) is not None:
            run.reported.add(i)  # the worker's own report of a skip decided here
        self.ledger.settled(i)
        return i

    def elsewhere(self, report: pytest.TestReport) -> tuple[list[tuple[str, str]], str] | None:
        """For a failed report: the prerequisites of its test (direct or not) that
        ran on another worker, nearest first (up to :data:`MOST_NAMED`), each
        as (its node id, that worker), and this worker; else None.

        A dependent that fails there may have missed state one of them left
        in its own process; the nearest is not always the one that left it
        (``a1 -> b -> a2``: ``a2`` may read what ``a1`` left), so each is
        named.  Looked for only on failures: breadth first over the test's
        prerequisites.
        """
        node = getattr(report, "node", None)
        if not report.failed or node is None or not self.ran_on:
            return None
        i = self.index_of(report)
        if i is None:
            return None
        here = node.gateway.id
        g = self.run.graph
        seen = {i}
        frontier = [i]
        found: list[tuple[str, str]] = []
        while frontier and len(seen) < MOST_LOOKED_AT and len(found) < MOST_NAMED:
            ahead: list[int] = []
            for t in frontier:
                for p in (*g.requires[t], *g.after[t]):
                    if p in seen:
                        continue
                    seen.add(p)
                    where = self.ran_on.get(p)
                    if where is not None and where != here and len(found) < MOST_NAMED:
                        found.append((self.run.nodeids[p], where))
                    ahead.append(p)
            frontier = ahead
        return (found, here) if found else None

    def index_of(self, report: pytest.TestReport) -> int | None:
        """Which test ``report`` is about: node ids may repeat (--keep-duplicates).

        A worker's reports are about the first test it was sent and has not
        completed with that node id (a worker runs what it holds in order);
        a skip this controller reports itself names its index in ``emitting``.
        """
        if self.skips.emitting is not None:
            return self.skips.emitting
        return self.index_of_sent(getattr(report, "node", None), report.nodeid)

    def index_of_sent(self, node: WorkerController | None, nodeid: str) -> int | None:
        """The first test ``node`` holds with ``nodeid`` (node ids may repeat), else any."""
        run = self.run
        if run.unique:
            return run.index.get(nodeid)  # nothing to tell apart
        for i in self.ledger.sent.get(node, ()) if node is not None else ():
            if i < run.n_run and run.nodeids[i] == nodeid:  # not the barrier
                return i
        return run.index.get(nodeid)

    def read_side_channel(self, node: WorkerController | None) -> None:
        """Take what ``node`` queued on the side channel after its plan (never waits).

        Two kinds come: a passed test's published values, sent before that
        test's reports on the same connection (so by the time its last report
        is handled here they are queued), and a ``pytest.exit()`` request
        (kept in :attr:`exit_requests`).  This is the one reader of both: a
        reader of one kind would drop a message of the other that happened to
        be queued first.
        """
        channel = None if node is None else self.channels.get(node)
        if node is None or channel is None:
            return
        # Bounded even if a channel never ran empty: the rest waits for the next call.
        for _ in range(SIDE_CHANNEL_BATCH):
            try:
                raw = channel.receive(timeout=0)
            except Exception:  # empty (execnet's TimeoutError), closed, or gone
                return
            request = wire.decode_exit(raw)
            if request is not None:
                self.exit_requests.setdefault(node, request)
                continue
            try:
                nodeid, values = wire.read_published(raw)
            except wire.WireError as exc:
                self.log(f"ignored from {node.gateway.id}: {exc}")
                continue
            i = self.index_of_sent(node, nodeid)
            if i is not None and self.relay is not None:
                self.relay.received(node, i, values)
