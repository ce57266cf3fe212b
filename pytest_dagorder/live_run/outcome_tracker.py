"""From pytest reports to one outcome word per test, as the scheduler core takes it."""

from __future__ import annotations

from collections.abc import Hashable

import pytest

# A phase's outcome, worst first: the first phase that did not pass decides.
_DEFAULT = "passed"
#: The outcome pytest-rerunfailures gives the report of an attempt it will rerun.
RERUN = "rerun"
#: The longest cause a dependent's skip reason quotes (see failure_cause).
CAUSE_WIDTH = 72
#: The prefix of ``pytest.fail()``'s message: "failed" says it already.
_FAILED_PREFIX = "Failed: "


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


def failure_cause(report: pytest.TestReport) -> str:
    """What ended a failed phase, short and plain: the first line of its crash
    message (``assert 0``, ``KeyError: 'x'``, pytest-timeout's ``Timeout (>1.0s)
    from pytest-timeout``), or "" where the report has none."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    if not isinstance(message, str):
        return ""
    line = message.strip().split("\n", 1)[0].strip()
    line = line.removeprefix(_FAILED_PREFIX).rstrip(".").strip()
    if len(line) > CAUSE_WIDTH:
        line = line[:CAUSE_WIDTH - 3].rstrip() + "..."
    return line


class OutcomeTracker:
    """Folds the setup, call and teardown reports of each test into one outcome.

    A test counts as passed only if every phase passed (an XPASS that pytest
    reports as passed counts as passed).  ``feed`` returns the final word
    once the teardown report (or a crash report) arrives.

    Only a test's final attempt gates.  A plugin that reruns a test through
    pytest's protocol (pytest-rerunfailures) reports the discarded attempt's
    failing phase with the outcome ``"rerun"`` and then runs setup, call and
    teardown again.  The rest of a discarded attempt (pytest-rerunfailures
    still logs its teardown, passed) is ignored, and a setup report starts
    the fold afresh.

    ``cause``: once ``feed`` returned a word, what ended that test if it
    failed or had an error (:func:`failure_cause` of the deciding phase), else "".
    """

    def __init__(self) -> None:
        self._partial: dict[Hashable, str] = {}
        self._causes: dict[Hashable, str] = {}
        self._discarding: set[Hashable] = set()
        self.cause = ""

    def inert(self, report: pytest.TestReport) -> bool:
        """Whether :meth:`feed` would neither change anything nor settle a test.

        True for most reports: a passed call, and a passed setup while no
        test is part-way through a failing or discarded attempt.  Drivers
        skip such reports without finding which test they are about.
        """
        if report.outcome != "passed":
            return False
        when = report.when
        return when == "call" or (when == "setup" and not self._partial
                                  and not self._discarding)

    def feed(self, report: pytest.TestReport, key: Hashable = None) -> str | None:
        """``key`` tells tests apart whose node ids repeat (default: the node id)."""
        key = report.nodeid if key is None else key
        when = str(report.when)
        if report.outcome == RERUN:
            self._partial.pop(key, None)
            self._causes.pop(key, None)
            self._discarding.add(key)
            return None
        if when == "setup":
            self._partial.pop(key, None)
            self._causes.pop(key, None)
            self._discarding.discard(key)
        elif key in self._discarding and when != "???":
            return None
        # Only a phase that did not pass is kept: most tests pass every phase,
        # and cost a lookup per report then, no store.
        # (report.outcome, not the property report.passed: one call fewer per report)
        word = "passed" if report.outcome == "passed" else phase_outcome(report)
        if when in ("teardown", "???"):
            self._discarding.discard(key)
            first = self._partial.pop(key, None)
            if first is not None:
                self.cause = self._causes.pop(key, "")
                return first
            self.cause = failure_cause(report) if word in ("failed", "error") else ""
            return word
        if word != _DEFAULT and key not in self._partial:
            self._partial[key] = word
            if word in ("failed", "error"):
                self._causes[key] = failure_cause(report)
        return None
