"""Folding a test's reports into one outcome, and which reports can be passed over."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dagorder.glue.outcome_tracker import RERUN, OutcomeTracker

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
