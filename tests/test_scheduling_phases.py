"""The controller's start-up phases, driven through xdist's scheduler protocol.

Collecting -> PlansRead (the first plan read, the run built) -> Announced
(xdist's first ``schedule()``) -> Running; any of them -> Aborted.  Once
aborted, the session is ending: a late ``schedule()`` (xdist calls it for
every late or replacement worker) reads, sends and reports nothing more.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from support.xdist_fakes import (
    FakeChannel,
    Harness,
    make_facts,
    nodeid,
)

from pytest_dagorder.drivers.distributed import wire
from pytest_dagorder.drivers.distributed.scheduling import (
    NEXT,
    Aborted,
    Announced,
    Collecting,
    PlansRead,
    Running,
)

CHAIN = {"a": "", "b": "a", "c": "b"}



class PhaseAtReport:
    """Records the scheduler's phase whenever a collection error is reported."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.seen: list[type] = []

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self.seen.append(type(self.h.sched.phase))


def late_schedule(h: Harness) -> None:
    """xdist's call for a late worker: once aborted, it must not end the session again."""
    try:
        h.sched.schedule()
    except (pytest.Session.Interrupted, pytest.UsageError) as exc:  # would end this session
        pytest.fail(f"the session was ended again: {exc!r}")


def test_a_run_moves_from_collecting_through_plans_read_and_announced_to_running(
        harness: Any) -> None:
    payload = dataclasses.replace(make_facts(CHAIN),
                                  errors=[(nodeid("x"), "left out: broken")])
    h: Harness = harness(payload)
    watch = PhaseAtReport(h)
    h.config.pluginmanager.register(watch)
    n1, n2 = h.up("gw0"), h.up("gw1")
    assert isinstance(h.sched.phase, Collecting)
    assert h.sched.run is None and h.sched.built is None and h.sched.collection is None
    h.collected(n2)
    phase = h.sched.phase
    assert isinstance(phase, PlansRead) and phase.launch.followed is n2
    assert h.sched.built is not None and h.sched.run is None
    assert h.recorder.collect == [] and h.journal == []  # nothing announced yet
    h.collected(n1)
    assert isinstance(h.sched.phase, PlansRead)
    h.schedule()
    # The tests the worker left out are reported while the run is announced.
    assert watch.seen == [Announced]
    assert isinstance(h.sched.phase, Running) and h.sched.run is phase.launch.run
    h.drain(n1, n2)
    assert isinstance(h.sched.phase, Running) and h.sched.tests_finished
    h.schedule()  # a late call: still running, nothing sent
    assert isinstance(h.sched.phase, Running)


def test_a_worker_gone_while_collecting_keeps_the_phase_and_the_next_one_is_asked(
        harness: Any) -> None:
    h: Harness = harness(make_facts(CHAIN))
    gone = h.add("gw0", channel=FakeChannel(EOFError("gone")))
    assert isinstance(h.sched.phase, Collecting)
    assert h.sched.gone == {gone}
    n2 = h.add("gw1")
    assert h.controller.channels[n2].requests == [wire.PLAN_REQUEST]
    phase = h.sched.phase
    assert isinstance(phase, PlansRead) and phase.launch.followed is n2
    h.schedule()
    assert isinstance(h.sched.phase, Running)
    assert gone.sends == []
    h.drain(n2)
    assert h.terminal() == set(h.ids)


def test_every_worker_gone_while_collecting_aborts_once_at_the_start(harness: Any) -> None:
    h: Harness = harness(make_facts(CHAIN))
    channels = [FakeChannel(EOFError("gone")) for _ in range(2)]
    nodes = [h.add(f"gw{k}", channel=channels[k]) for k in range(2)]
    assert isinstance(h.sched.phase, Collecting) and h.sched.gone == set(nodes)
    with pytest.raises(pytest.Session.Interrupted):
        h.sched.schedule()  # the first to collect is asked once more, and cannot ship
    assert h.sched.phase == Aborted()
    reads = [len(c.timeouts) for c in channels]
    reported = len(h.recorder.collect)
    late_schedule(h)  # the session is ending: nothing read or reported
    assert [len(c.timeouts) for c in channels] == reads
    assert len(h.recorder.collect) == reported


def test_a_plan_with_problems_aborts_with_its_collection(harness: Any) -> None:
    h: Harness = harness(make_facts(CHAIN, problems=[(nodeid("b"), "target 'x' unknown")]))
    n1, n2 = h.up("gw0"), h.up("gw1")
    with pytest.raises(pytest.Session.Interrupted):
        h.collected(n1)
    assert h.sched.phase == Aborted(collection=h.ids)
    assert h.sched.run is None and h.sched.built is None
    # DSession's loop ends once every collection is in.
    assert not h.sched.tests_finished
    h.collected(n2)
    assert h.sched.tests_finished
    late_schedule(h)
    assert n1.sends == n2.sends == [] and len(h.recorder.collect) == 1


def test_a_usage_error_in_the_plan_aborts(harness: Any) -> None:
    h: Harness = harness(dataclasses.replace(make_facts(CHAIN), ordering_failure="bad ordering"))
    n1, n2 = h.up("gw0"), h.up("gw1")
    with pytest.raises(pytest.UsageError, match="bad ordering"):
        h.collected(n1)
    assert h.sched.phase == Aborted(collection=h.ids)
    assert (n1.shutdown_calls, n2.shutdown_calls) == (1, 1)


def test_a_worker_of_another_version_aborts_once(harness: Any) -> None:
    h: Harness = harness(make_facts(CHAIN))
    channel = FakeChannel("not json")
    n1 = h.up("gw0", channel=channel)
    n2 = h.up("gw1")
    with pytest.raises(pytest.UsageError):
        h.collected(n1)
    assert h.sched.phase == Aborted()
    reads = len(channel.timeouts)
    h.collected(n2)  # the session is ending: its plan is not asked for
    late_schedule(h)  # no second read, no second usage error
    assert len(channel.timeouts) == reads
    assert h.controller.channels[n2].timeouts == [] and n2.sends == []


def test_no_worker_left_aborts_keeping_the_run_and_a_late_worker_is_not_read(
        harness: Any) -> None:
    h: Harness = harness(make_facts({"a": "", "b": ""}), "--dag-affinity=none", nodes=1)
    (n1,) = h.start("gw0")
    assert isinstance(h.sched.phase, Running)
    assert h.remove(n1) is not None  # crashed in its first test
    h.add("gw0-2", collection=list(reversed(h.ids)))  # refused: another order
    with pytest.raises(pytest.Session.Interrupted):
        h.sched.schedule()
    phase = h.sched.phase
    assert isinstance(phase, Aborted) and phase.launch is not None
    assert h.sched.run is phase.launch.run  # its summary is still written
    assert h.sched.tests_finished
    reported = len(h.recorder.collect)
    late = h.add("gw0-3")  # a replacement with the run's own tests
    late_schedule(h)  # xdist's call for it: the session is ending
    assert h.controller.channels[late].timeouts == []  # its hello was never awaited
    assert late.sends == [] and len(h.recorder.collect) == reported


def test_a_worker_with_other_tests_joining_a_running_run_is_refused(harness: Any) -> None:
    h: Harness = harness(make_facts(CHAIN), nodes=1)
    (n1,) = h.start("gw0")
    late = h.add("gw1", collection=list(reversed(h.ids)))
    h.sched.schedule()
    assert isinstance(h.sched.phase, Running)
    assert late.sends == [] and len(h.recorder.collect) == 1
    h.drain(n1)
    assert h.terminal() == set(h.ids)


def test_phases_only_move_forward() -> None:
    order = [Collecting, PlansRead, Announced, Running, Aborted]
    for k, phase in enumerate(order):
        assert all(order.index(nxt) > k for nxt in NEXT[phase])
        assert phase is Aborted or Aborted in NEXT[phase]
