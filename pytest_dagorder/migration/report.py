"""One summary line listing the pytest-dependency / pytest-depends names that matched nothing.

Those plugins skip a test whose dependency names no test; a typo then hides
among ordinary skips.  The names are read back from the skip reasons
(:data:`~pytest_dagorder.declaring.foreign_wording.UNKNOWN_TAIL`), so the line is the same
serially and under ``-n`` (where only the reports reach the controller).
"""

from __future__ import annotations

import re
from typing import ClassVar

import pytest

from ..declaring import foreign_wording as wording

_REASON = re.compile(r" depends on (.*)" + re.escape(wording.UNKNOWN_TAIL))
_NAME = re.compile(r"'([^']*)'|\"([^\"]*)\"")


class UnknownNames:
    """Collects the unknown names from skip reports; writes them once at the end."""

    NAME: ClassVar[str] = "dagorder-unknown-names"

    def __init__(self) -> None:
        # Each name with where it was first named: (file, line, position in
        # the reason).  Under -n reports arrive in any order; sorting on this
        # lists the names in the order of the tests that name them.
        self.names: dict[str, tuple[str, int, int]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.skipped or not isinstance(report.longrepr, tuple):
            return
        found = _REASON.search(str(report.longrepr[2]))
        if found is None:
            return
        path, line, _ = report.location
        for k, quoted in enumerate(_NAME.finditer(found.group(1))):
            where = (str(path), line if line is not None else -1, k)
            name = quoted.group(1) or quoted.group(2) or ""
            self.names[name] = min(self.names.get(name, where), where)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.names:
            ordered = sorted(self.names, key=self.names.__getitem__)
            terminalreporter.write_line(wording.unknown_names_line(ordered))
