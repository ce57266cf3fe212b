"""End to end: --lf and --sw with dependencies, serially and under -n 2.

Runs keep pytest's cache (``base_args(cache=True)``), which is what both
options read.
"""

from __future__ import annotations

import pytest
from helpers import LOG_NAME, base_args, make_modules, read_log, runpytest, write_ini

TIMEOUT = 120.0
MODES = [["-p", "no:xdist"], ["-n", "2"]]
IDS = ["serial", "xdist"]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    (pytester.path / LOG_NAME).unlink(missing_ok=True)
    return runpytest(pytester, *base_args(cache=True), *args, timeout=TIMEOUT)


def suite(a_passes: bool, b_passes: bool) -> str:
    return f"""
        def test_a():
            mark("a")
            assert {a_passes}


        def test_x():
            mark("x")


        @depends_on("test_a")
        def test_b():
            mark("b")
            assert {b_passes}
    """


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_lf_reruns_a_failed_dependent_with_its_prerequisites(
        pytester: pytest.Pytester, mode: list[str]) -> None:
    write_ini(pytester)
    make_modules(pytester, test_m=suite(True, False))
    run(pytester, *mode).assert_outcomes(passed=2, failed=1)
    make_modules(pytester, test_m=suite(True, True))
    result = run(pytester, *mode, "--lf")
    result.assert_outcomes(passed=2)
    assert sorted(read_log(pytester)) == ["a", "b"]


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_lf_reruns_the_tests_a_failure_blocked_once_it_is_fixed(
        pytester: pytest.Pytester, mode: list[str]) -> None:
    write_ini(pytester)
    make_modules(pytester, test_m=suite(False, True))
    run(pytester, *mode).assert_outcomes(passed=1, failed=1, skipped=1)
    # Still failing: the blocked dependent is not forgotten by --lf.
    run(pytester, *mode, "--lf").assert_outcomes(failed=1, skipped=1)
    make_modules(pytester, test_m=suite(True, True))
    result = run(pytester, *mode, "--lf")
    result.assert_outcomes(passed=2)
    assert sorted(read_log(pytester)) == ["a", "b"]
    # Everything passed: nothing is left for --lf.
    run(pytester, *mode, "--lf").assert_outcomes(passed=3)


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_sw_resumes_at_a_failed_dependent_with_its_prerequisites(
        pytester: pytest.Pytester, mode: list[str]) -> None:
    write_ini(pytester)
    make_modules(pytester, test_m=suite(True, False))
    run(pytester, *mode, "--sw").assert_outcomes(passed=2, failed=1)
    make_modules(pytester, test_m=suite(True, True))
    result = run(pytester, *mode, "--sw")
    no_skip = result.parseoutcomes().get("skipped", 0)
    assert no_skip == 0, result.stdout.str()
    ran = read_log(pytester)
    assert "b" in ran and "a" in ran
    assert ran["a"].end <= ran["b"].start
