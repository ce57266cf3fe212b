"""From pytest reports to one outcome word per test, as the scheduler core takes it."""

from __future__ import annotations

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
        self._partial: dict[str, str] = {}

    def feed(self, report: pytest.TestReport) -> str | None:
        word = phase_outcome(report)
        current = self._partial.get(report.nodeid, _DEFAULT)
        if current == _DEFAULT:
            current = word
        if str(report.when) in ("teardown", "???"):
            self._partial.pop(report.nodeid, None)
            return current
        self._partial[report.nodeid] = current
        return None
