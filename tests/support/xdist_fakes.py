"""Fakes of xdist's worker side and a harness that drives the controller's
scheduling through xdist's scheduler protocol (shared by the adapter, stall
and pay-for-use tests).

Fake worker nodes record what the controller sends them, in the spirit of
``MockNode`` in xdist's testing/test_dsession.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import pytest
from helpers import base_args

from pytest_dagorder.core.state_machine import Skip, blocked_skip
from pytest_dagorder.drivers.distributed import wire
from pytest_dagorder.drivers.distributed.controller import DagController
from pytest_dagorder.drivers.distributed.scheduling import DependencyScheduling
from pytest_dagorder.planning.facts import Facts

Outcome = Literal["passed", "failed", "error", "skipped"]
# xdist's crash report has when "???", which TestReport's annotation does not allow.
When = Any
Longrepr = tuple[str, int, str] | str | None
Phase = tuple[When, str, Longrepr]

MODULE = "test_m.py"

# ------------------------------------------------------------------ fakes


@dataclass
class FakeGateway:
    id: str


class FakeNode:
    """What the scheduler touches of xdist's ``WorkerController``; records every send.

    ``queue`` is what the worker holds and has not completed yet, in order.
    """

    def __init__(self, gid: str, journal: list[tuple[FakeNode, list[int]]] | None = None) -> None:
        self.gateway = FakeGateway(gid)
        self.workerinput: dict[str, Any] = {}
        self.journal = [] if journal is None else journal  # sends to all nodes, in order
        self.sends: list[list[int]] = []
        self.queue: list[int] = []
        self.shutdown_calls = 0

    @property
    def shutting_down(self) -> bool:
        return self.shutdown_calls > 0

    def send_runtest_some(self, indices: Sequence[int]) -> None:
        self.sends.append(list(indices))
        self.journal.append((self, list(indices)))
        self.queue.extend(indices)

    def shutdown(self) -> None:
        self.shutdown_calls += 1

    @property
    def sent(self) -> list[int]:
        """Every index ever sent, flattened."""
        return [i for send in self.sends for i in send]

    def __repr__(self) -> str:
        return f"<FakeNode {self.gateway.id}>"


class FakeChannel:
    """The side channel a worker ships its facts on: returns them, or raises.

    Like execnet's, it holds the hello (the facts' census), then the facts
    once the worker was sent the request, and is empty after them: a
    receive then raises TimeoutError (the controller drains it without
    waiting).  Anything but facts stands in for both messages.
    """

    def __init__(self, payload: object) -> None:
        self.payload = payload
        self.timeouts: list[float | None] = []
        self.sent: list[object] = []

    def handshake(self) -> int:
        """How many messages the worker has sent before any test ran."""
        return 1 + (wire.plan_request() in self.sent)

    def send(self, item: object) -> None:
        self.sent.append(item)

    def receive(self, timeout: float | None = None) -> object:
        self.timeouts.append(timeout)
        if isinstance(self.payload, BaseException):
            raise self.payload
        if len(self.timeouts) > self.handshake():
            raise TimeoutError("nothing queued")
        if not isinstance(self.payload, Facts):
            return self.payload
        if len(self.timeouts) == 1:
            return wire.hello(self.payload.census())
        return wire.encode(self.payload)

    @property
    def requests(self) -> list[object]:
        """What the controller sent but the barrier's order (see wire.barriers())."""
        return [item for item in self.sent if item != wire.barriers()]


class FakeLog:
    """xdist's ``log`` producer: the scheduler uses its ``dagsched`` child."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def dagsched(self, *args: object) -> None:
        self.lines.append(" ".join(map(str, args)))


class Recorder:
    """A plugin on the config: what the controller reports through ``config.hook``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.reports: list[pytest.TestReport] = []
        self.collect: list[pytest.CollectReport] = []

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self.events.append(("logstart", nodeid))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.events.append((f"report {report.when} {report.outcome}", report.nodeid))
        self.reports.append(report)

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self.events.append(("logfinish", nodeid))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self.collect.append(report)

    def skipped(self) -> dict[str, str]:
        """Node id -> reason of every SKIPPED test the controller emitted."""
        out: dict[str, str] = {}
        for rep in self.reports:
            if rep.when == "setup" and rep.skipped:
                assert isinstance(rep.longrepr, tuple), rep.longrepr
                _, _, message = rep.longrepr
                assert message.startswith("Skipped: "), message
                assert rep.nodeid not in out, f"{rep.nodeid} skipped twice"
                out[rep.nodeid] = message.removeprefix("Skipped: ")
        return out


# ------------------------------------------------------------------ payloads


def nodeid(name: str, module: str = MODULE) -> str:
    return f"{module}::test_{name}"


def make_facts(
    spec: Mapping[str, str],
    *,
    after: Mapping[str, str] | None = None,
    modules: Mapping[str, str] | None = None,
    groups: Mapping[str, str] | None = None,
    problems: Sequence[tuple[str, str]] = (),
    graph: bool = True,
) -> Facts:
    """The facts a worker ships (see planning/facts.py ``collect_facts``).

    ``{"b": "a"}``: test b requires a; tests are in key order, which is also
    the collection order; ``modules`` puts a test into another module file.
    """
    names = list(spec)
    mods = [(modules or {}).get(n, MODULE) for n in names]
    ids = [nodeid(n, m) for n, m in zip(names, mods, strict=True)]
    pos = {n: k for k, n in enumerate(names)}
    with_graph = graph and not problems
    labels = [(groups or {}).get(n) for n in names]
    return Facts(
        ids=ids,
        locations=[(m, 10 * k, f"test_{n}")
                   for k, (n, m) in enumerate(zip(names, mods, strict=True))],
        module_scopes=list(mods),
        class_scopes=[None] * len(ids),
        xdist_groups=labels if any(labels) else [],
        graph=with_graph,
        requires=([tuple(pos[p] for p in spec[n].split()) for n in names]
                  if with_graph else []),
        after=([tuple(pos[p] for p in (after or {}).get(n, "").split()) for n in names]
               if with_graph and after else []),
        problems=list(problems),
    )


# ------------------------------------------------------------------ the harness


def phases(outcome: Outcome) -> list[Phase]:
    """(when, outcome, longrepr) of the reports a worker sends for one test."""
    if outcome == "passed":
        return [("setup", "passed", None), ("call", "passed", None),
                ("teardown", "passed", None)]
    if outcome == "failed":
        return [("setup", "passed", None), ("call", "failed", "E   assert 0"),
                ("teardown", "passed", None)]
    if outcome == "error":
        return [("setup", "failed", "E   fixture broke"), ("teardown", "passed", None)]
    return [("setup", "skipped", (MODULE, 1, "Skipped: by the test")),
            ("teardown", "passed", None)]


class Harness:
    """One ``DependencyScheduling`` with its controller, fake nodes and report feed.

    Its fake workers gate like drivers/distributed/sent_ahead.py does: under policy ``skip`` a test
    whose prerequisite did not pass *on the same worker* (it was handed out
    ahead, see ``StateMachine.take(ahead=True)``) is reported SKIPPED by the
    worker itself.
    """

    def __init__(self, config: pytest.Config, recorder: Recorder, payload: Facts,
                 *, policy: Literal["skip", "stop", "run"] = "skip") -> None:
        self.config = config
        self.recorder = recorder
        self.payload = payload
        self.policy = policy
        self.ids: list[str] = list(payload.ids)
        self.barrier: int = len(payload.ids)
        self.log = FakeLog()
        self.controller = DagController(config)
        self.sched = DependencyScheduling(config, self.log, self.controller)
        self.controller.sched = self.sched  # what pytest_xdist_make_scheduler does
        self.nodes: list[FakeNode] = []
        self.journal: list[tuple[FakeNode, list[int]]] = []
        self.removed: set[FakeNode] = set()
        self.reported: set[str] = set()  # tests whose final report a worker sent
        self.crashed: dict[str, int] = {}  # crashed test -> journal length at the crash
        self.gated: dict[str, str] = {}  # tests a worker skipped itself -> reason
        # What each worker knows: outcomes of the tests it ran, in the order they ended.
        self.local: dict[FakeNode, dict[int, str]] = {}
        self.local_skips: dict[FakeNode, dict[int, Skip]] = {}

    # -- events, as DSession delivers them

    def add(self, gid: str, collection: Sequence[str] | None = None,
            channel: FakeChannel | None = None) -> FakeNode:
        node = self.up(gid, channel)
        self.collected(node, collection)
        return node

    def up(self, gid: str, channel: FakeChannel | None = None) -> FakeNode:
        """A worker is set up (its collection comes later, see collected)."""
        node = FakeNode(gid, self.journal)
        self.nodes.append(node)
        self.controller.channels[node] = channel or FakeChannel(self.payload)
        self.sched.add_node(node)
        return node

    def collected(self, node: FakeNode, collection: Sequence[str] | None = None) -> None:
        self.sched.add_node_collection(node, list(self.ids if collection is None else collection))

    def start(self, *gids: str) -> list[FakeNode]:
        """Nodes come up, collect, and the first schedule() runs."""
        nodes = [self.add(g) for g in gids]
        assert self.sched.collection_is_completed
        self.schedule()
        return nodes

    def schedule(self) -> None:
        self.sched.schedule()
        self.check()

    def index(self, name: str) -> int:
        for k, nid in enumerate(self.ids):
            if nid.rsplit("::test_", 1)[1] == name:
                return k
        raise KeyError(name)

    def report(self, node: FakeNode, name: str, when: When, outcome: Any = "passed",
               longrepr: Longrepr = None) -> None:
        i = self.index(name)
        nid = self.ids[i]
        path, line, domain = self.payload.locations[i]
        rep = pytest.TestReport(nid, (path, line, domain), {}, outcome, longrepr, when)
        rep.node = node  # type: ignore[attr-defined]  # xdist sets it on the controller
        if when == "teardown":
            self.reported.add(nid)
        self.sched.on_report(rep)
        self.check()

    def gate(self, node: FakeNode, i: int) -> str | None:
        """The gate of drivers/distributed/sent_ahead.py: the skip reason if a
        prerequisite failed on ``node``."""
        facts = self.payload
        if self.policy != "skip" or not facts.graph:
            return None
        outcomes = self.local.setdefault(node, {})
        failed = [p for p in facts.requires[i] if outcomes.get(p, "passed") != "passed"]
        if not failed:
            return None
        order = list(outcomes)
        p = min(failed, key=order.index)
        skips = self.local_skips.setdefault(node, {})
        skip = blocked_skip(i, p, outcomes[p], skips.get(p),
                            lambda k: [*facts.ids, *facts.outside][k].split("::", 1)[1])
        skips[i] = skip
        return skip.reason

    def run_reports(self, node: FakeNode, name: str, outcome: Outcome = "passed") -> None:
        """The reports of one test; the worker must be able to run it now."""
        i = self.index(name)
        assert node.queue and node.queue[0] == i, f"{node} holds {node.queue}, not {i} first"
        assert len(node.queue) >= 2 or node.shutting_down, (
            f"{node} holds {name} without a next index: the worker would wait forever")
        reason = self.gate(node, i)
        if reason is not None:
            self.gated[self.ids[i]] = reason
            outcome = "skipped"
            path, line, _ = self.payload.locations[i]
            reports: list[Phase] = [
                ("setup", "skipped", (path, line + 1, f"Skipped: {reason}")),
                ("teardown", "passed", None)]
        else:
            reports = phases(outcome)
        self.local.setdefault(node, {})[i] = outcome
        for when, out, longrepr in reports:
            self.report(node, name, when, out, longrepr)

    def complete(self, node: FakeNode, index: int, duration: float = 1.0) -> None:
        """``runtest_protocol_complete``: the worker is done with the head of its queue."""
        assert node.queue and node.queue[0] == index, (node, node.queue, index)
        assert len(node.queue) >= 2 or node.shutting_down
        node.queue.pop(0)
        self.sched.mark_test_complete(node, index, duration)
        self.check()

    def run(self, node: FakeNode, name: str, outcome: Outcome = "passed",
            duration: float = 1.0) -> None:
        """A worker runs one real test: reports, then the completion."""
        self.run_reports(node, name, outcome)
        self.complete(node, self.index(name), duration)

    def step(self, node: FakeNode, outcome: Outcome = "passed", duration: float = 1.0) -> None:
        """The worker runs the head of its queue (a real test or the barrier)."""
        head = node.queue[0]
        if head == self.barrier:
            self.pass_barrier(node)
        else:
            self.run(node, str(self.name(head)), outcome, duration)

    def drain(self, *nodes: FakeNode) -> None:
        """Run every node's queue until the run is finished (all tests passing)."""
        for _ in range(10 * len(self.ids) + 10):
            if self.sched.tests_finished:
                return
            runnable = [n for n in nodes if len(n.queue) >= 2]
            assert runnable, f"deadlock: queues {[n.queue for n in nodes]}"
            self.step(runnable[0])
        raise AssertionError("the run did not end")

    def pass_barrier(self, node: FakeNode) -> None:
        """The worker tears down past the barrier once the next index arrived."""
        self.complete(node, self.barrier)

    def remove(self, node: FakeNode) -> str | None:
        self.removed.add(node)
        crashed = self.sched.remove_node(node)
        if crashed is not None:
            self.crashed[crashed] = len(self.journal)
            # xdist's handle_crashitem: the crashed test's report follows at once
            # (as DSession builds it: when "???", location of the file).
            path = crashed.split("::")[0]
            rep = pytest.TestReport(crashed, (path, None, path), {}, "failed",
                                    f"worker {node.gateway.id!r} crashed while running "
                                    f"{crashed!r}", cast(Any, "???"))
            rep.node = node  # type: ignore[attr-defined]
            self.sched.on_report(rep)
        self.check()
        return crashed

    # -- what happened

    def sends(self) -> dict[str, list[list[str | None]]]:
        """Every send per node, as test names (None for the barrier)."""
        return {n.gateway.id: [[self.name(i) for i in send] for send in n.sends]
                for n in self.nodes}

    def name(self, index: int) -> str | None:
        if index == self.barrier:
            return None
        return self.ids[index].rsplit("::test_", 1)[1]

    def terminal(self) -> set[str]:
        return self.reported | set(self.crashed) | set(self.recorder.skipped())

    def check(self) -> None:
        seen: dict[int, FakeNode] = {}
        for k, (node, send) in enumerate(self.journal):
            assert send, f"{node} was sent an empty list"
            assert send[-1] == self.barrier, f"{node} was sent {send}: no barrier last"
            assert send.count(self.barrier) == 1, f"{node} was sent {send}"
            for i in send[:-1]:
                assert 0 <= i < self.barrier, f"{node} was sent index {i}"
                # Sent again only once the node that held it was gone (and not
                # for the test that crashed it: that one is final).
                other = seen.get(i)
                assert other is None or other in self.removed, (
                    f"test {self.ids[i]} sent to {other} and then to {node}")
                assert k < self.crashed.get(self.ids[i], k + 1), f"crashed {self.ids[i]} sent again"
                seen[i] = node
        held: set[str] = set()
        for node in self.nodes:
            if node not in self.removed and node.queue:
                assert node.queue[-1] == self.barrier, f"{node} holds a lone real test"
                held.update(self.ids[i] for i in node.queue if i != self.barrier)
        skipped = set(self.recorder.skipped())
        assert not skipped & self.reported, f"reported twice: {skipped & self.reported}"
        for i, node in seen.items():
            assert self.ids[i] not in skipped or node in self.removed, (
                f"{self.ids[i]} skipped by the controller while {node} holds it")
        # Finished once every test is terminal; a test still held then can only be
        # one its worker skips itself (handed out ahead), never one that runs.
        terminal = self.terminal()
        if terminal == set(self.ids):
            assert self.sched.tests_finished, f"every test ended: {sorted(terminal)}"
        # A skip deferred until its cause's line is shown waits for a report a
        # worker owes (or for another held skip): it is reported, not lost.
        skips = self.sched.phases.skips
        owed = set(skips.awaiting) | {skip.task for skip in skips.deferred}
        for skip in skips.deferred:
            assert skip.prerequisite in owed, f"{self.ids[skip.task]} deferred for nothing"
        if self.sched.tests_finished:
            left = set(self.ids) - terminal
            later = {self.ids[skip.task] for skip in self.sched.phases.skips.deferred}
            assert left <= held | later, f"finished, but {sorted(left - held - later)} never ran"


def make_config(pytester: pytest.Pytester, recorder: Recorder, *args: str,
                nodes: int = 2) -> pytest.Config:
    config = pytester.parseconfig(f"--tx={nodes}*popen", "--dist=load", *base_args(), *args)
    config.pluginmanager.register(recorder, "recorder")
    return config
