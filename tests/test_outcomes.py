"""Folding a test's reports into one outcome, and which reports can be passed over."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dagorder.live_run.outcome_tracker import CAUSE_WIDTH, RERUN, OutcomeTracker

PHASES = ("setup", "call", "teardown")
OUTCOMES = ("passed", "failed", "skipped", RERUN)


def report(key: int, when: str, outcome: str) -> pytest.TestReport:
    longrepr = None if outcome == "passed" else ("f.py", 1, "why")
    return pytest.TestReport(f"t.py::test_{key}", ("t.py", 0, f"test_{key}"), {},
                             outcome, longrepr, when)  # type: ignore[arg-type]


def test_passed_phases_are_inert_until_an_attempt_goes_wrong() -> None:
    t = OutcomeTracker()
    assert t.inert(report(0, "setup", "passed")) and t.inert(report(0, "call", "passed"))
    assert not t.inert(report(0, "teardown", "passed"))  # settles the test
    assert not t.inert(report(0, "call", "failed"))
    t.feed(report(0, "call", "failed"), 0)
    # Test 0 is part-way: a setup (of any test) might start its fold afresh.
    assert not t.inert(report(1, "setup", "passed"))
    assert t.inert(report(1, "call", "passed"))
    assert t.feed(report(0, "teardown", "passed"), 0) == "failed"
    assert t.inert(report(1, "setup", "passed"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(PHASES),
                          st.sampled_from(OUTCOMES)), max_size=40))
def test_passing_over_inert_reports_folds_the_same(
        events: list[tuple[int, str, str]]) -> None:
    every, some = OutcomeTracker(), OutcomeTracker()
    for key, when, outcome in events:
        rep = report(key, when, outcome)
        skip = some.inert(rep)
        got = every.feed(rep, key)
        if skip:
            assert got is None
        else:
            assert some.feed(rep, key) == got


def failing(key: int, when: str, message: str) -> pytest.TestReport:
    """A failed phase whose crash message (pytest's ``longrepr.reprcrash``) is ``message``."""
    longrepr = SimpleNamespace(reprcrash=SimpleNamespace(message=message))
    return pytest.TestReport(f"t.py::test_{key}", ("t.py", 0, f"test_{key}"), {},
                             "failed", longrepr, when)  # type: ignore[arg-type]


def test_the_cause_is_the_deciding_phases_first_line_shortened() -> None:
    t = OutcomeTracker()
    t.feed(failing(0, "setup", "ValueError: no database\nmore detail"), 0)
    assert t.feed(failing(0, "teardown", "RuntimeError: later"), 0) == "error"
    assert t.cause == "ValueError: no database"
    t.feed(failing(1, "call", "Failed: Timeout (>1.0s) from pytest-timeout."), 1)
    assert t.feed(report(1, "teardown", "passed"), 1) == "failed"
    assert t.cause == "Timeout (>1.0s) from pytest-timeout"
    assert t.feed(failing(2, "teardown", "x" * 100), 2) == "error"
    assert t.cause == "x" * (CAUSE_WIDTH - 3) + "..."
    assert t.feed(report(3, "teardown", "passed"), 3) == "passed"
    assert t.cause == ""
    # No crash message (a plain longrepr): nothing to quote.
    t.feed(report(4, "call", "failed"), 4)
    assert t.feed(report(4, "teardown", "passed"), 4) == "failed"
    assert t.cause == ""
