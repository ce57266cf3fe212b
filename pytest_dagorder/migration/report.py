"""One summary line listing the pytest-dependency / pytest-depends names that matched nothing.

Those plugins skip a test whose dependency names no test; a typo then hides
among ordinary skips.  The names are read back from the skip reasons
(:data:`~pytest_dagorder.core.wording.UNKNOWN_TAIL`), so the line is the same
serially and under ``-n`` (where only the reports reach the controller).
"""

from __future__ import annotations

import re
from typing import ClassVar

import pytest

from ..core import wording

_REASON = re.compile(r" depends on (.*)" + re.escape(wording.UNKNOWN_TAIL))
_NAME = re.compile(r"'([^']*)'|\"([^\"]*)\"")


class UnknownNames:
    """Collects the unknown names from skip reports; writes them once at the end."""

    NAME: ClassVar[str] = "dagorder-unknown-names"

    def __init__(self) -> None:
        self.names: dict[str, None] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.skipped or not isinstance(report.longrepr, tuple):
            return
        found = _REASON.search(str(report.longrepr[2]))
        if found is not None:
            for quoted in _NAME.finditer(found.group(1)):
                self.names[quoted.group(1) or quoted.group(2) or ""] = None

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.names:
            terminalreporter.write_line(wording.unknown_names_line(list(self.names)))
