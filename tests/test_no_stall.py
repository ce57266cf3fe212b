"""No stall: a worker never holds a report while it waits, and never waits with a test unrun.

Two guarantees, each checked where it is made (docs/how-it-works.rst,
"Reports are never held"):

* A worker sends each report the moment pytest makes it: nothing between
  xdist's worker and its channel holds events back.  The end-to-end test
  makes a test's teardown wait (bounded) until the controller has shown
  that test's call report; a worker that held a passed call report until
  the teardown ended (as the removed batching did) fails it.
* The controller never sends a worker a real test without the index that
  lets the worker run it (the barrier, or on the plain path the next test
  or the shutdown), and after the start it never blocks on a worker.  The
  adapter tests drive the suite the stall was reported on (a chain of
  three and a ``dag_exclusive`` test, three workers) through fake nodes
  that run only what they hold.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from support.dagtester import DagTester
from support.xdist_fakes import FakeChannel, Harness, Recorder, make_config, make_facts

TIMEOUT = 120.0

# The controller notes every call report it shows; a test's teardown waits
# (at most WAIT seconds) for its own note.  Both sides find the notes folder
# next to the conftest.
CONFTEST = """
import os
import time

import pytest

NOTES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "notes")
WAIT = 30.0


def pytest_configure(config):
    os.makedirs(NOTES, exist_ok=True)


def pytest_runtest_logreport(report):
    if "PYTEST_XDIST_WORKER" not in os.environ and report.when == "call":
        open(os.path.join(NOTES, report.nodeid.rsplit("::", 1)[-1]), "w").close()


@pytest.fixture(autouse=True)
def shown_before_teardown_ends(request):
    yield
    note = os.path.join(NOTES, request.node.name)
    deadline = time.monotonic() + WAIT
    while not os.path.exists(note):
        if time.monotonic() > deadline:
            pytest.fail(f"the controller had not shown the call report of "
                        f"{request.node.name} {WAIT} s into its teardown")
        time.sleep(0.01)
"""

DECLARED = """
import pytest
from pytest_dagorder import depends_on


def test_a():
    pass


@depends_on("test_a")
def test_b():
    pass


@depends_on("test_b")
def test_c():
    pass


@pytest.mark.dag_exclusive
def test_alone():
    pass
"""

NOTHING_DECLARED = """
def test_one():
    pass


def test_two():
    pass


def test_three():
    pass
"""


@pytest.mark.dag_modes("xdist")
@pytest.mark.parametrize("suite", [DECLARED, NOTHING_DECLARED], ids=["barriers", "plain"])
def test_a_passed_report_reaches_the_controller_before_the_teardown_ends(
        dagtester: DagTester, suite: str) -> None:
    dagtester.ini("markers =\n    dag_exclusive: x\n")
    dagtester.pytester.makeconftest(CONFTEST)
    dagtester.pytester.makepyfile(test_suite=suite)
    result = dagtester.run(timeout=TIMEOUT)
    result.assert_outcomes(passed=suite.count("def test_"))


# -- the controller's side, with fake nodes -------------------------------------------

CHAIN_AND_ALONE = {"a": "", "b": "a", "c": "b", "alone": ""}


class CountingChannel(FakeChannel):
    """Records the receives that may wait once a test was sent: none may."""

    def __init__(self, harness: list[Harness], payload: Any) -> None:
        super().__init__(payload)
        self._harness = harness
        self.waits_after_start: list[float | None] = []

    def receive(self, timeout: float | None = None) -> str:
        if self._harness and self._harness[0].journal and timeout != 0:
            self.waits_after_start.append(timeout)
        return super().receive(timeout)


@pytest.mark.parametrize("pace", ["slow", "fast"])
def test_the_reported_suite_never_leaves_a_worker_waiting_with_a_test(
        pytester: pytest.Pytester, pace: str) -> None:
    recorder = Recorder()
    payload = dataclasses.replace(
        make_facts(CHAIN_AND_ALONE), resources=[[] for _ in CHAIN_AND_ALONE],
        exclusive=[name == "alone" for name in CHAIN_AND_ALONE])
    # The chain as one group (the affinity the stall was reported under).
    config = make_config(pytester, recorder, "--dag-affinity=module", nodes=3)
    holder: list[Harness] = []
    h = Harness(config, recorder, payload)
    holder.append(h)
    if pace == "fast":
        # As with durations recorded by an earlier run: several tests a send.
        h.sched.pace.average = 0.001
    channels = [CountingChannel(holder, payload) for _ in range(3)]
    nodes = [h.add(f"gw{k}", channel=channels[k]) for k in range(3)]
    h.schedule()
    # A node runs its head only while a next index is behind it (the lookahead),
    # and the harness checks after every event that no queue ends with a real
    # test: every test runs on what its worker was sent, and the run ends.
    duration = 0.001 if pace == "fast" else 1.0
    for _ in range(100):
        if h.sched.tests_finished:
            break
        runnable = [n for n in nodes if len(n.queue) >= 2]
        assert runnable, f"a worker waits with a test: {[n.queue for n in nodes]}"
        h.step(runnable[0], duration=duration)
    assert h.sched.tests_finished
    assert h.reported == set(payload.ids)
    if pace == "fast":
        # The chain went out ahead, several tests a send, as with short tests.
        assert any(len(send) > 2 for sends in h.sends().values() for send in sends)
    # Once a test is out the controller only drains its side channels
    # (timeout 0): it never waits for a worker while tests run.
    assert [c.waits_after_start for c in channels] == [[], [], []]
