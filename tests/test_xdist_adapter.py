"""Tier 2: the xdist adapter (``DagScheduling``) driven through xdist's scheduler protocol.

Fake worker nodes record what the controller sends them, in the spirit of
``MockNode`` in xdist's testing/test_dsession.py.  A fake node also keeps the
queue a real worker would hold, so the harness can check what matters about
the lookahead deadlock (DESIGN.md section 3): a worker runs the head of its
queue only once a next index (or the shutdown mark) is behind it, hence
every send must end with the barrier index and no queue may ever end with a
real test.

The harness checks its invariants after every event (:meth:`Harness.check`):
no real test is sent twice to live nodes, every send ends with the barrier,
and ``tests_finished`` is true exactly when every test has a final report.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from helpers import base_args
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdist.scheduler import LoadScheduling

from pytest_dagorder.xdist import RECEIVE_TIMEOUT, DagController, DagScheduling, GuardedScheduling

Outcome = Literal["passed", "failed", "error", "skipped"]
Payload = dict[str, Any]

MODULE = "test_m.py"

# ------------------------------------------------------------------ fakes


@dataclass
class FakeGateway:
    id: str


class FakeNode:
    """What the scheduler touches of xdist's ``WorkerController``; records every send.

    ``queue`` is what the worker holds and has not completed yet, in order.
    """

    def __init__(self, gid: str) -> None:
        self.gateway = FakeGateway(gid)
        self.workerinput: dict[str, Any] = {}
        self.sends: list[list[int]] = []
        self.queue: list[int] = []
        self.shutdown_calls = 0

    @property
    def shutting_down(self) -> bool:
        return self.shutdown_calls > 0

    def send_runtest_some(self, indices: Sequence[int]) -> None:
        self.sends.append(list(indices))
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
    """The side channel a worker ships its plan on: returns it, or raises."""

    def __init__(self, payload: Payload | BaseException) -> None:
        self.payload = payload
        self.timeouts: list[float | None] = []

    def receive(self, timeout: float | None = None) -> Payload:
        self.timeouts.append(timeout)
        if isinstance(self.payload, BaseException):
            raise self.payload
        return self.payload


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


def make_payload(
    spec: Mapping[str, str],
    *,
    after: Mapping[str, str] | None = None,
    modules: Mapping[str, str] | None = None,
    groups: Mapping[str, str] | None = None,
    problems: Sequence[tuple[str, str]] = (),
    graph: bool = True,
) -> Payload:
    """The plan a worker ships (see worker.py ``_payload``).

    ``{"b": "a"}``: test b requires a; tests are in key order, which is also
    the collection order; ``modules`` puts a test into another module file.
    """
    names = list(spec)
    mods = [(modules or {}).get(n, MODULE) for n in names]
    ids = [nodeid(n, m) for n, m in zip(names, mods)]
    pos = {n: k for k, n in enumerate(names)}
    payload: Payload = {
        "ids": ids,
        "barrier": len(ids),
        "locations": [[m, 10 * k, f"test_{n}"] for k, (n, m) in enumerate(zip(names, mods))],
        "module": mods,
        "class": [None] * len(ids),
        "xdist_group": [(groups or {}).get(n) for n in names],
        "graph": None,
        "problems": [list(p) for p in problems],
    }
    if graph and not problems:
        payload["graph"] = {
            "ids": list(ids),
            "requires": [[pos[p] for p in spec[n].split()] for n in names],
            "after": [[pos[p] for p in (after or {}).get(n, "").split()] for n in names],
        }
    return payload


# ------------------------------------------------------------------ the harness


def phases(outcome: Outcome) -> list[tuple[str, str, object]]:
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
    """One ``DagScheduling`` with its controller, fake nodes and report feed."""

    def __init__(self, config: pytest.Config, recorder: Recorder, payload: Payload,
                 *, policy: Literal["skip", "stop", "run"] = "skip") -> None:
        self.config = config
        self.recorder = recorder
        self.payload = payload
        self.ids: list[str] = list(payload["ids"])
        self.barrier: int = payload["barrier"]
        self.log = FakeLog()
        self.controller = DagController(config, policy)
        self.sched = DagScheduling(config, self.log, self.controller)
        self.controller.sched = self.sched  # what pytest_xdist_make_scheduler does
        self.nodes: list[FakeNode] = []
        self.removed: set[FakeNode] = set()
        self.reported: set[str] = set()  # tests whose final (teardown) report was sent

    # -- events, as DSession delivers them

    def add(self, gid: str, collection: Sequence[str] | None = None,
            channel: FakeChannel | None = None) -> FakeNode:
        node = FakeNode(gid)
        self.nodes.append(node)
        self.controller.channels[node] = channel or FakeChannel(self.payload)
        self.sched.add_node(node)
        self.sched.add_node_collection(node, list(self.ids if collection is None else collection))
        return node

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

    def report(self, node: FakeNode, name: str, when: str, outcome: str = "passed",
               longrepr: object = None) -> None:
        nid = self.ids[self.index(name)]
        loc = (nid.split("::")[0], self.index(name) * 10, f"test_{name}")
        rep = pytest.TestReport(nid, loc, {}, outcome, longrepr, when)  # type: ignore[arg-type]
        rep.node = node  # type: ignore[attr-defined]  # xdist sets it on the controller
        if when in ("teardown", "???"):
            self.reported.add(nid)
        self.sched.on_report(rep)
        self.check()

    def run_reports(self, node: FakeNode, name: str, outcome: Outcome = "passed") -> None:
        """The reports of one test; the worker must be able to run it now."""
        i = self.index(name)
        assert node.queue and node.queue[0] == i, f"{node} holds {node.queue}, not {i} first"
        assert len(node.queue) >= 2 or node.shutting_down, (
            f"{node} holds {name} without a next index: the worker would wait forever")
        for when, out, longrepr in phases(outcome):
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

    def pass_barrier(self, node: FakeNode) -> None:
        """The worker tears down past the barrier once the next index arrived."""
        self.complete(node, self.barrier)

    def remove(self, node: FakeNode) -> str | None:
        self.removed.add(node)
        crashed = self.sched.remove_node(node)
        if crashed is not None:
            self.reported.add(crashed)  # xdist reports the crash item itself
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
        return self.reported | set(self.recorder.skipped())

    def check(self) -> None:
        seen: dict[int, FakeNode] = {}
        for node in self.nodes:
            for send in node.sends:
                assert send, f"{node} was sent an empty list"
                assert send[-1] == self.barrier, f"{node} was sent {send}: no barrier last"
                assert send.count(self.barrier) == 1, f"{node} was sent {send}"
                for i in send[:-1]:
                    assert 0 <= i < self.barrier, f"{node} was sent index {i}"
                    other = seen.get(i)
                    assert other is None or other in self.removed, (
                        f"test {self.ids[i]} sent to {other} and {node}")
                    seen[i] = node
            if node not in self.removed and node.queue:
                assert node.queue[-1] == self.barrier, f"{node} holds a lone real test"
        skipped = set(self.recorder.skipped())
        assert not skipped & {self.ids[i] for i in seen}, "a test was both sent and skipped"
        assert self.sched.tests_finished == (self.terminal() == set(self.ids)), (
            f"tests_finished={self.sched.tests_finished}, terminal: {sorted(self.terminal())}")


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def make_config(pytester: pytest.Pytester, recorder: Recorder, *args: str,
                nodes: int = 2) -> pytest.Config:
    config = pytester.parseconfig(f"--tx={nodes}*popen", "--dist=load", *base_args(), *args)
    config.pluginmanager.register(recorder, "recorder")
    return config


@pytest.fixture
def harness(pytester: pytest.Pytester, recorder: Recorder) -> Any:
    """A factory: ``harness(payload, *args, nodes=2, policy="skip")``."""

    def make(payload: Payload, *args: str, nodes: int = 2,
             policy: Literal["skip", "stop", "run"] = "skip") -> Harness:
        return Harness(make_config(pytester, recorder, *args, nodes=nodes), recorder, payload,
                       policy=policy)

    return make


CHAIN = {"a": "", "b": "a", "c": "b"}
AFFINITIES = ["--dag-affinity=module", "--dag-affinity=none"]


# ------------------------------------------------------------------ the chain


@pytest.mark.parametrize("affinity", AFFINITIES)
def test_chain_sends_one_test_at_a_time_each_followed_by_the_barrier(
    harness: Any, affinity: str
) -> None:
    h: Harness = harness(make_payload(CHAIN), affinity)
    n1, n2 = h.start("gw0", "gw1")
    # A naive dispatcher would send [a] and wait for a's outcome: a deadlock.
    assert h.sends() == {"gw0": [["a", None]], "gw1": []}

    h.report(n1, "a", "setup")
    h.report(n1, "a", "call")
    assert h.sends() == {"gw0": [["a", None]], "gw1": []}, "b sent before a's teardown"
    h.report(n1, "a", "teardown")
    assert h.sends() == {"gw0": [["a", None], ["b", None]], "gw1": []}
    h.complete(n1, h.index("a"))
    h.pass_barrier(n1)
    assert not h.sched.tests_finished

    h.run(n1, "b")
    assert h.sends() == {"gw0": [["a", None], ["b", None], ["c", None]], "gw1": []}
    h.pass_barrier(n1)
    assert not h.sched.tests_finished
    h.run_reports(n1, "c")
    assert h.sched.tests_finished
    assert n1.queue == [h.index("c"), h.barrier]
    # The last barrier stays on the worker until xdist shuts the node down.
    assert not h.recorder.skipped()


def test_chain_across_modules_runs_on_both_nodes(harness: Any) -> None:
    """Cross-module edges do not bind tests to a worker: b may go to the idle node."""
    payload = make_payload(CHAIN, modules={"a": "test_x.py", "b": "test_y.py",
                                           "c": "test_z.py"})
    h: Harness = harness(payload)
    n1, n2 = h.start("gw0", "gw1")
    assert h.sends() == {"gw0": [["a", None]], "gw1": []}
    h.run(n1, "a")
    h.pass_barrier(n1)
    h.run(n1, "b")
    # gw1 is idle and c is not bound to gw0: whoever is idle may take it.
    assert h.sends()["gw0"][-1] == ["c", None] or h.sends()["gw1"] == [["c", None]]


# ------------------------------------------------------------------ diamond


DIAMOND = {"a": "", "b": "a", "c": "a", "d": "b c"}


def test_diamond_runs_the_middle_in_parallel(harness: Any) -> None:
    h: Harness = harness(make_payload(DIAMOND), "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    assert h.sends() == {"gw0": [["a", None]], "gw1": []}
    h.run(n1, "a")
    assert h.sends() == {"gw0": [["a", None], ["b", None]], "gw1": [["c", None]]}
    h.pass_barrier(n1)
    h.run(n1, "b")
    assert "d" not in str(h.sends()), "d sent before c ended"
    h.run_reports(n2, "c")
    assert h.sends()["gw1"] == [["c", None]]
    assert h.sends()["gw0"][-1] == ["d", None]
    h.complete(n2, h.index("c"))
    h.pass_barrier(n1)
    h.run_reports(n1, "d")
    assert h.sched.tests_finished


def test_diamond_in_one_module_stays_on_one_node(harness: Any) -> None:
    h: Harness = harness(make_payload(DIAMOND), "--dag-affinity=module")
    n1, n2 = h.start("gw0", "gw1")
    for name in "abcd":
        if name != "a":
            h.pass_barrier(n1)
        h.run(n1, name)
    assert [h.name(i) for i in n1.sent if i != h.barrier] == ["a", "b", "c", "d"]
    assert n2.sends == []
    assert h.sched.tests_finished


# ------------------------------------------------------------------ failures


SKIP_SPEC = {"a": "", "b": "a", "c": "b", "d": "", "e": ""}


@pytest.mark.parametrize(
    ("outcome", "phrase"),
    [("failed", "failed"), ("error", "had an error"), ("skipped", "was skipped")],
)
def test_a_failure_skips_its_dependents(harness: Any, outcome: Outcome, phrase: str) -> None:
    h: Harness = harness(make_payload(SKIP_SPEC, after={"e": "a"}), "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    assert h.name(n1.sends[0][0]) == "a"
    h.run(n1, "a", outcome)
    assert h.recorder.skipped() == {
        nodeid("b"): f"prerequisite test_a {phrase}",
        nodeid("c"): f"prerequisite test_b was skipped: test_a {phrase}",
    }
    # The controller emits each skip as a whole test: start, setup, teardown, finish.
    events = [e for e, nid in h.recorder.events if nid == nodeid("b")]
    assert events == ["logstart", "report setup skipped", "report teardown passed", "logfinish"]
    rep = next(r for r in h.recorder.reports if r.nodeid == nodeid("b"))
    assert rep.location == (MODULE, 10, "test_b")
    assert rep.longrepr == (MODULE, 11, f"Skipped: prerequisite test_a {phrase}")
    # run_after only orders: e runs whatever a's outcome was.
    while not h.sched.tests_finished:
        for node in (n1, n2):
            if len(node.queue) >= 2:
                head = node.queue[0]
                if head == h.barrier:
                    h.pass_barrier(node)
                else:
                    h.run(node, str(h.name(head)))
    ran = {h.name(i) for n in (n1, n2) for i in n.sent if i != h.barrier}
    assert ran == {"a", "d", "e"}


def test_policy_stop_skips_everything_not_started(harness: Any) -> None:
    h: Harness = harness(make_payload(SKIP_SPEC), "--dag-affinity=none", policy="stop")
    n1, n2 = h.start("gw0", "gw1")
    assert h.name(n2.sends[0][0]) == "d"
    h.run(n1, "a", "failed")
    # Dependents are blocked by the failure itself; the rest by the stop.
    assert h.recorder.skipped() == {
        nodeid("b"): "prerequisite test_a failed",
        nodeid("c"): "prerequisite test_b was skipped: test_a failed",
        nodeid("e"): "run stopped after test_a failed",
    }
    assert n1.sends == [[h.index("a"), h.barrier]], "nothing is sent after a stop"
    assert not h.sched.tests_finished  # d is still running on gw1
    h.run_reports(n2, "d")
    assert h.sched.tests_finished


def test_policy_run_sends_dependents_anyway(harness: Any) -> None:
    h: Harness = harness(make_payload(CHAIN), policy="run")
    n1, _ = h.start("gw0", "gw1")
    h.run(n1, "a", "failed")
    assert h.sends()["gw0"][-1] == ["b", None]
    assert not h.recorder.skipped()


# ------------------------------------------------------------------ crashes


def test_crash_returns_the_running_test_and_skips_its_dependents(harness: Any) -> None:
    spec = {"a": "", "b": "a", "c": "b", "x": ""}
    h: Harness = harness(make_payload(spec), "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    assert h.sends() == {"gw0": [["a", None]], "gw1": [["x", None]]}
    h.report(n1, "a", "setup")
    assert h.remove(n1) == nodeid("a")
    assert h.recorder.skipped() == {
        nodeid("b"): "prerequisite test_a crashed its worker",
        nodeid("c"): "prerequisite test_b was skipped: test_a crashed its worker",
    }
    # xdist then reports the crash item itself (when "???"): nothing changes.
    before = h.sends()
    h.report(n1, "a", "???", "failed", "worker 'gw0' crashed while running")
    assert h.sends() == before
    assert not h.sched.tests_finished
    h.run_reports(n2, "x")
    assert h.sched.tests_finished
    assert h.sched.nodes == [n2]


def test_crash_puts_the_other_tests_it_held_back_for_the_other_node(harness: Any) -> None:
    """Short tests are pipelined; a crash gives back every held test but the running one."""
    spec = {name: "" for name in "abcdefghijkl"}
    h: Harness = harness(make_payload(spec), "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    # Fast tests (under FAST_TEST seconds) deepen the pipeline.
    h.run(n1, h.name(n1.queue[0]) or "", duration=0.0)
    h.run(n2, h.name(n2.queue[0]) or "", duration=0.0)
    held = [i for i in n1.queue if i != h.barrier]
    assert len(held) >= 2, f"gw0 holds {n1.queue}: no pipeline to test with"
    while n1.queue[0] == h.barrier:
        h.pass_barrier(n1)
    running = n1.queue[0]
    h.report(n1, str(h.name(running)), "setup")
    back = [i for i in n1.queue if i not in (running, h.barrier)]
    assert back

    assert h.remove(n1) == h.ids[running]
    # Drain gw1: it gets every test gw0 gave back, and the run ends.
    while not h.sched.tests_finished:
        assert len(n2.queue) >= 2, f"gw1 holds {n2.queue}: would wait forever"
        head = n2.queue[0]
        if head == h.barrier:
            h.pass_barrier(n2)
        else:
            h.run(n2, str(h.name(head)), duration=0.0)
    assert set(back) <= set(n2.sent)
    assert running not in n2.sent, "a crashed test is not re-run"


def test_crash_in_a_barrier_blames_no_test(harness: Any) -> None:
    """Teardown past the barrier crashed: no real test was running there."""
    h: Harness = harness(make_payload(CHAIN))
    n1, n2 = h.start("gw0", "gw1")
    h.run(n1, "a")
    assert n1.queue == [h.barrier, h.index("b"), h.barrier]
    assert h.remove(n1) is None
    # b had not started: it goes to the other node, nothing is skipped.
    assert h.sends() == {"gw0": [["a", None], ["b", None]], "gw1": [["b", None]]}
    assert not h.recorder.skipped()
    h.run_reports(n2, "b")
    h.complete(n2, h.index("b"))
    h.pass_barrier(n2)
    h.run_reports(n2, "c")
    assert h.sched.tests_finished


def test_normal_finish_remove_node_returns_none(harness: Any) -> None:
    h: Harness = harness(make_payload({"a": "", "b": ""}), "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    h.run_reports(n1, "a")
    h.run_reports(n2, "b")
    assert h.sched.tests_finished
    for node in (n1, n2):  # DSession's triggershutdown
        node.shutdown()
        h.complete(node, node.queue[0])
        h.complete(node, h.barrier)
    assert h.remove(n1) is None
    assert h.remove(n2) is None
    assert h.sched.nodes == []
    assert h.sched.tests_finished


def test_remove_node_before_the_run_started(harness: Any) -> None:
    h: Harness = harness(make_payload(CHAIN))
    n1 = h.add("gw0")
    assert h.remove(n1) is None
    assert h.sched.nodes == []


# ------------------------------------------------------------------ schedule() again


def test_schedule_is_idempotent(harness: Any) -> None:
    h: Harness = harness(make_payload(DIAMOND), "--dag-affinity=none")
    h.start("gw0", "gw1")
    before = h.sends()
    for _ in range(3):
        h.schedule()
    assert h.sends() == before


def test_a_replacement_node_gets_the_work_left(harness: Any) -> None:
    spec = {"a": "", "b": "", "c": "b"}
    h: Harness = harness(make_payload(spec), "--dag-affinity=none", nodes=1)
    (n1,) = h.start("gw0")
    assert h.sends() == {"gw0": [["b", None]]}  # the longest path first
    assert h.remove(n1) == nodeid("b")
    assert h.recorder.skipped() == {nodeid("c"): "prerequisite test_b crashed its worker"}
    assert not h.sched.tests_finished
    n2 = h.add("gw0-2")  # xdist's _clone_node, then the worker's collection
    h.schedule()
    assert h.sends()["gw0-2"] == [["a", None]]
    h.schedule()
    assert h.sends()["gw0-2"] == [["a", None]]
    h.run_reports(n2, "a")
    assert h.sched.tests_finished


# ------------------------------------------------------------------ events after the end


def test_events_after_the_end_change_nothing(harness: Any) -> None:
    h: Harness = harness(make_payload({"a": "", "b": "a"}), "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    h.run(n1, "a")
    h.pass_barrier(n1)
    h.run_reports(n1, "b")
    assert h.sched.tests_finished
    before = (h.sends(), list(h.recorder.events))

    stranger = FakeNode("gw9")
    h.sched.mark_test_complete(n1, h.index("a"), 1.0)  # already completed
    h.sched.mark_test_complete(n1, h.index("b"), 0.0)
    h.sched.mark_test_complete(n2, h.barrier, 0.0)  # never sent there
    h.sched.mark_test_complete(stranger, 0, 0.0)  # unknown node
    h.sched.mark_test_complete(n1, 99, 0.0)  # unknown index
    h.report(n1, "b", "teardown", "failed", "E   late teardown error")  # finished test
    h.report(n2, "a", "???", "failed", "crash")
    bogus = pytest.TestReport("test_other.py::test_z", ("test_other.py", 0, "test_z"), {},
                              "failed", "E", "teardown")
    h.sched.on_report(bogus)  # not in the run
    h.schedule()
    assert (h.sends(), h.recorder.events) == before
    assert h.sched.tests_finished
    assert h.remove(stranger) is None
    assert h.remove(n2) is None
    assert h.sched.tests_finished


def test_a_duplicate_teardown_report_does_not_dispatch_twice(harness: Any) -> None:
    h: Harness = harness(make_payload(CHAIN))
    n1, _ = h.start("gw0", "gw1")
    h.run_reports(n1, "a")
    before = h.sends()
    h.report(n1, "a", "teardown")
    h.report(n1, "a", "teardown", "failed", "E   again")
    assert h.sends() == before
    assert not h.recorder.skipped()


def test_tests_finished_only_once_collection_is_complete(harness: Any) -> None:
    h: Harness = harness(make_payload({"a": ""}))
    assert not h.sched.tests_finished
    assert not h.sched.has_pending
    h.add("gw0")
    assert not h.sched.collection_is_completed
    assert not h.sched.tests_finished
    h.add("gw1")
    assert h.sched.collection_is_completed
    assert not h.sched.tests_finished  # nothing scheduled yet
    h.schedule()
    assert h.sched.has_pending
    assert not h.sched.tests_finished


def test_an_empty_collection_is_finished_at_once(harness: Any) -> None:
    h: Harness = harness(make_payload({}, graph=False))
    n1, n2 = h.start("gw0", "gw1")
    assert h.sched.tests_finished
    assert n1.sends == n2.sends == []


def test_a_suite_without_declarations_runs_every_test(harness: Any) -> None:
    h: Harness = harness(make_payload({"a": "", "b": "", "c": ""}, graph=False))
    n1, n2 = h.start("gw0", "gw1")
    while not h.sched.tests_finished:
        for node in (n1, n2):
            if len(node.queue) >= 2:
                head = node.queue[0]
                if head == h.barrier:
                    h.pass_barrier(node)
                else:
                    h.run(node, str(h.name(head)))
    assert sorted(i for n in (n1, n2) for i in n.sent if i != h.barrier) == [0, 1, 2]


# ------------------------------------------------------------------ aborting


def test_declaration_problems_interrupt_the_session(harness: Any) -> None:
    problems = [(nodeid("b"), "depends_on target 'nope' matches no test"),
                (nodeid("c"), "run_after target 'gone' matches no test")]
    h: Harness = harness(make_payload(CHAIN, problems=problems))
    n1 = h.add("gw0")
    n2 = h.add("gw1")
    with pytest.raises(pytest.Session.Interrupted, match="2 errors during collection"):
        h.sched.schedule()
    assert [(r.nodeid, r.outcome, str(r.longrepr)) for r in h.recorder.collect] == [
        (nodeid("b"), "failed", "pytest-dagorder: depends_on target 'nope' matches no test"),
        (nodeid("c"), "failed", "pytest-dagorder: run_after target 'gone' matches no test"),
    ]
    assert n1.shutdown_calls == n2.shutdown_calls == 1
    assert n1.sends == n2.sends == []
    assert h.sched.tests_finished  # DSession's loop must not wait for anything
    h.sched.schedule()  # a late worker's collection: no second report, no send
    assert len(h.recorder.collect) == 2
    assert n1.sends == n2.sends == []


def test_no_graph_from_the_worker_interrupts_with_a_bounded_wait(harness: Any) -> None:
    h: Harness = harness(make_payload(CHAIN))
    channel = FakeChannel(TimeoutError("no answer"))
    n1 = h.add("gw0", channel=channel)
    n2 = h.add("gw1")
    with pytest.raises(pytest.Session.Interrupted, match="1 error during collection"):
        h.sched.schedule()
    assert channel.timeouts == [RECEIVE_TIMEOUT]
    (rep,) = h.recorder.collect
    assert "no dependency graph from worker gw0: no answer" in str(rep.longrepr)
    assert n1.shutdown_calls == 1
    assert n1.sends == n2.sends == []


@pytest.mark.xfail(strict=True, reason=(
    "bug: DagController.receive_payload calls abort(config, [node], ...) with only "
    "the node whose channel failed, so the other workers are never told to shut "
    "down (abort's docstring: 'the workers are told to shut down first so that "
    "tearing them down does not wait'); the declaration-problems path shuts down "
    "every node"))
def test_no_graph_from_the_worker_shuts_down_every_node(harness: Any) -> None:
    h: Harness = harness(make_payload(CHAIN))
    n1 = h.add("gw0", channel=FakeChannel(TimeoutError("no answer")))
    n2 = h.add("gw1")
    with pytest.raises(pytest.Session.Interrupted):
        h.sched.schedule()
    assert (n1.shutdown_calls, n2.shutdown_calls) == (1, 1)


def test_plugin_missing_on_the_workers_interrupts(harness: Any) -> None:
    h: Harness = harness(make_payload(CHAIN))
    n1 = h.add("gw0")
    h.add("gw1")
    del h.controller.channels[n1]
    with pytest.raises(pytest.Session.Interrupted):
        h.sched.schedule()
    (rep,) = h.recorder.collect
    assert "the dagorder plugin is not active on the workers" in str(rep.longrepr)


# ------------------------------------------------------------------ differing collections


def test_a_replacement_node_with_another_collection_gets_no_work(harness: Any) -> None:
    h: Harness = harness(make_payload({"a": "", "b": "", "c": ""}), "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    h.report(n2, h.name(n2.queue[0]) or "", "setup")
    h.remove(n2)
    n3 = h.add("gw2", collection=list(reversed(h.ids)))
    h.schedule()
    assert n3.sends == []
    assert any("gw2" in line for line in h.log.lines), h.log.lines
    while not h.sched.tests_finished:
        head = n1.queue[0]
        if head == h.barrier:
            h.pass_barrier(n1)
        else:
            h.run(n1, str(h.name(head)))
    assert n3.sends == []


@pytest.mark.xfail(strict=True, reason=(
    "bug: DagScheduling.add_node_collection compares a collection only with "
    "self.collection, which is set by the first schedule(); the initial workers' "
    "collections are never compared, so a node that collected different tests "
    "gets indices into the first node's collection (xdist's LoadScheduling "
    "checks _check_nodes_have_same_collection before the first dispatch)"))
def test_an_initial_node_with_another_collection_gets_no_work(harness: Any) -> None:
    h: Harness = harness(make_payload({"a": "", "b": "", "c": ""}), "--dag-affinity=none")
    n1 = h.add("gw0")
    n2 = h.add("gw1", collection=[nodeid("a"), nodeid("c"), nodeid("b")])
    h.sched.schedule()
    assert n2.sends == [], f"gw1 collected other tests but was sent {n2.sends}"
    assert n1.sends


# ------------------------------------------------------------------ groups and deselection


def test_an_xdist_group_binds_tests_of_different_modules_to_one_node(harness: Any) -> None:
    spec = {"a": "", "b": "", "c": "", "d": ""}
    payload = make_payload(spec, modules={"a": "test_x.py", "c": "test_y.py"},
                           groups={"a": "db", "c": "db"})
    h: Harness = harness(payload, "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    while not h.sched.tests_finished:
        for node in (n1, n2):
            if len(node.queue) >= 2:
                head = node.queue[0]
                if head == h.barrier:
                    h.pass_barrier(node)
                else:
                    h.run(node, str(h.name(head)))
    holders = [n for n in (n1, n2) if h.index("a") in n.sent]
    assert len(holders) == 1
    assert h.index("c") in holders[0].sent


def test_a_deselected_prerequisite_skips_its_dependent_with_a_hint(harness: Any) -> None:
    payload = make_payload({"a": "", "b": "a"})
    # The worker's graph lists deselected prerequisites after the tests of the run.
    z = nodeid("z")
    payload["graph"]["ids"].append(z)
    payload["graph"]["requires"] = [[], [2], []]
    payload["graph"]["after"] = [[], [], []]
    h: Harness = harness(payload, "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    assert h.recorder.skipped() == {
        nodeid("b"): "prerequisite test_z was deselected; add --dag-with-prerequisites to run it",
    }
    assert z not in {r.nodeid for r in h.recorder.reports}, "a deselected test is not reported"
    assert h.sends() == {"gw0": [["a", None]], "gw1": []}
    h.run_reports(n1, "a")
    assert h.sched.tests_finished


# ------------------------------------------------------------------ through config.hook


def test_reports_through_the_hook_loop_back_harmlessly(harness: Any) -> None:
    """With the controller registered, its own SKIPPED reports come back to it."""
    h: Harness = harness(make_payload(SKIP_SPEC), "--dag-affinity=none")
    h.config.pluginmanager.register(h.controller, "dagorder-test-controller")
    n1, n2 = h.start("gw0", "gw1")
    for when, out, longrepr in phases("failed"):
        rep = pytest.TestReport(nodeid("a"), (MODULE, 0, "test_a"), {}, out,  # type: ignore[arg-type]
                                longrepr, when)
        rep.node = n1  # type: ignore[attr-defined]
        h.reported.add(nodeid("a")) if when == "teardown" else None
        h.config.hook.pytest_runtest_logreport(report=rep)
        h.check()
    assert set(h.recorder.skipped()) == {nodeid("b"), nodeid("c")}


# ------------------------------------------------------------------ GuardedScheduling


class FakeInner:
    """Another xdist scheduler, recording the calls it got."""

    def __init__(self, nodes: list[FakeNode]) -> None:
        self.nodes = nodes
        self.calls: list[str] = []
        self.tests_finished = False

    def schedule(self) -> None:
        self.calls.append("schedule")

    def mark_test_complete(self, node: FakeNode, index: int, duration: float = 0) -> None:
        self.calls.append(f"complete {node.gateway.id} {index}")


def guarded(pytester: pytest.Pytester, recorder: Recorder,
            payload: Payload) -> tuple[GuardedScheduling, LoadScheduling, list[FakeNode]]:
    config = make_config(pytester, recorder)
    controller = DagController(config, "skip")
    inner = LoadScheduling(config)
    nodes = [FakeNode("gw0"), FakeNode("gw1")]
    for node in nodes:
        controller.channels[node] = FakeChannel(payload)
        inner.add_node(node)
        inner.add_node_collection(node, payload["ids"])
    return GuardedScheduling(inner, controller, "loadfile"), inner, nodes


def test_guarded_scheduling_forwards_a_suite_without_graph(
    pytester: pytest.Pytester, recorder: Recorder
) -> None:
    payload = make_payload({"a": "", "b": "", "c": "", "d": ""}, graph=False)
    sched, inner, (n1, n2) = guarded(pytester, recorder, payload)
    assert sched.collection_is_completed
    sched.schedule()
    assert sorted(n1.sends[0] + n2.sends[0]) == [0, 1, 2, 3]  # xdist's own dispatch
    assert sched.nodes == inner.nodes
    sched.schedule()  # the plan is read once
    assert not recorder.collect
    for node in (n1, n2):
        for i in list(node.queue):
            sched.mark_test_complete(node, i, 0.0)
    assert sched.tests_finished


def test_guarded_scheduling_forwards_every_call(
    pytester: pytest.Pytester, recorder: Recorder
) -> None:
    config = make_config(pytester, recorder)
    controller = DagController(config, "skip")
    node = FakeNode("gw0")
    controller.channels[node] = FakeChannel(make_payload({"a": ""}, graph=False))
    inner = FakeInner([node])
    sched = GuardedScheduling(inner, controller, "loadscope")
    sched.schedule()
    sched.schedule()
    sched.mark_test_complete(node, 0, 0.0)
    assert inner.calls == ["schedule", "schedule", "complete gw0 0"]
    assert sched.tests_finished is False


@pytest.mark.parametrize("kind", ["graph", "problems"])
def test_guarded_scheduling_refuses_declared_dependencies(
    pytester: pytest.Pytester, recorder: Recorder, kind: str
) -> None:
    if kind == "graph":
        payload = make_payload(CHAIN)
    else:
        payload = make_payload(CHAIN, problems=[(nodeid("b"), "target 'x' matches no test")])
    sched, inner, nodes = guarded(pytester, recorder, payload)
    with pytest.raises(pytest.Session.Interrupted):
        sched.schedule()
    assert all(n.sends == [] for n in nodes), "the inner scheduler ran"
    assert all(n.shutdown_calls == 1 for n in nodes)
    first = recorder.collect[0]
    assert "--dist loadfile cannot honour depends_on/run_after" in str(first.longrepr)
    expected = nodeid("a") if kind == "graph" else nodeid("b")
    assert first.nodeid == expected
    assert len(recorder.collect) == (1 if kind == "graph" else 2)


# ------------------------------------------------------------------ property: no deadlock


@st.composite
def dags(draw: st.DrawFn) -> tuple[Payload, dict[str, Outcome]]:
    n = draw(st.integers(1, 9))
    names = [f"t{k}" for k in range(n)]
    spec: dict[str, str] = {}
    after: dict[str, str] = {}
    modules: dict[str, str] = {}
    outcomes: dict[str, Outcome] = {}
    for k, name in enumerate(names):
        earlier = names[:k]
        reqs = draw(st.lists(st.sampled_from(earlier), unique=True, max_size=2)) if earlier else []
        afts = draw(st.lists(st.sampled_from(earlier), unique=True, max_size=1)) if earlier else []
        spec[name] = " ".join(reqs)
        after[name] = " ".join(a for a in afts if a not in reqs)
        modules[name] = draw(st.sampled_from(["test_m.py", "test_n.py"]))
        outcomes[name] = draw(st.sampled_from(["passed", "passed", "passed", "failed", "error"]))
    return make_payload(spec, after=after, modules=modules), outcomes


@settings(max_examples=1500, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    case=dags(),
    affinity=st.sampled_from(["module", "none"]),
    policy=st.sampled_from(["skip", "run"]),
    seed=st.integers(0, 2**16),
    fast=st.booleans(),
    crash_at=st.one_of(st.none(), st.integers(0, 12)),
)
def test_any_dag_runs_to_the_end_without_deadlock(
    pytester: pytest.Pytester,
    case: tuple[Payload, dict[str, Outcome]],
    affinity: str,
    policy: Literal["skip", "run"],
    seed: int,
    fast: bool,
    crash_at: int | None,
) -> None:
    payload, outcomes = case
    recorder = Recorder()
    h = Harness(make_config(pytester, recorder, f"--dag-affinity={affinity}"), recorder,
                payload, policy=policy)
    rng = random.Random(seed)
    nodes = h.start("gw0", "gw1")
    ran: list[str] = []
    crashed: list[str] = []
    for step in range(10 * len(h.ids) + 10):
        if h.sched.tests_finished:
            break
        if step == crash_at:
            # A worker dies (os._exit) while running the head of its queue.
            victim = rng.choice(nodes)
            head = victim.queue[0] if victim.queue else None
            item = h.remove(victim)
            if head is None or head == h.barrier:
                assert item is None
            else:
                assert item == h.ids[head]
                crashed.append(item)
                h.report(victim, str(h.name(head)), "???", "failed", "worker crashed")
            nodes.remove(victim)
            replacement = h.add(f"gw{step + 2}")
            h.schedule()
            nodes.append(replacement)
            continue
        runnable = [n for n in nodes if len(n.queue) >= 2]
        assert runnable, f"deadlock: queues {[n.queue for n in nodes]}"
        node = rng.choice(runnable)
        head = node.queue[0]
        if head == h.barrier:
            h.pass_barrier(node)
        else:
            name = h.ids[head].rsplit("::test_", 1)[1]
            ran.append(name)
            h.run(node, name, outcomes[name], duration=0.0 if fast else 1.0)
    assert h.sched.tests_finished
    assert len(ran) + len(crashed) + len(recorder.skipped()) == len(h.ids)
    g = payload["graph"]
    for k, reqs in enumerate(g["requires"]):
        name = h.ids[k].rsplit("::test_", 1)[1]
        prereqs = [h.ids[p].rsplit("::test_", 1)[1] for p in (*reqs, *g["after"][k])]
        if name in ran:
            # Ran after every prerequisite ended (a skipped one never ran).
            pos = ran.index(name)
            assert all(p not in ran or ran.index(p) < pos for p in prereqs)
        if policy == "skip" and any(
            outcomes[h.ids[p].rsplit("::test_", 1)[1]] != "passed"
            or h.ids[p] in recorder.skipped() or h.ids[p] in crashed
            for p in reqs
        ):
            assert name not in ran
