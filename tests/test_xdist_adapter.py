"""Tier 2: the xdist adapter (``DependencyScheduling``) driven through xdist's scheduler protocol.

Fake worker nodes record what the controller sends them, in the spirit of
``MockNode`` in xdist's testing/test_dsession.py.  A fake node also keeps the
queue a real worker would hold, so the harness can check what matters about
the lookahead deadlock (docs/how-it-works.rst, "Barrier items"): a worker
runs the head of its queue only once a next index (or the shutdown mark) is
behind it, hence every send must end with the barrier index and no queue may
ever end with a real test.

The harness checks its invariants after every event (:meth:`Harness.check`):
no real test is sent twice to live nodes, every send ends with the barrier,
and ``tests_finished`` is true exactly when every test has a final report.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.xdist_fakes import (
    MODULE,
    FakeChannel,
    FakeNode,
    Harness,
    Outcome,
    Recorder,
    make_config,
    make_facts,
    nodeid,
    phases,
)
from xdist.scheduler import LoadScheduling

from pytest_dagorder.declaring.notes import EdgesFileNote, ShardNote
from pytest_dagorder.drivers.distributed import wire
from pytest_dagorder.drivers.distributed.controller import (
    RECEIVE_TIMEOUT,
    DagController,
    GuardedScheduling,
)
from pytest_dagorder.drivers.distributed.dispatch import SHORT_TEST
from pytest_dagorder.planning.facts import PER_TEST_FIELDS, Census, Facts, location_of

CHAIN = {"a": "", "b": "a", "c": "b"}
AFFINITIES = ["--dag-affinity=module", "--dag-affinity=none"]


# ------------------------------------------------------------------ the chain


@pytest.mark.parametrize("affinity", AFFINITIES)
def test_chain_sends_one_test_ahead_each_followed_by_the_barrier(
    harness: Any, affinity: str
) -> None:
    h: Harness = harness(make_facts(CHAIN), affinity)
    n1, _ = h.start("gw0", "gw1")
    # A naive dispatcher would send [a] and wait for a's outcome: a deadlock.
    # b can start only once a ended, on any worker: it waits on a's, behind a
    # barrier, and starts there without a round trip through the controller.
    assert h.sends() == {"gw0": [["a", None], ["b", None]], "gw1": []}

    h.report(n1, "a", "setup")
    h.report(n1, "a", "call")
    assert h.sends() == {"gw0": [["a", None], ["b", None]], "gw1": []}, "c sent before a ended"
    h.report(n1, "a", "teardown")
    assert h.sends() == {"gw0": [["a", None], ["b", None], ["c", None]], "gw1": []}
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
    assert not h.recorder.skipped() and not h.gated


def test_chains_of_two_modules_run_side_by_side(harness: Any) -> None:
    """Each module's chain is bound to one worker; different modules run in parallel."""
    payload = make_facts({"a": "", "b": "a", "p": "", "q": "p"},
                         modules={"a": "test_x.py", "b": "test_x.py"})
    h: Harness = harness(payload)
    n1, n2 = h.start("gw0", "gw1")
    assert h.sends() == {"gw0": [["a", None], ["b", None]], "gw1": [["p", None], ["q", None]]}
    h.drain(n1, n2)
    assert h.sends() == {"gw0": [["a", None], ["b", None]], "gw1": [["p", None], ["q", None]]}


# ------------------------------------------------------------------ diamond


DIAMOND = {"a": "", "b": "a", "c": "a", "d": "b c"}


def test_diamond_runs_the_middle_in_parallel(harness: Any) -> None:
    h: Harness = harness(make_facts(DIAMOND), "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    # Nothing else is ready: b (as urgent as c, collected first) waits behind a.
    assert h.sends() == {"gw0": [["a", None], ["b", None]], "gw1": []}
    h.run(n1, "a")
    assert h.sends() == {"gw0": [["a", None], ["b", None]], "gw1": [["c", None]]}
    h.pass_barrier(n1)
    h.run(n1, "b")
    # d now waits on c only, which runs on gw1: d waits there, behind c.
    assert h.sends() == {"gw0": [["a", None], ["b", None]], "gw1": [["c", None], ["d", None]]}
    h.run(n2, "c")
    h.pass_barrier(n2)
    h.run_reports(n2, "d")
    assert h.sched.tests_finished


def test_diamond_in_one_module_stays_on_one_node(harness: Any) -> None:
    h: Harness = harness(make_facts(DIAMOND), "--dag-affinity=module")
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
    h: Harness = harness(make_facts(SKIP_SPEC, after={"e": "a"}), "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    assert h.sends()["gw0"] == [["a", None], ["b", None]]  # b handed out ahead
    h.run(n1, "a", outcome)
    # gw0 holds b: it skips b itself; the controller skips c, which nobody holds,
    # once b's own line is out (b is c's cause).
    assert h.recorder.skipped() == {}
    h.pass_barrier(n1)
    h.run(n1, "b")
    assert h.recorder.skipped() == {
        nodeid("c"): f"prerequisite test_b was skipped: test_a {phrase}",
    }
    # The controller emits each skip as a whole test: start, setup, teardown, finish.
    events = [e for e, nid in h.recorder.events if nid == nodeid("c")]
    assert events == ["logstart", "report setup skipped", "report teardown passed", "logfinish"]
    rep = next(r for r in h.recorder.reports if r.nodeid == nodeid("c"))
    assert rep.location == (MODULE, 20, "test_c")
    assert rep.longrepr == (
        MODULE, 21, f"Skipped: prerequisite test_b was skipped: test_a {phrase}")
    # run_after only orders: e runs whatever a's outcome was.
    h.drain(n1, n2)
    assert h.gated == {nodeid("b"): f"prerequisite test_a {phrase}"}
    ran = {h.name(i) for n in (n1, n2) for i in n.sent if i != h.barrier}
    assert ran == {"a", "b", "d", "e"}


def test_policy_stop_skips_everything_not_started(harness: Any) -> None:
    h: Harness = harness(make_facts(SKIP_SPEC), "--dag-affinity=none", policy="stop")
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


def test_controller_skips_take_their_locations_from_the_plan_it_follows(
        harness: Any) -> None:
    """The first worker's plan carries every location; the others' are not read.

    A location the plan lacks falls back to the node id: no line.
    """
    full = make_facts(SKIP_SPEC)
    locations = full.locations
    first = dataclasses.replace(full, locations=[
        None if ids == nodeid("e") else loc
        for loc, ids in zip(locations, full.ids, strict=True)])
    # A second worker's plan is only checked for its version, never merged.
    other = dataclasses.replace(full, locations=[
        ("elsewhere.py", 99, "not_read") for _ in locations])

    h: Harness = harness(full, "--dag-affinity=none", policy="stop")
    n1 = h.add("gw0", channel=FakeChannel(first))
    h.add("gw1", channel=FakeChannel(other))
    h.schedule()
    h.run(n1, "a", "failed")
    where = {r.nodeid: r.location for r in h.recorder.reports if r.skipped}
    assert where == {
        nodeid("b"): locations[h.index("b")],
        nodeid("c"): locations[h.index("c")],
        nodeid("e"): (MODULE, None, "test_e"),  # the plan had none: from the node id
    }


def test_a_location_from_the_node_id_alone() -> None:
    assert location_of("pkg/test_m.py::TestA::test_x[1]") == (
        "pkg/test_m.py", None, "TestA.test_x[1]")


def test_policy_run_sends_dependents_anyway(harness: Any) -> None:
    h: Harness = harness(make_facts(CHAIN), policy="run")
    n1, _ = h.start("gw0", "gw1")
    h.run(n1, "a", "failed")
    assert h.sends()["gw0"][-1] == ["b", None]
    assert not h.recorder.skipped()


# ------------------------------------------------------------------ crashes


def test_crash_returns_the_running_test_and_skips_its_dependents(harness: Any) -> None:
    spec = {"a": "", "b": "a", "c": "b", "x": ""}
    h: Harness = harness(make_facts(spec), "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    assert h.sends() == {"gw0": [["a", None], ["b", None]], "gw1": [["x", None]]}
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


def test_crash_gives_the_other_tests_it_held_to_the_other_node(harness: Any) -> None:
    """Short tests are pipelined; a crash gives back every held test but the running one."""
    spec = {name: "" for name in "abcdefghijkl"}
    h: Harness = harness(make_facts(spec), "--dag-affinity=none")
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


def test_fast_tests_are_topped_up_while_half_a_batch_is_left(harness: Any) -> None:
    """The controller learns of an end only after the reports queued before it:
    a worker topped up at its last test would run dry before the batch came."""
    spec = {f"t{k:03d}": "" for k in range(300)}
    h: Harness = harness(make_facts(spec), "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    held_at_top_up: list[int] = []
    while not h.sched.tests_finished:
        for node in (n1, n2):
            if len(node.queue) < 2:
                continue
            sends = len(node.sends)
            real = [i for i in node.queue if i != h.barrier]
            h.step(node, duration=0.0)
            if len(node.sends) > sends and node.queue[0] != h.barrier:
                held_at_top_up.append(len(real) - 1)
    assert max(held_at_top_up) >= 3, held_at_top_up
    assert len(h.reported) == 300


def test_free_fast_tests_are_topped_up_below_half_their_share_not_per_report(
    harness: Any,
) -> None:
    """Free tests (affinity none) share what is ready, far less than a batch:
    a worker still holding half of its share gets nothing more, so that a
    send carries several tests instead of one per report (each send is a
    message and a barrier on the worker)."""
    names = [f"c{c:02d}_{k}" for c in range(40) for k in range(5)]
    spec = {n: (f"{n[:4]}{int(n[4:]) - 1}" if n[4:] != "0" else "") for n in names}
    h: Harness = harness(make_facts(spec), "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    top_ups: list[tuple[int, int]] = []  # (real tests held, real tests added)
    while not h.sched.tests_finished:
        for node in (n1, n2):
            if len(node.queue) < 2:
                continue
            sends = len(node.sends)
            h.step(node, duration=0.0)
            held = [i for i in node.queue if i != h.barrier]
            if len(node.sends) > sends:
                added = [i for i in node.sends[-1] if i != h.barrier]
                if len(held) > len(added):
                    top_ups.append((len(held) - len(added), len(added)))
    assert len(h.reported) == 200
    assert top_ups, h.sends()
    # A worker holding k tests is topped up only when k is below half of
    # what it is brought up to.
    assert all(k < 2 or k < (k + added) // 2 for k, added in top_ups), top_ups


def test_fast_tests_take_the_next_module_before_the_last_one_ends(harness: Any) -> None:
    """Module affinity: a worker holding the rest of its module gets the next
    one behind it, without a round trip at the module's end; each module
    still runs on one worker, in one stretch."""
    names = [f"{m}{k}" for m in "abc" for k in range(10)]
    spec = {n: (f"{n[0]}{int(n[1:]) - 1}" if n[1:] != "0" else "") for n in names}
    modules = {n: f"test_{n[0]}.py" for n in names}
    h: Harness = harness(make_facts(spec, modules=modules), "--dag-affinity=module")
    n1, n2 = h.start("gw0", "gw1")
    early = False
    ran: dict[str, list[str]] = {"gw0": [], "gw1": []}
    while not h.sched.tests_finished:
        for node in (n1, n2):
            if len(node.queue) < 2:
                continue
            head = h.name(node.queue[0])
            if head is not None:
                ran[node.gateway.id].append(head)
            h.step(node, duration=0.0)
            held = {str(h.name(i))[0] for i in node.queue if i != h.barrier}
            if "c" in held and held & {"a", "b"}:
                early = True  # c's tests sent while a or b was not done there
    assert early, h.sends()
    assert len(h.reported) == 30
    for module in "abc":
        where = [w for w, tests in ran.items() if any(t[0] == module for t in tests)]
        assert len(where) == 1, (module, ran)
        tests = [t[0] for t in ran[where[0]]]
        first, last = tests.index(module), len(tests) - tests[::-1].index(module)
        assert set(tests[first:last]) == {module}, ran


def test_crash_in_a_barrier_blames_no_test(harness: Any) -> None:
    """Teardown past the barrier crashed: no real test was running there."""
    h: Harness = harness(make_facts(CHAIN))
    n1, n2 = h.start("gw0", "gw1")
    h.run(n1, "a")
    assert n1.queue == [h.barrier, h.index("b"), h.barrier, h.index("c"), h.barrier]
    assert h.remove(n1) is None
    # b and c had not started: they go to the other node, nothing is skipped.
    assert h.sends() == {"gw0": [["a", None], ["b", None], ["c", None]],
                         "gw1": [["b", None], ["c", None]]}
    assert not h.recorder.skipped()
    h.run_reports(n2, "b")
    h.complete(n2, h.index("b"))
    h.pass_barrier(n2)
    h.run_reports(n2, "c")
    assert h.sched.tests_finished


def test_normal_finish_remove_node_returns_none(harness: Any) -> None:
    h: Harness = harness(make_facts({"a": "", "b": ""}), "--dag-affinity=none")
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
    h: Harness = harness(make_facts(CHAIN))
    n1 = h.add("gw0")
    assert h.remove(n1) is None
    assert h.sched.nodes == []


# ------------------------------------------------------------------ schedule() again


def test_schedule_is_idempotent(harness: Any) -> None:
    h: Harness = harness(make_facts(DIAMOND), "--dag-affinity=none")
    h.start("gw0", "gw1")
    before = h.sends()
    for _ in range(3):
        h.schedule()
    assert h.sends() == before


def test_a_replacement_node_gets_the_work_left(harness: Any) -> None:
    spec = {"a": "", "b": "", "c": "b"}
    h: Harness = harness(make_facts(spec), "--dag-affinity=none", nodes=1)
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
    h: Harness = harness(make_facts({"a": "", "b": "a"}), "--dag-affinity=none")
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
    h: Harness = harness(make_facts(CHAIN))
    n1, _ = h.start("gw0", "gw1")
    h.run_reports(n1, "a")
    before = h.sends()
    h.report(n1, "a", "teardown")
    h.report(n1, "a", "teardown", "failed", "E   again")
    assert h.sends() == before
    assert not h.recorder.skipped()


def test_tests_finished_only_once_collection_is_complete(harness: Any) -> None:
    h: Harness = harness(make_facts({"a": ""}))
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
    h: Harness = harness(make_facts({}, graph=False))
    n1, n2 = h.start("gw0", "gw1")
    assert h.sched.tests_finished
    assert n1.sends == n2.sends == []


def test_a_suite_without_declarations_runs_every_test(harness: Any) -> None:
    # --dag-on-failure=stop: the barrier, to withhold what follows a failure.
    h: Harness = harness(make_facts({"a": "", "b": "", "c": ""}, graph=False),
                         "--dag-on-failure=stop", policy="stop")
    n1, n2 = h.start("gw0", "gw1")
    h.drain(n1, n2)
    assert sorted(i for n in (n1, n2) for i in n.sent if i != h.barrier) == [0, 1, 2]


# ------------------------------------------------------------------ aborting


def test_declaration_problems_interrupt_the_session(harness: Any) -> None:
    problems = [(nodeid("b"), "depends_on target 'nope' matches no test"),
                (nodeid("c"), "run_after target 'gone' matches no test")]
    h: Harness = harness(make_facts(CHAIN, problems=problems))
    n1 = h.up("gw0")
    n2 = h.up("gw1")
    # Read from the first collection in, while the other worker still collects.
    with pytest.raises(pytest.Session.Interrupted, match="2 errors during collection"):
        h.collected(n1)
    assert [(r.nodeid, r.outcome, str(r.longrepr)) for r in h.recorder.collect] == [
        (nodeid("b"), "failed", "pytest-dagorder: depends_on target 'nope' matches no test"),
        (nodeid("c"), "failed", "pytest-dagorder: run_after target 'gone' matches no test"),
    ]
    assert n1.shutdown_calls == n2.shutdown_calls == 1
    assert n1.sends == n2.sends == []
    h.collected(n2)  # a late worker's collection: no second report, no send
    assert h.sched.tests_finished  # DSession's loop must not wait for anything
    h.sched.schedule()
    assert len(h.recorder.collect) == 2
    assert n1.sends == n2.sends == []


def test_no_graph_from_the_worker_interrupts_with_a_bounded_wait(harness: Any) -> None:
    h: Harness = harness(make_facts(CHAIN))
    channel = FakeChannel(TimeoutError("no answer"))
    n1 = h.up("gw0", channel=channel)
    n2 = h.up("gw1")
    with pytest.raises(pytest.Session.Interrupted, match="1 error during collection"):
        h.collected(n1)
    assert channel.timeouts == [RECEIVE_TIMEOUT]
    (rep,) = h.recorder.collect
    assert "no dependency graph from worker gw0: no answer" in str(rep.longrepr)
    assert n1.shutdown_calls == 1
    assert n1.sends == n2.sends == []


def test_no_graph_from_the_worker_shuts_down_every_node(harness: Any) -> None:
    h: Harness = harness(make_facts(CHAIN))
    n1 = h.up("gw0")
    n2 = h.up("gw1", channel=FakeChannel(TimeoutError("no answer")))
    h.collected(n1)
    h.collected(n2)
    with pytest.raises(pytest.Session.Interrupted):
        h.sched.schedule()  # the second worker's hello never comes
    assert (n1.shutdown_calls, n2.shutdown_calls) == (1, 1)


def test_the_first_collected_worker_is_asked_and_the_core_built_while_others_collect(
        harness: Any) -> None:
    # Every worker makes the same plan: the first whose collection comes in
    # is asked for it at once, and the core is built from it before the
    # others are done.  Nothing is announced, reported or sent until xdist's
    # first schedule(); the others are only checked for their version then.
    h: Harness = harness(make_facts(CHAIN))
    first = h.add("gw1")
    first_channel = h.controller.channels[first]
    # Told to host the barrier as soon as its hello was read, then asked.
    assert first_channel.sent == [wire.barriers(), wire.plan_request()]
    assert first_channel.timeouts == [RECEIVE_TIMEOUT, RECEIVE_TIMEOUT]
    assert h.sched.phases.built is not None and h.sched.phases.run is None
    assert not h.sched.tests_finished and not h.sched.has_pending
    other = h.add("gw0")
    other_channel = h.controller.channels[other]
    assert other_channel.sent == [] and other_channel.timeouts == []
    assert h.journal == [] and h.recorder.reports == []
    h.schedule()
    assert h.sched.phases.followed is first
    assert other_channel.sent == [wire.barriers()]
    assert other_channel.timeouts == [RECEIVE_TIMEOUT]  # the hello only
    assert first_channel.timeouts == [RECEIVE_TIMEOUT, RECEIVE_TIMEOUT]
    h.drain(first, other)
    assert h.terminal() == set(h.ids)


def test_a_worker_gone_since_its_collection_is_passed_over(harness: Any) -> None:
    # The first to collect died before it could ship its plan: the next
    # worker to collect is asked instead, and the run starts without the first.
    h: Harness = harness(make_facts(CHAIN))
    gone = h.add("gw0", channel=FakeChannel(EOFError("gone")))
    assert h.sched.phases.built is None
    n2 = h.add("gw1")
    assert h.controller.channels[n2].requests == [wire.plan_request()]
    assert h.sched.phases.built is not None
    assert h.sched.remove_node(gone) is None
    h.schedule()
    assert h.sched.phases.followed is n2


@pytest.mark.parametrize("gone_first", [True, False], ids=["asked-for-its-plan", "admitted"])
def test_a_gone_worker_xdist_has_not_removed_yet_gets_nothing_and_ends_nothing(
        harness: Any, gone_first: bool) -> None:
    # Its channel closed right after its collection; the run starts before
    # xdist handles its death.  Whether it was asked for the plan (its
    # collection came first) or is only checked at the start (it came
    # second), it is passed over: read once, given no work.
    h: Harness = harness(make_facts(CHAIN))
    gone = h.up("gw0", channel=FakeChannel(EOFError("gone")))
    n2 = h.up("gw1")
    for node in ((gone, n2) if gone_first else (n2, gone)):
        h.collected(node)
    try:
        h.schedule()
    except pytest.Session.Interrupted as exc:  # a KeyboardInterrupt: would end this session
        pytest.fail(f"the session was ended: {exc}")
    assert h.sched.phases.followed is n2
    assert gone.sends == [] and gone.shutdown_calls == 0
    assert h.controller.channels[gone].timeouts == [RECEIVE_TIMEOUT]
    assert h.sched.remove_node(gone) is None
    h.drain(n2)
    assert h.terminal() == set(h.ids)


class DeadNode(FakeNode):
    """A worker whose process died before xdist noticed: sending to it fails."""

    def send_runtest_some(self, indices: Sequence[int]) -> None:
        raise OSError("cannot send (already closed?)")


def test_a_worker_dead_before_xdist_noticed_gets_nothing_and_loses_nothing(
        harness: Any) -> None:
    h: Harness = harness(make_facts({"a": "", "b": "", "c": "a"}), "--dag-affinity=none")
    dead = DeadNode("gw0", h.journal)
    h.nodes.append(dead)
    h.controller.channels[dead] = FakeChannel(h.payload)
    h.sched.add_node(dead)
    h.sched.add_node_collection(dead, list(h.ids))
    n2 = h.add("gw1")
    h.schedule()  # the send to gw0 fails: no INTERNALERROR
    assert dead.sends == []
    assert h.remove(dead) is None, "nothing it never received can have crashed it"
    h.drain(n2)
    assert h.terminal() == set(h.ids)
    assert h.sched.tests_finished


@pytest.mark.parametrize("raw", [
    ("hello", {"format": 1, "version": "0.0.1", "census": ()}),
    ("hello", {"format": wire.FORMAT}),
    {"format": 10, "version": "0.0.1", "census": ()},  # before the envelope
    "not a message",
])
def test_a_message_of_another_version_is_a_usage_error_naming_both(
        harness: Any, raw: object) -> None:
    h: Harness = harness(make_facts(CHAIN))
    n1 = h.up("gw0", channel=FakeChannel(raw))
    n2 = h.up("gw1")
    with pytest.raises(pytest.UsageError) as info:
        h.collected(n1)
    theirs = ("pytest-dagorder 0.0.1" if isinstance(raw, tuple) and "version" in raw[1]
              else "an unknown version of pytest-dagorder")
    assert str(info.value) == (
        f"pytest-dagorder: worker gw0: a worker runs {theirs}, this process runs "
        f"pytest-dagorder {wire.__version__}; install the same version where the workers run")
    assert (n1.shutdown_calls, n2.shutdown_calls) == (1, 1)
    assert n1.sends == n2.sends == []


@pytest.mark.parametrize("census", [
    None,  # none said
    dataclasses.astuple(Census()),  # the counts without their names
    {**dataclasses.asdict(Census()), "needs": "1"},
    {"graph": True},
])
def test_a_malformed_message_of_this_version_is_a_usage_error(
        harness: Any, census: object) -> None:
    h: Harness = harness(make_facts(CHAIN))
    said = {"format": wire.FORMAT, "version": wire.__version__}
    n1 = h.up("gw0", channel=FakeChannel(
        ("hello", said if census is None else {**said, "census": census})))
    h.up("gw1")
    with pytest.raises(pytest.UsageError, match="malformed hello"):
        h.collected(n1)


def test_each_side_reads_a_message_by_its_kind_and_refuses_an_unknown_one() -> None:
    table = {wire.EXIT: wire.read_exit, wire.PUBLISHED: wire.read_published}
    read, data = wire.route(over_execnet(wire.published("t.py::a", {"x": 1})), table)
    assert read(data) == wire.Published("t.py::a", {"x": 1})
    for raw, error in [
        (("bogus", None), "a message of unknown kind 'bogus' on the dagorder channel "
                          "(expected 'exit', 'published')"),
        (wire.closing("t.py::a", []), "unknown kind 'closing'"),  # the other side's
        ("bogus", "not a (kind, data) pair: str"),
        (("exit", None, None), "not a (kind, data) pair: tuple"),
    ]:
        with pytest.raises(wire.WireError, match=re.escape(error)):
            wire.route(raw, table)
    for kind, reader in [(wire.EXIT, wire.read_exit), (wire.PUBLISHED, wire.read_published),
                         (wire.DELIVERY, wire.read_deliveries),
                         (wire.CLOSING, wire.read_closing)]:
        with pytest.raises(wire.WireError, match=f"a malformed '{kind}' message"):
            reader(("t.py::a",))


def native(value: object) -> bool:
    """Whether ``value`` is made only of what execnet carries as it is."""
    if isinstance(value, (list, tuple)):
        return all(map(native, value))
    if isinstance(value, dict):
        return all(type(k) is str and native(v) for k, v in value.items())
    return value is None or type(value) in (str, int, float, bool)


def over_execnet(message: object) -> object:
    """``message`` as the other side of an execnet channel receives it."""
    from execnet import gateway_base

    return gateway_base.loads_internal(gateway_base.dumps_internal(message))


def test_the_facts_cross_as_execnet_values_and_come_back_equal() -> None:
    facts = dataclasses.replace(
        make_facts(CHAIN, after={"c": "a"}, groups={"a": "g"}),
        resources=[["db"], [], ["db", "mq"]], exclusive=[False, True, False],
        dag_users=[True, False, False], module_fixtures=[False, True, False],
        shares_nothing=[False, False, True], documents=["file", None, "module"],
        fixtures=[[("shop", "session", "")], None, []], ordinals=[0, None, -1],
        time_limits=[1.5, None, None], fail_checks=[(nodeid("c"), [nodeid("a")])],
        problems=[(nodeid("b"), "why")],
        shard=ShardNote(1, 2, 1, 2, 1.0, None, True, False),
        edges_file=EdgesFileNote("e.json", True, 1, 0, 2),
        lf_blocked=1, complete=True, deselected=2)
    message = wire.encode(facts)
    assert native(message)
    back = wire.decode(over_execnet(message))
    assert back == facts
    # Named again on arrival (a plain tuple compares equal to a named one).
    assert type(back.shard) is ShardNote and type(back.edges_file) is EdgesFileNote
    hello = wire.hello(facts.census())
    assert native(hello)
    assert wire.check_hello(over_execnet(hello)) == facts.census()


def test_reordering_moves_each_per_test_field_and_the_edges_and_keeps_the_rest() -> None:
    facts = dataclasses.replace(
        make_facts(CHAIN, groups={"a": "g"}), resources=[["db"], [], ["mq"]],
        exclusive=[True, False, False], runtime_depends=[False, True, False],
        dag_users=[True, False, False], shares_nothing=[True, False, False],
        documents=["file", None, "module"], module_fixtures=[True, False, False],
        fixtures=[None, [], [("s", "session", "")]],
        fail_checks=[("t.py::c", ["t.py::a"])], ordering_failure="u",
        shard=ShardNote(1, 2, 1, 2, 1.0, None, True, False), complete=True, deselected=2,
        shard_left=1, ordinals=[None, None, -1], time_limits=[None, 2.0, None],
        fence_verdicts=["", None, "changed state"])
    moved = facts.in_order(list(reversed(facts.ids)))
    for f in dataclasses.fields(Facts):
        before, after = getattr(facts, f.name), getattr(moved, f.name)
        if f.name in PER_TEST_FIELDS:
            assert list(after) == list(reversed(before)), f.name
        elif f.name not in ("requires", "after"):
            assert after == before, f.name
    # c requires b requires a: reversed, a is last.
    assert moved.requires == [(1,), (2,), ()]
    # Every field with one entry per test is reordered (a new one must be listed).
    per_test = {f.name for f in dataclasses.fields(Facts)
                if isinstance(getattr(facts, f.name), list)
                and len(getattr(facts, f.name)) == len(facts.ids)
                and f.name not in ("requires", "after")}
    assert per_test == set(PER_TEST_FIELDS)


def test_locations_the_node_ids_do_not_give_and_outside_prerequisites_cross() -> None:
    base = make_facts({"a": "", "b": "a", "c": "b", "d": ""})
    ids = ["pkg/test_m.py::TestA::test_a", "pkg/test_m.py::test_b[1-x]",
           "test_n.py::test_c", "data.yaml::case"]
    facts = dataclasses.replace(
        base, ids=ids,
        locations=[("pkg/test_m.py", 3, "TestA.test_a"),  # as the node id says
                   ("pkg/test_m.py", None, "test_b[1-x]"),  # no line
                   ("elsewhere.py", 7, "test_c"),  # defined in another file
                   None],  # nothing known
        module_scopes=["pkg/test_m.py", "pkg/test_m.py", "test_n.py", None],
        class_scopes=["pkg/test_m.py::TestA", None, None, None],
        xdist_groups=[None, None, "g", None],
        documents=[None, None, None, "file"],
        requires=[(), (0,), (1, 4), (), ()], after=[(), (), (), (2,), ()],
        outside=["gone.py::test_x"])
    assert wire.decode(over_execnet(wire.encode(facts))) == facts


@pytest.mark.parametrize(("field", "value"), [
    ("ids", ["a", 1]), ("locations", [["t", 1, "a"]] * 3), ("locations", [None]),
    ("documents", ["page", None, None]), ("requires", [(5,), (), ()]),
    ("requires", [(0,)]), ("requires", [[], [0], [1]]), ("after", [(), ()]), ("graph", 1),
    ("exclusive", [1, 0, 0]),
])
def test_facts_of_the_wrong_shape_are_malformed(field: str, value: object) -> None:
    message = wire.encode(make_facts(CHAIN))
    message = (message[0], {**message[1], field: value})
    with pytest.raises(wire.WireError, match="malformed collection message"):
        wire.decode(message)


def test_a_run_that_needs_the_barrier_tells_every_worker_before_its_first_test(
        harness: Any) -> None:
    h: Harness = harness(make_facts(CHAIN))
    nodes = h.start("gw0", "gw1")
    for node in nodes:
        channel = h.controller.channels[node]
        assert channel.sent[0] == wire.barriers()
        assert channel.sent.count(wire.barriers()) == 1
    assert any(node.sends for node in nodes)
    # A suite that declares nothing: no barrier, no word of one.
    h = harness(make_facts({"a": "", "b": ""}, graph=False))
    nodes = [h.add("gw0"), h.add("gw1")]
    h.sched.schedule()
    assert any(node.sends for node in nodes)
    assert all(wire.barriers() not in h.controller.channels[n].sent for n in nodes)


def test_an_exit_request_survives_its_wire_format_and_nothing_else_is_one() -> None:
    table = {wire.EXIT: wire.read_exit}
    for request in (wire.ExitRequest("enough", None), wire.ExitRequest("stop: now", 3)):
        read, data = wire.route(over_execnet(wire.encode_exit(request)), table)
        assert read(data) == request
    for other in (wire.encode(make_facts(CHAIN)), wire.hello(Census()), "not json"):
        with pytest.raises(wire.WireError):
            wire.route(other, table)


def test_plugin_missing_on_the_workers_interrupts(harness: Any) -> None:
    h: Harness = harness(make_facts(CHAIN))
    n1 = h.up("gw0")
    h.up("gw1")
    del h.controller.channels[n1]
    with pytest.raises(pytest.Session.Interrupted):
        h.collected(n1)
    (rep,) = h.recorder.collect
    assert "the dagorder plugin is not active on the workers" in str(rep.longrepr)


# ------------------------------------------------------------------ differing collections


def test_a_replacement_node_with_another_collection_gets_no_work(harness: Any) -> None:
    h: Harness = harness(make_facts({"a": "", "b": "", "c": ""}), "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    h.report(n2, h.name(n2.queue[0]) or "", "setup")
    h.remove(n2)
    n3 = h.add("gw2", collection=list(reversed(h.ids)))
    h.schedule()
    assert n3.sends == []
    assert any("gw2" in line for line in h.log.lines), h.log.lines
    h.drain(n1)
    assert n3.sends == []


def test_no_usable_node_left_ends_the_run(harness: Any) -> None:
    h: Harness = harness(make_facts({"a": "", "b": ""}), "--dag-affinity=none", nodes=1)
    (n1,) = h.start("gw0")
    h.report(n1, h.name(n1.queue[0]) or "", "setup")
    assert h.remove(n1) is not None
    h.add("gw0-2", collection=list(reversed(h.ids)))
    try:
        h.sched.schedule()
    except pytest.Session.Interrupted:
        return
    assert h.sched.tests_finished, "no node can run the tests left, yet the run goes on"


def test_an_initial_node_with_another_collection_gets_no_work(harness: Any) -> None:
    h: Harness = harness(make_facts({"a": "", "b": "", "c": ""}), "--dag-affinity=none")
    n1 = h.add("gw0")
    n2 = h.add("gw1", collection=[nodeid("a"), nodeid("c"), nodeid("b")])
    h.sched.schedule()
    assert n2.sends == [], f"gw1 collected other tests but was sent {n2.sends}"
    assert n1.sends


# ------------------------------------------------------------------ handed out ahead


AHEAD = {"w": "", "a": "", "b": "a", "c": "b", "d": "c"}


def ahead(harness: Any) -> tuple[Harness, FakeNode, FakeNode]:
    """A chain in one module on gw0; w in another module makes tests look fast."""
    h: Harness = harness(make_facts(AHEAD, modules={"w": "test_w.py"}), "--dag-affinity=module")
    n1, n2 = h.start("gw0", "gw1")
    # Nothing ran yet, so tests count as slow: one in flight and the next one ahead.
    assert h.sends() == {"gw0": [["a", None], ["b", None]], "gw1": [["w", None]]}
    h.run(n2, "w", duration=0.0)
    h.run(n1, "a", duration=0.0)
    # Fast tests: the rest of gw0's chain goes out at once, without waiting for b.
    assert h.sends() == {"gw0": [["a", None], ["b", None], ["c", "d", None]],
                         "gw1": [["w", None]]}
    h.pass_barrier(n1)
    return h, n1, n2


def test_fast_chain_is_handed_out_ahead_to_its_worker(harness: Any) -> None:
    h, n1, n2 = ahead(harness)
    h.drain(n1, n2)
    assert h.sends()["gw1"] == [["w", None]]
    assert h.sends()["gw0"] == [["a", None], ["b", None], ["c", "d", None]]
    assert not h.recorder.skipped() and not h.gated


def test_a_failure_ahead_is_skipped_by_the_worker_not_twice(harness: Any) -> None:
    h, n1, n2 = ahead(harness)
    h.run(n1, "b", "failed", duration=0.0)
    # The worker holding c, d skips them itself; the controller reports nothing.
    assert h.recorder.skipped() == {}
    assert h.sched.tests_finished
    run = h.sched.phases.run
    assert run is not None
    assert run.summary_lines() == [], "no skip shown yet: none counted"
    n1.shutdown()
    n2.shutdown()
    while n1.queue:
        h.step(n1)
    assert h.gated == {
        nodeid("c"): "prerequisite test_b failed",
        nodeid("d"): "prerequisite test_c was skipped: test_b failed",
    }
    assert h.recorder.skipped() == {}
    assert run.summary_lines() == [f"{nodeid('b')} failed: blocked 2 tests"]
    assert run.summary_lines(verbose=True) == [
        f"{nodeid('b')} failed: blocked 2 tests", f"  {nodeid('c')}", f"  {nodeid('d')}"]
    assert h.remove(n1) is None


def test_skips_a_crashed_worker_held_are_reported_by_the_controller(harness: Any) -> None:
    h, n1, _ = ahead(harness)
    h.run(n1, "b", "failed", duration=0.0)
    assert h.remove(n1) is None  # it died past the barrier, before gating c
    assert h.recorder.skipped() == {
        nodeid("c"): "prerequisite test_b failed",
        nodeid("d"): "prerequisite test_c was skipped: test_b failed",
    }


def test_a_crash_ahead_of_a_chain_skips_the_chain(harness: Any) -> None:
    h, n1, _ = ahead(harness)
    h.report(n1, "b", "setup")
    assert h.remove(n1) == nodeid("b")
    assert h.recorder.skipped() == {
        nodeid("c"): "prerequisite test_b crashed its worker",
        nodeid("d"): "prerequisite test_c was skipped: test_b crashed its worker",
    }
    assert h.sched.tests_finished


def test_a_chain_handed_out_ahead_goes_back_if_its_worker_dies(harness: Any) -> None:
    h, n1, n2 = ahead(harness)
    h.run(n1, "b", duration=0.0)
    assert h.remove(n1) is None  # died tearing down past the barrier: c never started
    assert not h.recorder.skipped()
    assert h.sends()["gw1"][1:] and h.sends()["gw1"][1][0] == "c"
    h.drain(n2)
    assert {h.name(i) for i in n2.sent} == {"w", "c", "d", None}


# ------------------------------------------------------------------ groups and deselection


def test_an_xdist_group_binds_tests_of_different_modules_to_one_node(harness: Any) -> None:
    spec = {"a": "", "b": "", "c": "", "d": ""}
    payload = make_facts(spec, modules={"a": "test_x.py", "c": "test_y.py"},
                         groups={"a": "db", "c": "db"})
    h: Harness = harness(payload, "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    h.drain(n1, n2)
    holders = [n for n in (n1, n2) if h.index("a") in n.sent]
    assert len(holders) == 1
    assert h.index("c") in holders[0].sent


def test_a_deselected_prerequisite_skips_its_dependent_with_a_hint(harness: Any) -> None:
    payload = make_facts({"a": "", "b": "a"})
    # The worker's graph lists deselected prerequisites after the tests of the run.
    z = nodeid("z")
    payload = dataclasses.replace(payload, outside=[z], requires=[(), (2,), ()])
    h: Harness = harness(payload, "--dag-affinity=none")
    n1, _ = h.start("gw0", "gw1")
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
    h: Harness = harness(make_facts(SKIP_SPEC), "--dag-affinity=none")
    h.config.pluginmanager.register(h.controller, "dagorder-test-controller")
    n1, _ = h.start("gw0", "gw1")
    for when, out, longrepr in phases("failed"):
        rep = pytest.TestReport(nodeid("a"), (MODULE, 0, "test_a"), {}, cast(Any, out),
                                longrepr, when)
        rep.node = n1  # type: ignore[attr-defined]
        if when == "teardown":
            h.reported.add(nodeid("a"))
        h.config.hook.pytest_runtest_logreport(report=rep)
        h.check()
    # e was ready (both workers busy), so b was not handed out ahead: skipped here.
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
            payload: Facts) -> tuple[GuardedScheduling, LoadScheduling, list[FakeNode]]:
    config = make_config(pytester, recorder)
    controller = DagController(config)
    inner = LoadScheduling(config)
    nodes = [FakeNode("gw0"), FakeNode("gw1")]
    for node in nodes:
        controller.channels[node] = FakeChannel(payload)
        inner.add_node(node)
        inner.add_node_collection(node, payload.ids)
    return GuardedScheduling(inner, controller, "each"), inner, nodes


def test_guarded_scheduling_forwards_a_suite_without_graph(
    pytester: pytest.Pytester, recorder: Recorder
) -> None:
    payload = make_facts({"a": "", "b": "", "c": "", "d": ""}, graph=False)
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
    controller = DagController(config)
    node = FakeNode("gw0")
    controller.channels[node] = FakeChannel(make_facts({"a": ""}, graph=False))
    inner = FakeInner([node])
    sched = GuardedScheduling(inner, controller, "each")
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
        payload = make_facts(CHAIN)
    else:
        payload = make_facts(CHAIN, problems=[(nodeid("b"), "target 'x' matches no test")])
    sched, _, nodes = guarded(pytester, recorder, payload)
    with pytest.raises(pytest.Session.Interrupted):
        sched.schedule()
    assert all(n.sends == [] for n in nodes), "the inner scheduler ran"
    assert all(n.shutdown_calls == 1 for n in nodes)
    first = recorder.collect[0]
    assert "--dist each cannot honour depends_on/run_after" in str(first.longrepr)
    # The first test that declares a prerequisite (a declares nothing), or the problem's.
    assert first.nodeid == nodeid("b")
    assert len(recorder.collect) == (1 if kind == "graph" else 2)


# ------------------------------------------------------------------ property: no deadlock


@st.composite
def dags(draw: st.DrawFn) -> tuple[Facts, dict[str, Outcome]]:
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
    return make_facts(spec, after=after, modules=modules), outcomes


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(  # found on pytest 8.4: a crash while the head was a test sent ahead to skip
    case=(
        make_facts({f"t{k}": ("t0" if k == 1 else "") for k in range(9)},
                     after={"t3": "t2", "t6": "t3"}),
        {"t0": "failed", **{f"t{k}": "passed" for k in range(1, 9)}},
    ),
    affinity="module", policy="skip", seed=66, fast=True, crash_at=4, short=False,
)
@given(
    case=dags(),
    affinity=st.sampled_from(["module", "none"]),
    policy=st.sampled_from(["skip", "run"]),
    seed=st.integers(0, 2**16),
    fast=st.booleans(),
    crash_at=st.one_of(st.none(), st.integers(0, 12)),
    short=st.booleans(),
)
def test_any_dag_runs_to_the_end_without_deadlock(
    pytester: pytest.Pytester,
    case: tuple[Facts, dict[str, Outcome]],
    affinity: str,
    policy: Literal["skip", "run"],
    seed: int,
    fast: bool,
    crash_at: int | None,
    short: bool,
) -> None:
    """Random DAGs, outcomes, worker interleavings, maybe a crash: the run always ends.

    Fast tests (``fast``) make the controller pipeline several tests per
    worker and, under policy skip, hand a bound group's chain out ahead;
    so do tests recorded as short (``short``).
    """
    payload, outcomes = case
    recorder = Recorder()
    durations = [recorded(pytester, SHORT, payload)] if short else []
    h = Harness(make_config(pytester, recorder, f"--dag-affinity={affinity}",
                            f"--dag-on-failure={policy}", *durations),
                recorder, payload, policy=policy)
    rng = random.Random(seed)
    nodes = h.start("gw0", "gw1")
    ran: list[str] = []  # names, in the order their bodies ran
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
        if head != h.barrier:
            name = str(h.name(head))
            if h.gate(node, head) is None:
                ran.append(name)
            h.run(node, name, outcomes[name], duration=0.0 if fast else 1.0)
        else:
            h.pass_barrier(node)
    assert h.sched.tests_finished
    # DSession shuts the nodes down; each worker runs what it still holds.
    for node in nodes:
        node.shutdown()
        while node.queue:
            head = node.queue[0]
            if head != h.barrier:
                assert h.gate(node, head) is not None, f"{h.ids[head]} runs after the end"
            h.step(node)
    assert h.terminal() == set(h.ids)
    assert len(ran) + len(h.crashed) + len(recorder.skipped()) + len(h.gated) == len(h.ids)

    def short(k: int) -> str:
        return h.ids[k].rsplit("::test_", 1)[1]

    not_passed = {short(k) for k in range(len(h.ids))
                  if short(k) not in ran or outcomes[short(k)] != "passed"}
    for k, reqs in enumerate(payload.requires):
        if short(k) in ran:
            # It ran after every prerequisite ended (one skipped never ran).
            pos = ran.index(short(k))
            assert all(p not in ran or ran.index(p) < pos
                       for p in map(short, (*reqs, *payload.afters()[k])))
            if policy == "skip":
                assert not not_passed & set(map(short, reqs)), f"{short(k)} ran ungated"


# ------------------------------------------------------------------ published results


class ResultsChannel(FakeChannel):
    """A side channel that also carries results: published messages a test
    queues (``inbox``), deliveries the controller sends (``outbox``, with how
    many dispatches the node had received before each)."""

    def __init__(self, payload: Facts) -> None:
        super().__init__(payload)
        self.inbox: list[object] = []
        self.outbox: list[tuple[int, object]] = []
        self.node: FakeNode | None = None
        self.handshake_read = 0

    def receive(self, timeout: float | None = None) -> str:
        if self.handshake_read < self.handshake():  # the hello, then maybe the plan
            self.handshake_read += 1
            return super().receive(timeout)
        if not self.inbox:
            raise TimeoutError("nothing queued")
        return self.inbox.pop(0)  # type: ignore[return-value]

    def send(self, item: object) -> None:
        if item in (wire.plan_request(), wire.barriers()):
            super().send(item)
            return
        assert self.node is not None
        self.outbox.append((len(self.node.sends), item))


def results_harness(harness: Any, spec: Mapping[str, str]) -> tuple[
        Harness, dict[str, ResultsChannel]]:
    return channels_harness(
        harness, dataclasses.replace(make_facts(spec), dag_users=[True] * len(spec)))


def channels_harness(harness: Any, payload: Facts) -> tuple[
        Harness, dict[str, ResultsChannel]]:
    """Two workers whose side channels keep what the controller sends them, scheduled."""
    # Without affinity: the module's chain would be one group on one worker.
    h: Harness = harness(payload, "--dag-affinity=none")
    channels: dict[str, ResultsChannel] = {}
    for gid in ("gw0", "gw1"):
        channel = ResultsChannel(payload)
        channel.node = h.add(gid, channel=channel)
        channels[gid] = channel
    h.schedule()
    return h, channels


def holder(h: Harness, name: str) -> FakeNode:
    return next(n for n in h.nodes if h.index(name) in n.queue)


def test_values_reach_the_reader_s_worker_ahead_of_its_dispatch(harness: Any) -> None:
    h, channels = results_harness(harness, {"a": "", "e": "", "b": "a e"})
    for name, values in (("a", {"x": 1}), ("e", {"y": (2, b"z")})):
        node = holder(h, name)
        # The worker sends a passed test's values before its reports.
        channels[node.gateway.id].inbox.append(wire.published(nodeid(name), values))
        h.run(node, name)
    reader = holder(h, "b")
    channel = channels[reader.gateway.id]
    dispatch = next(k for k, send in enumerate(reader.sends) if h.index("b") in send)
    # (The dispatch may also say which scopes its last test ends: wire.closing.)
    deliveries = [wire.read_deliveries(data) for k, (kind, data) in channel.outbox
                  if k == dispatch and kind == wire.DELIVERY]
    assert len(deliveries) == 1, channel.outbox  # sent just before that dispatch
    ready, values = deliveries[0].ready, deliveries[0].values
    assert ready == [nodeid("b")]
    # What the reader's worker published itself it has already; the other's it gets.
    own = next(name for name in "ae" if h.local.get(reader, {}).get(h.index(name)))
    other = "e" if own == "a" else "a"
    assert set(values) == {nodeid(other)}
    assert values[nodeid(other)] == ({"x": 1} if other == "a" else {"y": (2, b"z")})
    h.drain(*h.nodes)


def test_values_queued_before_a_barrier_completion_is_handled_are_kept(
        harness: Any) -> None:
    """The controller handles a worker's events after its side channel filled.

    A barrier's completion looks for a pytest.exit() request on the side
    channel; values the worker published just after that barrier are often
    queued there already and must still reach the relay.
    """
    h, channels = results_harness(harness, {"a": "", "e": "", "b": "a e"})
    for name in ("a", "e"):
        h.run(holder(h, name), name)
    reader = holder(h, "b")
    assert reader.queue[0] == h.barrier, reader.queue  # b waits behind a barrier
    channels[reader.gateway.id].inbox.append(wire.published(nodeid("b"), {"z": 3}))
    h.pass_barrier(reader)
    h.run(reader, "b")
    relay = h.sched.phases.relay
    assert relay is not None
    assert relay.keys_by_test().get(h.index("b")) == ["z"]


def test_an_exit_request_read_with_published_values_is_kept(harness: Any) -> None:
    """The reverse: reading values for a report must not drop a pytest.exit()."""
    h, channels = results_harness(harness, {"a": "", "e": "", "b": "a e"})
    node = holder(h, "a")
    channels[node.gateway.id].inbox += [
        wire.published(nodeid("a"), {"x": 1}),
        wire.encode_exit(wire.ExitRequest("enough", 3)),
    ]
    h.run(node, "a")
    relay = h.sched.phases.relay
    assert relay is not None and relay.keys_by_test() == {h.index("a"): ["x"]}
    with pytest.raises(pytest.exit.Exception) as info:
        h.sched.mark_test_complete(node, h.barrier)
    assert (info.value.msg, info.value.returncode) == ("enough", 3)


def test_a_failed_test_s_values_are_dropped(harness: Any) -> None:
    h, channels = results_harness(harness, {"a": "", "e": "", "b": "a e"})
    node = holder(h, "e")
    channels[node.gateway.id].inbox.append(wire.published(nodeid("e"), {"y": 1}))
    h.run(node, "e", "failed")
    relay = h.sched.phases.relay
    assert relay is not None and relay.values == {}
    node = holder(h, "a")
    channels[node.gateway.id].inbox.append(wire.published(nodeid("a"), {"x": 1}))
    h.run(node, "a")
    assert relay.keys_by_test() == {h.index("a"): ["x"]}


@pytest.mark.parametrize("raw", [("bogus", None), ("published", "t.py::a"),
                                 wire.refused(wire.WireError("a message of unknown kind"))])
def test_a_message_the_controller_cannot_read_ends_the_session_naming_the_worker(
        harness: Any, raw: object) -> None:
    h, channels = results_harness(harness, {"a": "", "e": "", "b": "a e"})
    node = holder(h, "a")
    channels[node.gateway.id].inbox.append(raw)
    with pytest.raises(pytest.UsageError, match=f"^pytest-dagorder: worker {node.gateway.id}: "):
        h.run(node, "a")
    assert all(n.shutdown_calls == 1 for n in h.nodes)


def test_no_relay_without_a_dag_user(harness: Any) -> None:
    h: Harness = harness(make_facts(CHAIN))
    h.start("gw0", "gw1")
    assert h.sched.phases.relay is None



# ------------------------------------------------------------------ scopes a dispatch ends


def test_a_dispatch_says_which_module_its_last_test_ends(harness: Any) -> None:
    """Ahead of the dispatch of the last unsent test of a module, its worker is told
    the module ends with it (see drivers/distributed/closing.py); not before."""
    payload = make_facts({"a": "", "b": "a", "c": ""}, modules={"c": "test_other.py"})
    h, channels = channels_harness(harness, payload)
    h.run(holder(h, "a"), "a")
    found = [(c.nodeid, c.scopes) for c in (
        wire.read_closing(data) for channel in channels.values()
        for _, (kind, data) in channel.outbox if kind == wire.CLOSING)]
    assert (nodeid("b"), [MODULE]) in found, found
    assert (nodeid("c", "test_other.py"), ["test_other.py"]) in found, found
    assert all(nid != nodeid("a") for nid, _ in found), found  # b was still to come
    h.drain(*h.nodes)


# -- a failure after a prerequisite that ran elsewhere -------------------------------------


@pytest.mark.parametrize("affinity", ["none", "module", "state"])
def test_a_failure_names_the_prerequisite_that_ran_on_another_worker(
        harness: Any, affinity: str) -> None:
    # Many free tests beside: the worker that ran a prerequisite is still busy
    # with them when its dependent is handed out.
    spec = {"a": "", "b": "", **{f"f{k}": "" for k in range(8)}, "c": "a", "d": "b"}
    payload = make_facts(spec, modules={"c": "test_n.py", "d": "test_n.py"})
    if affinity == "state":
        # The default keeps every declared edge's tests together: only a
        # statement lifts one (here c and d say they share nothing).
        payload = dataclasses.replace(payload, shares_nothing=[n in "cd" for n in spec])
    h: Harness = harness(payload, f"--dag-affinity={affinity}", policy="run")
    seen: list[pytest.TestReport] = []
    on_report = h.sched.on_report

    def keep(report: pytest.TestReport, *, emit: bool = True) -> None:
        seen.append(report)  # as the controller's hook hands it on
        on_report(report, emit=emit)

    h.sched.on_report = keep  # type: ignore[method-assign]
    n1, n2 = h.start("gw0", "gw1")
    where: dict[str, str] = {}
    for _ in range(50):
        if h.sched.tests_finished:
            break
        # The fuller worker first: its tests keep it busy.
        node = max((n for n in (n1, n2) if len(n.queue) >= 2), key=lambda n: len(n.queue))
        head = node.queue[0]
        if head == h.barrier:
            h.pass_barrier(node)
            continue
        name = str(h.name(head))
        where[name] = node.gateway.id
        h.run(node, name, "failed" if name in ("c", "d") else "passed")
    failed = {rep.nodeid: rep for rep in seen if rep.when == "call" and rep.failed}
    assert set(failed) == {nodeid("c", "test_n.py"), nodeid("d", "test_n.py")}
    assert where["a"] != where["c"] or where["b"] != where["d"], where  # one split at least
    for dependent, prerequisite in (("c", "a"), ("d", "b")):
        sections = dict(failed[nodeid(dependent, "test_n.py")].sections)
        if where[dependent] == where[prerequisite]:
            assert "dagorder" not in sections
            continue
        said = sections["dagorder"]
        assert said.startswith(
            f"prerequisite {nodeid(prerequisite)} ran on worker {where[prerequisite]}, "
            f"this test on {where[dependent]}: ")
        assert ("--dag-affinity=none" in said) == (affinity == "none")
        # Never advice the test may follow already (one session fixture, ...):
        # under the default, the one way they came apart is a statement or evidence.
        assert "session fixture" not in said
        assert ("dag_shares_nothing" in said) == (affinity == "state")


# ------------------------------------------------------------------ short tests


def recorded(pytester: pytest.Pytester, seconds: float, facts: Facts) -> str:
    """``--dag-durations`` naming a file that records ``seconds`` for each test of ``facts``."""
    path = pytester.path / "durations.json"
    path.write_text(json.dumps(dict.fromkeys(facts.ids, seconds)), encoding="utf-8")
    return f"--dag-durations={path}"


def held(h: Harness, node: FakeNode) -> list[str]:
    """The real tests ``node`` holds, in order."""
    return [str(h.name(i)) for i in node.queue if i != h.barrier]


# Recorded at 30 ms: over FAST_TEST (no batches), under SHORT_TEST.
SHORT = 0.03


def test_short_tests_are_held_while_more_are_ready_than_workers(
    harness: Any, pytester: pytest.Pytester
) -> None:
    """One test in flight, a worker would idle a round trip after each short
    test: it is given SHORT_TEST seconds of them, in one send, while more
    are ready than workers."""
    spec = {f"t{k:02d}": "" for k in range(30)}
    spec["t29"] = "t00"  # an edge: the plugin runs it, with barriers
    h: Harness = harness(facts := make_facts(spec), "--dag-affinity=none",
                         recorded(pytester, SHORT, facts))
    n1, n2 = h.start("gw0", "gw1")
    per = math.ceil(SHORT_TEST / SHORT)
    assert [len(held(h, n)) for n in (n1, n2)] == [per, per], h.sends()
    assert [len(n.sends) for n in (n1, n2)] == [1, 1], h.sends()
    h.drain(n1, n2)
    assert len(h.reported) == 30
    # Topped up once half of that is left: each send carries several tests
    # (until no more are ready than workers: one at a time again).
    top_ups = [len(send) - 1 for n in (n1, n2) for send in n.sends[1:]]
    assert len(top_ups) >= 3 and min(top_ups[:3]) >= 2, h.sends()


@pytest.mark.parametrize("seconds", [None, SHORT_TEST], ids=["cold", "long"])
def test_unrecorded_or_long_tests_keep_one_in_flight(
    harness: Any, pytester: pytest.Pytester, seconds: float | None
) -> None:
    """What a test takes is known only from a recording: without one, or for
    tests that take SHORT_TEST, a worker holds one test (and no more)."""
    spec = {f"t{k:02d}": "" for k in range(30)}
    spec["t29"] = "t00"
    facts = make_facts(spec)
    args = [] if seconds is None else [recorded(pytester, seconds, facts)]
    h: Harness = harness(facts, "--dag-affinity=none", *args)
    n1, n2 = h.start("gw0", "gw1")
    assert [len(held(h, n)) for n in (n1, n2)] == [1, 1], h.sends()


def test_short_tests_are_not_held_where_the_longest_path_bounds_the_run(
    harness: Any, pytester: pytest.Pytester
) -> None:
    """A chain longer than the work shared among the workers: its next test,
    once ready, would wait behind what a worker holds at every link."""
    spec = {f"t{k:02d}": "" for k in range(10)}
    spec.update({f"c{k:02d}": (f"c{k - 1:02d}" if k else "") for k in range(20)})
    h: Harness = harness(facts := make_facts(spec), "--dag-affinity=none",
                         recorded(pytester, SHORT, facts))
    n1, n2 = h.start("gw0", "gw1")
    assert [len(held(h, n)) for n in (n1, n2)] == [1, 1], h.sends()


def test_too_few_ready_short_tests_keep_one_in_flight(
    harness: Any, pytester: pytest.Pytester
) -> None:
    """With no more tests ready than workers, a test held behind another could
    be one an idle worker is missing: one in flight."""
    spec = {"a": "", "b": "", "c": "a b"}
    h: Harness = harness(facts := make_facts(spec), "--dag-affinity=none",
                         recorded(pytester, SHORT, facts))
    n1, n2 = h.start("gw0", "gw1")
    assert (held(h, n1), held(h, n2)) == (["a"], ["b"]), h.sends()


def test_a_short_test_is_not_topped_up_with_a_long_one_ahead_of_its_dependent(
    harness: Any, pytester: pytest.Pytester
) -> None:
    """Topped up behind a short test, a worker takes only tests recorded as
    short: a long one held there would keep the dependent the short test
    releases (here the most urgent test of the run) waiting its whole
    duration, where leaving it out costs the worker one round trip
    (shapepy's zero-second test_end before its 113 s test_xor)."""
    spec = {"end": "", "next": "end", **{f"l{k:02d}": "" for k in range(12)}}
    facts = make_facts(spec)
    seconds = {"end": 0.001, "next": 5.0, **{f"l{k:02d}": 1.0 for k in range(12)}}
    path = pytester.path / "durations.json"
    path.write_text(json.dumps({nodeid(name): secs for name, secs in seconds.items()}),
                    encoding="utf-8")
    h: Harness = harness(facts, "--dag-affinity=none", f"--dag-durations={path}")
    n1, n2 = h.start("gw0", "gw1")
    assert (held(h, n1), held(h, n2)) == (["end"], ["l00"]), h.sends()
    h.run(n1, "end")
    assert held(h, n1)[0] == "next", h.sends()


def test_short_groups_take_the_next_group_before_the_last_one_ends(
    harness: Any, pytester: pytest.Pytester
) -> None:
    """Each edge keeps its two tests on one worker (a group): a worker holding
    the rest of its group gets its next group in the same send, not a round
    trip after the group's end."""
    spec: dict[str, str] = {}
    for k in range(10):
        spec[f"p{k}"] = ""
        spec[f"e{k}"] = f"p{k}"
    h: Harness = harness(facts := make_facts(spec), recorded(pytester, SHORT, facts))
    n1, n2 = h.start("gw0", "gw1")
    for node in (n1, n2):
        tests = held(h, node)
        assert len({t[1:] for t in tests}) >= 2, h.sends()
        # Each group in its serial order, one group after the other.
        runs = [k for j, k in enumerate(t[1:] for t in tests) if j == 0 or tests[j - 1][1:] != k]
        assert len(runs) == len(set(runs)), h.sends()
        assert all(tests.index(f"p{t[1:]}") < tests.index(t)
                   for t in tests if t[0] == "e" and f"p{t[1:]}" in tests), h.sends()
    h.drain(n1, n2)
    assert len(h.reported) == 20


def test_fast_free_tests_keep_the_next_one_in_flight(
    harness: Any, pytester: pytest.Pytester
) -> None:
    """Fast tests, no groups: a worker running its last test gets the next
    ready one even where an equal share of what is ready rounds to one."""
    spec = {"r": "", **{name: "r" for name in "abcdef"}}
    h: Harness = harness(facts := make_facts(spec), "--dag-affinity=none",
                         recorded(pytester, 0.001, facts))
    n1, n2 = h.start("gw0", "gw1")
    # r and, behind it, the dependent it releases first: one send.
    assert h.sends() == {"gw0": [["r", "a", None]], "gw1": []}
    h.run(n1, "r", duration=0.001)
    assert len(held(h, n1)) == 2, h.sends()
    assert len(held(h, n2)) == 2, h.sends()
    h.drain(n1, n2)
    assert len(h.reported) == 7


def test_a_fenced_ready_test_goes_to_the_idle_worker_once_the_next_is_held_ahead(
        harness: Any) -> None:
    """Every test has a pytest-order ordinal (a fence after each): x, ready but
    fenced behind b, keeps nothing back.  b is handed out ahead behind a, which
    opens the fence, and x goes to the idle worker in the same dispatch."""
    facts = dataclasses.replace(make_facts({"a": "", "b": "a", "x": ""}), ordinals=[1, 1, 1])
    h: Harness = harness(facts, "--dag-affinity=none")
    n1, n2 = h.start("gw0", "gw1")
    assert h.sends() == {"gw0": [["a", None], ["b", None]], "gw1": [["x", None]]}
    h.drain(n1, n2)
    assert len(h.reported) == 3 and not h.recorder.skipped()
