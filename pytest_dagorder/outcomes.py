"""From pytest reports to one outcome word per test, as the scheduler core takes it."""

from __future__ import annotations

from collections.abc import Hashable

import pytest

# A phase's outcome, worst first: the first phase that did not pass decides.
_DEFAULT = "passed"


def phase_outcome(report: pytest.TestReport) -> str:
    """The outcome word one report contributes ("passed" if it does not spoil the test)."""
    if report.passed:
        return "passed"
    if str(report.when) == "???":  # xdist's report for a test that crashed its worker
        return "crashed"
    xfail = hasattr(report, "wasxfail")
    if report.skipped:
        return "xfailed" if xfail else "skipped"
    if report.when == "call":
        return "failed"
    return "error"


class OutcomeTracker:
    """Folds the setup, call and teardown reports of each test into one outcome.

    A test counts as passed only if every phase passed (an XPASS that pytest
    reports as passed counts as passed).  ``feed`` returns the final word
    once the teardown report (or a crash report) arrives.
    """

    def __init__(self) -> None:
        self._partial: dict[Hashable, str] = {}

    def feed(self, report: pytest.TestReport, key: Hashable = None) -> str | None:
        """``key`` tells tests apart whose node ids repeat (default: the node id)."""
        key = report.nodeid if key is None else key
        word = phase_outcome(report)
        current = self._partial.get(key, _DEFAULT)
        if current == _DEFAULT:
            current = word
        if str(report.when) in ("teardown", "???"):
            self._partial.pop(key, None)
            return current
        self._partial[key] = current
        return None
