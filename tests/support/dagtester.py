"""``dagtester``: pytester with what every end-to-end test of this plugin sets up.

Layered as pytest-randomly's ``ourtester``: the ini (:func:`helpers.write_ini`)
is written before the test starts, modules get the logging prelude
(:func:`helpers.make_modules`), and :meth:`DagTester.run` adds the options
every inner run takes (:func:`helpers.base_args`), those of the module or
test (the ``dagtester`` marker) and those of the mode the test is
parametrized over: ``serial`` (``-p no:xdist``) or ``xdist`` (``-n 2``).
A test runs in both modes unless marked ``@pytest.mark.dag_modes("serial")``
(or ``"xdist"``, ``"xdist4"`` (``-n 4``), or ``"own"``: the test gives
``-n`` or ``-p no:xdist`` itself, or neither: xdist loaded but not asked for).

The ``dagtester`` marker (on a module, class or test; the closest wins per
keyword) sets up what every run of the test shares: ``ini`` (lines added to
the ini; None: no ini file), ``args`` (options of every run), ``xdist`` (the
options of the ``xdist`` mode instead of ``-n 2``), ``cache`` (pytest's cache
on) and ``timeout``.  A test that needs another ini part-way calls
:meth:`DagTester.ini`.  Each run starts a fresh log of the test bodies
that ran (:meth:`DagTester.ran`) unless it is told to keep it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import (
    JUNIT_NAME,
    LOG_NAME,
    Ran,
    base_args,
    make_modules,
    read_junit,
    read_log,
    runpytest,
    write_ini,
)

#: The modes a test requesting ``dagtester`` runs in, unless marked otherwise.
MODES = ("serial", "xdist")
#: Options per mode.
MODE_ARGS: dict[str, tuple[str, ...]] = {
    "serial": ("-p", "no:xdist"), "xdist": ("-n", "2"), "xdist4": ("-n", "4"), "own": ()}
#: The marker naming the modes, and the one setting a test's runs up.
DAG_MODES = "dag_modes"
SETUP = "dagtester"
#: The keywords of the ``dagtester`` marker.
SETUP_KEYWORDS = ("ini", "args", "xdist", "cache", "timeout")


def setup_of(node: pytest.Item) -> dict[str, Any]:
    """The ``dagtester`` marker's keywords for ``node``: the closest marker wins per keyword."""
    found: dict[str, Any] = {}
    for marker in node.iter_markers(SETUP):
        unknown = set(marker.kwargs) - set(SETUP_KEYWORDS)
        assert not unknown and not marker.args, f"dagtester marker: {marker}"
        for key, value in marker.kwargs.items():
            found.setdefault(key, value)
    return found


class DagTester:
    def __init__(self, pytester: pytest.Pytester, mode: str, *, ini: str | None = "",
                 args: tuple[str, ...] = (), xdist: tuple[str, ...] = (), cache: bool = False,
                 timeout: float = 180.0) -> None:
        self.pytester = pytester
        self.mode = mode
        self.args = tuple(args)
        self.mode_args = tuple(xdist) if mode == "xdist" and xdist else MODE_ARGS[mode]
        self.cache = cache
        self.timeout = timeout
        #: Why every run of this test needs a process of its own ("": none do).
        self.own_process = ""
        if ini is not None:
            self.ini(ini)

    @property
    def path(self) -> Path:
        return self.pytester.path

    @property
    def xdist(self) -> bool:
        """Whether runs in this mode start xdist workers."""
        return self.mode.startswith("xdist")

    def ini(self, extra: str = "") -> None:
        """(Re)write the ini: warnings are errors, plus ``extra`` lines."""
        write_ini(self.pytester, extra)

    def modules(self, **modules: str) -> None:
        make_modules(self.pytester, **modules)

    def run(self, *args: str, timeout: float | None = None, own_process: str = "",
            cache: bool | None = None, keep_log: bool = False,
            mode: str | None = None) -> pytest.RunResult:
        """An inner run in this test's mode, or in ``mode`` (``helpers.runpytest``);
        :meth:`ran` then tells what ran in this run only, unless ``keep_log``."""
        if not keep_log:
            (self.path / LOG_NAME).unlink(missing_ok=True)
        cache = self.cache if cache is None else cache
        mode_args = self.mode_args if mode is None else MODE_ARGS[mode]
        return runpytest(self.pytester, *base_args(cache=cache), *mode_args, *self.args,
                         *args, timeout=self.timeout if timeout is None else timeout,
                         own_process=own_process or self.own_process)

    def ran(self) -> dict[str, Ran]:
        """The test bodies that ran (``helpers.read_log``)."""
        return read_log(self.pytester)

    def outcomes(self, name: str = JUNIT_NAME) -> dict[str, tuple[str, str]]:
        """(outcome, message) by ``helpers.junit_key`` from the JUnit XML file
        of a run given ``--junitxml=<name>``."""
        cases, _ = read_junit(self.path / name)
        return {k: (c.outcome, c.message) for k, c in cases.items()}
