"""``dagtester``: pytester with what every end-to-end test of this plugin sets up.

Layered as pytest-randomly's ``ourtester``: the ini (:func:`helpers.write_ini`)
is written before the test starts, modules get the logging prelude
(:func:`helpers.make_modules`), and :meth:`DagTester.run` adds the options
every inner run takes (:func:`helpers.base_args`) and those of the mode the
test is parametrized over: ``serial`` (``-p no:xdist``) or ``xdist``
(``-n 2``).  A test runs in both modes unless marked
``@pytest.mark.dag_modes("serial")`` (or ``"xdist"``, or ``"own"``: the
test gives ``-n`` or ``-p no:xdist`` itself).
"""

from __future__ import annotations

import pytest
from helpers import Ran, base_args, make_modules, read_log, runpytest

#: The modes a test requesting ``dagtester`` runs in, unless marked otherwise.
MODES = ("serial", "xdist")
#: Options per mode.
MODE_ARGS: dict[str, tuple[str, ...]] = {
    "serial": ("-p", "no:xdist"), "xdist": ("-n", "2"), "own": ()}


class DagTester:
    def __init__(self, pytester: pytest.Pytester, mode: str) -> None:
        self.pytester = pytester
        self.mode = mode

    def modules(self, **modules: str) -> None:
        make_modules(self.pytester, **modules)

    def run(self, *args: str, timeout: float = 180.0, own_process: str = "",
            cache: bool = False) -> pytest.RunResult:
        """An inner run in this test's mode (``helpers.runpytest``)."""
        return runpytest(self.pytester, *base_args(cache=cache), *MODE_ARGS[self.mode], *args,
                         timeout=timeout, own_process=own_process)

    def ran(self) -> dict[str, Ran]:
        """The test bodies that ran (``helpers.read_log``)."""
        return read_log(self.pytester)
