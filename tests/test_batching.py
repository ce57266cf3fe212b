"""A worker's events in batches (batching.py): what the controller's xdist sees.

The unit tests drive :class:`EventBatcher` as xdist's worker would and
hand what it sends to :func:`unbatching` as the controller's receiver
thread would: the controller must see exactly the events, in exactly the
order, xdist sent.  The end-to-end tests check real runs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import base_args
from hypothesis import given
from hypothesis import strategies as st

from pytest_dagorder.batching import BATCH_EVENT, BATCH_KEY, EventBatcher, batch_events, unbatching

Event = tuple[str, dict[str, Any]]


class Wire:
    """The connection: what the worker side sent, and what the controller's xdist got."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.seen: list[Event] = []
        self.receive = unbatching(self.seen.append)

    def inner(self, name: str, **kwargs: Any) -> None:  # xdist's own sendevent
        self.send((name, kwargs))

    def send(self, message: object) -> None:
        self.messages.append(message)
        self.receive(message)


def report(when: str, outcome: str = "passed") -> Event:
    return ("testreport", {"data": {"when": when, "outcome": outcome}})


def passing_test(index: int) -> list[Event]:
    return [
        ("logstart", {"nodeid": f"t{index}", "location": ("m.py", index, f"t{index}")}),
        report("setup"), report("call"), report("teardown"),
        ("logfinish", {"nodeid": f"t{index}", "location": ("m.py", index, f"t{index}")}),
        ("runtest_protocol_complete", {"item_index": index, "duration": 0.001}),
    ]


def play(events: list[Event]) -> Wire:
    wire = Wire()
    batcher = EventBatcher(wire.inner, wire.send)
    for name, kwargs in events:
        batcher.sendevent(name, **kwargs)
    batcher.close()
    return wire


def test_a_passing_test_takes_three_messages_its_start_and_setup_first() -> None:
    events = passing_test(0) + passing_test(1)
    wire = play(events)
    assert wire.seen == events
    assert [m[0] for m in wire.messages] == ["logstart", "testreport", BATCH_EVENT] * 2
    assert len(wire.messages[2][1]) == 4


def test_once_tests_are_short_a_start_waits_for_its_setup() -> None:
    events = [e for i in range(40) for e in passing_test(i)]
    wire = play(events)
    assert wire.seen == events
    # Short tests (1 ms each): after a couple of dozen, two messages a test.
    assert [m[0] for m in wire.messages[-4:]] == [BATCH_EVENT] * 4
    assert [e[0] for e in wire.messages[-2][1]] == ["logstart", "testreport"]
    # A long test makes the next start go at once again.
    slow = passing_test(40)
    slow[-1] = ("runtest_protocol_complete", {"item_index": 40, "duration": 30.0})
    more = events + slow + passing_test(41)
    wire = play(more)
    assert wire.seen == more
    assert [m[0] for m in wire.messages[-3:]] == ["logstart", "testreport", BATCH_EVENT]


def test_a_report_that_did_not_pass_goes_at_once_with_what_it_follows() -> None:
    wire = Wire()
    batcher = EventBatcher(wire.inner, wire.send)
    events = passing_test(0)
    events[3] = report("teardown", "failed")
    for name, kwargs in events[:3]:
        batcher.sendevent(name, **kwargs)
    assert wire.seen == events[:2]  # the passed call waits for the teardown
    batcher.sendevent(*events[3][:1], **events[3][1])
    assert wire.seen == events[:4]  # which did not pass: both go now
    for name, kwargs in events[4:]:
        batcher.sendevent(name, **kwargs)
    assert wire.seen == events


def test_a_failed_call_goes_alone_and_other_events_keep_their_place() -> None:
    start, setup, _, teardown, finish, end = passing_test(0)
    warning = ("warning_recorded", {"warning_message_data": {}, "when": "runtest",
                                    "nodeid": "t0", "location": None})
    failed = report("call", "failed")
    events = [start, setup, failed, teardown, warning, finish, end,
              ("workerfinished", {"workeroutput": {}})]
    wire = play(events)
    assert wire.seen == events
    assert wire.messages[:3] == events[:3]  # nothing held before: sent as xdist would
    assert wire.messages[3] == (BATCH_EVENT, (teardown, warning))


def test_close_sends_what_is_held_and_holds_nothing_after() -> None:
    wire = Wire()
    batcher = EventBatcher(wire.inner, wire.send)
    events = passing_test(0)
    for name, kwargs in events[:3]:
        batcher.sendevent(name, **kwargs)
    assert wire.seen == events[:2]
    batcher.close()
    assert wire.seen == events[:3]
    batcher.sendevent(*events[3][:1], **events[3][1])
    assert wire.seen == events[:4]


EVENT_NAMES = ["logstart", "testreport", "logfinish", "runtest_protocol_complete",
               "warning_recorded", "collectreport", "workerfinished"]


@given(st.lists(st.tuples(st.sampled_from(EVENT_NAMES),
                          st.sampled_from(["setup", "call", "teardown"]),
                          st.sampled_from(["passed", "failed", "skipped", "rerun"]),
                          st.sampled_from([0.0, 0.001, 1.0])),
                max_size=60))
def test_the_controller_sees_every_event_in_order(
        spec: list[tuple[str, str, str, float]]) -> None:
    events: list[Event] = [
        (name, {"data": {"when": when, "outcome": outcome}, "k": k}) if name == "testreport"
        else (name, {"k": k, "duration": duration}) if name == "runtest_protocol_complete"
        else (name, {"k": k})
        for k, (name, when, outcome, duration) in enumerate(spec)]
    wire = play(events)
    assert wire.seen == events
    # Nothing sent is an empty batch, and no more messages than events.
    assert len(wire.messages) <= len(events)
    assert all(len(m[1]) > 1 for m in wire.messages if m[0] == BATCH_EVENT)


def test_unbatching_passes_everything_else_through() -> None:
    seen: list[object] = []
    receive = unbatching(seen.append)
    end = object()  # xdist's end-of-channel marker
    receive(end)
    receive(("logstart", {}))
    assert seen == [end, ("logstart", {})]


class FakeInteractor:
    def __init__(self) -> None:
        self.channel = self
        self.sent: list[object] = []

    def send(self, message: object) -> None:
        self.sent.append(message)

    def sendevent(self, name: str, **kwargs: Any) -> None:
        self.send((name, kwargs))


FakeInteractor.__name__ = "WorkerInteractor"


class FakeConfig:
    def __init__(self, workerinput: dict[str, object], plugins: list[object]) -> None:
        self.workerinput = workerinput
        self.pluginmanager = self
        self._plugins = plugins

    def get_plugins(self) -> list[object]:
        return self._plugins


def test_a_worker_batches_only_when_the_controller_unpacks() -> None:
    interactor = FakeInteractor()
    assert batch_events(FakeConfig({}, [interactor])) is None  # type: ignore[arg-type]
    assert batch_events(FakeConfig({BATCH_KEY: True}, [object()])) is None  # type: ignore[arg-type]
    batcher = batch_events(FakeConfig({BATCH_KEY: True}, [object(), interactor]))  # type: ignore[arg-type]
    assert batcher is not None
    for name, kwargs in passing_test(0):
        interactor.sendevent(name, **kwargs)
    assert [m[0] for m in interactor.sent] == [  # type: ignore[index]
        "logstart", "testreport", BATCH_EVENT]


# -- end to end ------------------------------------------------------------------------

# On the controller: count the messages each worker's connection carries, and
# when the controller learnt of the slow test's start and of its end.
COUNTING_CONFTEST = """
import json
import os
import time

import pytest

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seen.json")
SEEN = {"messages": {}, "events": {}, "times": {}}


@pytest.hookimpl(trylast=True, optionalhook=True)
def pytest_configure_node(node):
    process = node.process_from_remote

    def counting(eventcall):
        if isinstance(eventcall, tuple):
            SEEN["messages"][eventcall[0]] = SEEN["messages"].get(eventcall[0], 0) + 1
        process(eventcall)

    node.process_from_remote = counting


def pytest_runtest_logstart(nodeid):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        SEEN["times"].setdefault(nodeid + " start", time.time())
        SEEN["events"]["logstart"] = SEEN["events"].get("logstart", 0) + 1


def pytest_runtest_logreport(report):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        SEEN["times"][report.nodeid + " " + report.when] = time.time()
        SEEN["events"]["report"] = SEEN["events"].get("report", 0) + 1


def pytest_unconfigure(config):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        with open(OUT, "w") as f:
            json.dump(SEEN, f)
"""

SUITE = """
import time
import warnings

import pytest

from pytest_dagorder import depends_on


def test_a():
    pass


@depends_on("test_a")
def test_slow():
    time.sleep(1.0)


def test_warns():
    warnings.warn(UserWarning("told"))


def test_fails():
    assert 0


@depends_on("test_fails")
def test_after_failure():
    pass


@pytest.mark.xfail(reason="known")
def test_xfails():
    assert 0


@pytest.mark.parametrize("k", range(20))
def test_many(k):
    pass
"""


def test_a_run_with_batches_reports_as_a_serial_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(COUNTING_CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    serial = pytester.runpytest_subprocess(*base_args(), "-p", "no:xdist", "-rA",
                                           timeout=120)
    parallel = pytester.runpytest_subprocess(*base_args(), "-n", "2", "-rA", timeout=120)
    counts = {"passed": 23, "failed": 1, "skipped": 1, "xfailed": 1, "warnings": 1}
    serial.assert_outcomes(**counts)
    parallel.assert_outcomes(**counts)
    seen = json.loads((pytester.path / "seen.json").read_text())
    # Batches came, and each test's events reached the controller's hooks
    # once: a start and three reports each for the 25 that ran, a start and
    # two (setup skipped, teardown) for the skip the controller made.
    assert seen["messages"].get("dagorder_batch", 0) >= 20
    assert seen["events"] == {"logstart": 26, "report": 25 * 3 + 2}
    # The slow test's start was known while it ran, not held until its end.
    times = seen["times"]
    started = times["test_suite.py::test_slow start"]
    assert times["test_suite.py::test_slow call"] - started > 0.5
    assert "told" in parallel.stdout.str()
    assert "prerequisite test_fails failed" in parallel.stdout.str()


def test_a_crash_still_names_the_test_it_cut_short(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_crash="""
        import os

        def test_first():
            pass

        def test_crash():
            os._exit(3)

        def test_last():
            pass
    """)
    result = pytester.runpytest_subprocess(*base_args(), "-n", "1", "-v", timeout=120)
    result.assert_outcomes(passed=2, failed=1)
    # The start of the test went at once: -v shows it before the crash.
    result.stdout.fnmatch_lines([
        "test_crash.py::test_crash *",
        "*node down*",
        "*FAILED test_crash.py::test_crash*",
    ])
