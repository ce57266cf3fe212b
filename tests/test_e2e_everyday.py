"""End-to-end tests of everyday pytest around the DAG, serially and under ``-n 2``.

Reruns (pytest-rerunfailures), modules skipped at import, ``-k`` and
``--dag-with-prerequisites`` keeping collection order, rejection of a typo
shared by many tests, names in skip reasons, non-ascii parametrize ids.
"""

from __future__ import annotations

import importlib.util

import pytest
from helpers import base_args, make_modules, write_ini

TIMEOUT = 120.0

#: Each test runs once serially and once under two xdist workers.
MODES = pytest.mark.parametrize("mode", ["serial", "xdist"])


def run(pytester: pytest.Pytester, mode: str, *args: str) -> pytest.RunResult:
    extra = ["-p", "no:xdist"] if mode == "serial" else ["-n", "2"]
    return pytester.runpytest_subprocess(*base_args(), *extra, *args, timeout=TIMEOUT)


def skip_reasons(result: pytest.RunResult) -> list[str]:
    """The reasons of the ``-rs`` lines, sorted."""
    return sorted(line.split(": ", 1)[1] for line in result.outlines
                  if line.startswith("SKIPPED ["))


# -- 1. reruns: only a test's final attempt gates -----------------------------------

needs_rerunfailures = pytest.mark.skipif(
    importlib.util.find_spec("pytest_rerunfailures") is None,
    reason="pytest-rerunfailures is not installed (the test extra has it)")

FLAKY = """
def test_flaky():
    mark("test_flaky")
    # Fails on its first attempt only (the log has no line yet).
    with open(LOG) as f:
        first = sum(1 for line in f if line.startswith("test_flaky ")) == 1
    assert not first


@depends_on("test_flaky")
def test_dependent():
    mark("test_dependent")


@depends_on("test_dependent")
def test_second():
    mark("test_second")


def test_broken():
    mark("test_broken")
    assert 0


@depends_on("test_broken")
def test_blocked():
    mark("test_blocked")
"""


@needs_rerunfailures
@MODES
def test_a_prerequisite_that_passes_on_its_rerun_releases_its_dependents(
    pytester: pytest.Pytester, mode: str
) -> None:
    write_ini(pytester)
    make_modules(pytester, test_flaky=FLAKY)
    result = run(pytester, mode, "-p", "rerunfailures", "--reruns", "1", "-rs")
    # test_flaky and test_broken each rerun once; only test_broken fails again.
    assert result.parseoutcomes() == {"passed": 3, "failed": 1, "skipped": 1, "rerun": 2}
    assert skip_reasons(result) == ["prerequisite test_broken failed"]
    result.stdout.fnmatch_lines(["*test_flaky.py::test_broken failed: blocked 1 test"])
    assert "test_flaky failed" not in result.stdout.str()
