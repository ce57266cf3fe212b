"""Flow control: how many tests each worker has in flight, and handing them out.

The core decides which tests may run and where (:meth:`take`, :meth:`ahead`
of the scheduler core); this decides when a worker is topped up and by how
many, and sends them (a barrier last, see barrier.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...core.pacing import Pacing
from ...core.published import Relay
from ...core.state_machine import StateMachine
from ...live_run.dag_run import DagRun
from . import wire
from .closing import OpenScopes
from .ledger import Ledger

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController

#: Real tests in flight per worker when tests take a while: one, so that no
#: test ever waits behind another on a busy worker while a worker is idle
#: (more in flight made random DAGs measurably slower: docs/performance.md).
MAX_PIPELINE = 1
#: Except while more tests are ready than there are workers and what a worker
#: holds is recorded to take less than SHORT_TEST seconds together: it is
#: then topped up to that, once it holds less than half (a send carries
#: several tests, as for batches), with tests recorded as short themselves:
#: a long one held behind a short test delayed what that test released by
#: its whole duration (shapepy's zero-second ``test_end``s: their dependent,
#: the run's longest chain, waited behind a 40 s test).  With one test in flight, such a worker
#: idles a round trip (its report to this process, the next dispatch back:
#: 5-20 ms on a busy host) after every test; with more ready than workers,
#: no worker waits for a test held this way, and the tests held are done
#: within SHORT_TEST (figures in docs/performance.md).  By recorded
#: durations only: a cold run, which knows none, keeps one in flight.
SHORT_TEST = 0.2
#: Tests this fast (moving average, seconds) make the round trip of a dispatch
#: the main cost: then several are sent at once, as xdist's own load
#: scheduling batches more when tests are short.  How many: about
#: BATCH_SECONDS of tests at the average duration, at most FAST_PIPELINE.
#: Every dispatch costs a message each way and a barrier on the worker, and
#: the send itself holds up this process's main thread (on a busy host it
#: waits for the interpreter lock and a CPU, far longer than handling a
#: report), so fewer, larger batches save time; the time bound keeps a stop
#: (-x) prompt: what a worker holds when it is told to stop runs in about
#: BATCH_SECONDS.  The cap only guards against a wrong average: a low cap
#: brings back the many sends (figures for both in docs/performance.md).
FAST_TEST = 0.02
BATCH_SECONDS = 0.5
FAST_PIPELINE = 1000
#: Tests in flight per worker where the workers have no barrier item (a
#: suite that declares nothing): the one running, the next (a worker starts a
#: test only once it holds the next), and one more, so that a worker starts
#: its next test without waiting for this process to hear the last one ended.
PLAIN_DEPTH = 3
#: A worker is topped up when fewer real tests than this are in flight
#: (the current one and the next, as xdist's own MIN_PENDING) or, for fast
#: tests, fewer than half of what it is brought up to (see
#: Dispatcher._low_water).
LOW_WATER = 2


class Dispatcher:
    """Tops workers up from the core and sends them their tests."""

    def __init__(self, ledger: Ledger, channels: Mapping[WorkerController, Any],
                 log: Callable[[str], None], pace: Pacing, *, ahead: bool,
                 barrier: int, plain: bool = False, relay: Relay | None = None,
                 dag_users: Sequence[bool] = (), scopes: OpenScopes | None = None) -> None:
        self.ledger = ledger
        self.channels = channels
        self.log = log
        # Speculative hand-out needs workers to gate, which they do under "skip".
        self.ahead = ahead
        # How many tests go out at once (the scheduler records the durations).
        self.pace = pace
        self.dead: set[WorkerController] = set()  # sending to them failed; xdist removes them soon
        self.barrier = barrier  # index of the workers' barrier item; real tests are below it
        # The suite declares nothing (see deciding/decide.plain_run): the workers have
        # no barrier, so every worker always holds its next test or is told
        # to shut down (the lookahead rule in barrier.py's docstring).
        self.plain = plain
        # Published values: what the readers among the tests sent must receive first.
        self.relay = relay
        self.dag_users = dag_users
        # Which class and module scopes a dispatch's last test ends (see closing.py).
        self.scopes = scopes
        # The run's longest path and its work, by recorded durations (see _chain_bound).
        self._longest: tuple[float, float] | None = None

    def dispatch(self, run: DagRun, eligible: Callable[[WorkerController], bool]) -> None:
        """Top up every worker that needs it; ``eligible`` says which may get work."""
        machine = run.machine
        inflight = self.ledger.inflight
        if self.plain:
            self._dispatch_plain(run, eligible)
            return
        fast = self.pace.is_fast
        # No worker is brought up to more than a batch (see _want).
        if fast and inflight and min(inflight.values()) >= self._low_water(self.pace.batch()):
            # Every worker, usable or not, holds its next test: nothing to top
            # up (the common case with batches, checked after nearly every report).
            return
        nodes = self._usable(eligible)
        ahead = self.ahead
        # First every idle worker gets work, then busy ones are topped up.
        self._fill_idle(run, nodes)
        held = False
        for node in nodes:
            have = inflight[node]
            if not fast:
                if not have:
                    continue
                # Topped up at half, so that a send carries several tests,
                # not one per report (each send is a barrier on the worker).
                more = self._short_more(run, node, [], len(nodes), below=SHORT_TEST / 2)
                if more:
                    self._send(run, node, more)
                elif ahead and have == 1:
                    # Slow tests, one in flight: add the test that can start only
                    # once it ended (its dependent, its group's next).  The worker
                    # starts that one without a round trip through this process;
                    # no other worker could have started it sooner.
                    tasks = machine.ahead(node, 1)
                    self._send(run, node, tasks)
                    held = held or bool(tasks)
                continue
            want = self._want(machine, node, len(nodes))
            if 0 < have < self._low_water(want) and have < want:
                # Fast tests: a worker holding the rest of its group takes its
                # next group now, not a round trip after the group's end.
                self._send(run, node, self._fill(machine, node, want - have, next_group=True))
        if held and any(inflight[node] == 0 for node in nodes):
            # A test handed out ahead may have opened a fence (core/placement.Fences:
            # in a suite whose every test has an ordinal, each hand-out opens the
            # next): the tests behind it go to the idle workers now, not at the
            # next report, which may be a long test's.
            self._fill_idle(run, nodes)

    def _fill_idle(self, run: DagRun, nodes: list[WorkerController]) -> None:
        """Give work to every worker of ``nodes`` that has none in flight."""
        machine = run.machine
        inflight = self.ledger.inflight
        fast = self.pace.is_fast
        for node in nodes:
            if inflight[node] == 0 and node not in self.dead:
                want = self._want(machine, node, len(nodes))
                tasks = self._fill(machine, node, want)
                if not fast and tasks:
                    tasks += self._short_more(run, node, tasks, len(nodes))
                self._send(run, node, tasks)

    def _short_more(self, run: DagRun, node: WorkerController, tasks: list[int],
                    n_nodes: int, *, below: float = SHORT_TEST) -> list[int]:
        """More tests for ``node``, one at a time, while more are ready than
        there are workers and what it holds (``tasks`` included) is recorded
        to take less than :data:`SHORT_TEST` seconds, up to the first ready
        test that is not short itself; none if it holds ``below`` seconds or more."""
        durations = run.graph.durations
        barrier = self.barrier
        state = run.machine.state
        held = sum(durations[i] for i in self.ledger.sent.get(node, ())
                   if i < barrier and not state[i].terminal)
        held += sum(durations[i] for i in tasks)
        if held >= below or self._chain_bound(run, n_nodes):
            return []
        count = self.ledger.inflight[node] + len(tasks)
        out: list[int] = []
        machine = run.machine
        while (held < SHORT_TEST and machine.ready_count > n_nodes
               and count + len(out) < FAST_PIPELINE):
            # A worker holding the rest of its group takes its next group
            # now, as for fast tests, not a round trip after the group's end.
            got = self._fill(machine, node, 1, next_group=True, shorter=SHORT_TEST)
            if not got:
                break
            out += got
            held += sum(durations[i] for i in got)
        return out

    def _chain_bound(self, run: DagRun, n_nodes: int) -> bool:
        """Whether the run's longest path (recorded durations) is longer than its
        work shared among ``n_nodes``: then that path's next test, once ready,
        would wait behind what a worker holds at every link, so tests are not
        held for short ones."""
        if self._longest is None:
            graph = run.graph
            self._longest = (max(graph.critical_path(), default=0.0), sum(graph.durations))
        longest, work = self._longest
        return longest > work / max(1, n_nodes)

    def _fill(self, machine: StateMachine, node: WorkerController, limit: int, *,
              next_group: bool = False, shorter: float | None = None) -> list[int]:
        """Up to ``limit`` tests for ``node``: ready ones (``shorter``: up to
        the first recorded to take that long, see StateMachine.take), then
        (when tests may be handed out ahead) those that wait only on what it
        runs or holds, which it starts without a round trip through this process."""
        ahead = self.ahead
        tasks = machine.take(node, limit, ahead=ahead, next_group=next_group, shorter=shorter)
        if ahead and len(tasks) < limit:
            tasks += machine.ahead(node, limit - len(tasks))
        return tasks

    def _usable(self, eligible: Callable[[WorkerController], bool]) -> list[WorkerController]:
        return [n for n in self.ledger.sent
                if eligible(n) and not n.shutting_down and n not in self.dead]

    def _dispatch_plain(self, run: DagRun, eligible: Callable[[WorkerController], bool]) -> None:
        """Dispatch without barriers: a worker runs a test only once it holds the next.

        Every test is ready from the start (nothing is declared), so nothing
        is ever withheld: a worker is kept at :data:`PLAIN_DEPTH` tests in
        flight (short tests: at a batch, see :meth:`_want`), and once nothing
        is left to hand out it is told to shut down, which is the "next" its
        last test waits for (as xdist's own load scheduling does).  Tests
        that take a while go out one a round across the workers, so that the
        longest ones start on different workers.
        """
        machine = run.machine
        inflight = self.ledger.inflight
        # Checked after nearly every report: every worker topped up (and some
        # test left to hand out, else the workers are told to shut down).
        if (inflight and machine.ready_count
                and min(inflight.values()) >= max(PLAIN_DEPTH, self._low_water(self.pace.batch()))):
            return
        nodes = self._usable(eligible)
        if self.pace.is_fast:
            for node in sorted(nodes, key=inflight.__getitem__):  # idle ones first
                want = max(PLAIN_DEPTH, self._want(machine, node, len(nodes)))
                have = inflight[node]
                if have < max(PLAIN_DEPTH, self._low_water(want)):
                    self._send(run, node, machine.take(node, want - have))
        else:
            short = [node for node in nodes if inflight[node] < PLAIN_DEPTH]
            while short and machine.ready_count:
                for node in list(short):
                    tasks = machine.take(node, 1)
                    self._send(run, node, tasks)
                    if not tasks or node in self.dead or inflight[node] >= PLAIN_DEPTH:
                        short.remove(node)
        if not machine.ready_count:
            for node in nodes:
                if not node.shutting_down:
                    node.shutdown()

    def _low_water(self, want: int) -> int:
        """Top a worker up once fewer real tests than this are in flight, ``want``
        being what it is brought up to (see :meth:`_want`).

        Fast tests: half of ``want``, a batch for a worker bound to a group.
        This process learns that a test ended only when it has handled the
        reports queued before that one, and a worker runs tests faster than
        this process takes their reports in: topped up at its last two, a
        worker ran dry before every batch arrived, idle far longer than under
        xdist's own load scheduling, which tops up at a quarter of the
        pending share.  The other half of the batch covers that lag.
        Free tests share what is ready, often far less than a batch: half of
        that share, so that one send carries several tests, not one per
        report, which costs CPU (figures for both in docs/performance.md).
        """
        if not self.pace.is_fast:
            return LOW_WATER
        return max(LOW_WATER, want // 2)

    def _want(self, machine: StateMachine, node: WorkerController, n_nodes: int) -> int:
        """How many real tests ``node`` should have in flight (for short tests,
        see also :meth:`_short_more`)."""
        if not self.pace.is_fast:
            return MAX_PIPELINE
        batch = self.pace.batch()
        if self.ahead and machine.bound_group(node) is not None:
            # Its group's chain is the node's alone: hand it out ahead.
            return batch
        # Free tests: an equal share of what is ready, so no worker goes idle
        # while another holds a long queue; and at least the running one and
        # the next, which starts without a round trip through this process.
        return max(LOW_WATER, min(batch, machine.ready_count // n_nodes))

    def _send(self, run: DagRun, node: WorkerController, tasks: list[int]) -> None:
        if not tasks:
            return
        indices = tasks if self.plain else [*tasks, self.barrier]
        if not self._deliver(run, node, tasks) or not self._end_scopes(run, node, tasks[-1]):
            return
        try:
            node.send_runtest_some(indices)
        except (OSError, ValueError, EOFError) as exc:
            # The worker died before xdist noticed (its channel is closed).
            # xdist's removal of the node follows and puts these tasks back;
            # they were never delivered, so none of them can be the one that
            # crashed it, and nothing more goes there.
            self.log(f"could not send to {node.gateway.id}: {exc}")
            self.dead.add(node)
            return
        self.ledger.sent_to(node, tasks, indices)

    def _end_scopes(self, run: DagRun, node: WorkerController, last: int) -> bool:
        """Tell ``node`` which scopes of ``last`` (followed by the barrier) no test
        is left for (see closing.py).  False if the worker is gone."""
        if self.plain or self.scopes is None:
            return True
        ending = self.scopes.closed(last, run.machine.state)
        if not ending:
            return True
        try:
            self.channels[node].send(wire.closing(run.nodeids[last], ending))
        except (OSError, ValueError, EOFError, KeyError) as exc:
            self.log(f"could not send to {node.gateway.id}: {exc}")
            self.dead.add(node)
            return False
        return True

    def _deliver(self, run: DagRun, node: WorkerController, tasks: list[int]) -> bool:
        """Send ``node`` what the readers among ``tasks`` may read, ahead of them.

        False if the worker is gone (as for a failed dispatch).
        """
        if self.relay is None:
            return True
        readers = [i for i in tasks if self.dag_users[i]] if self.dag_users else []
        if not readers:
            return True
        nodeids = run.nodeids
        values = {nodeids[p]: v for p, v in self.relay.missing(node, readers).items()}
        try:
            self.channels[node].send(
                wire.deliveries([nodeids[i] for i in readers], values))
        except (OSError, ValueError, EOFError, KeyError) as exc:
            self.log(f"could not send results to {node.gateway.id}: {exc}")
            self.dead.add(node)
            return False
        return True
