"""End to end: --lf and --sw with dependencies, serially and under -n 2.

Runs keep pytest's cache (``base_args(cache=True)``), which is what both
options read.
"""

from __future__ import annotations

import shutil

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


def cross_file_suite(pytester: pytest.Pytester, *, flaky_passes: bool) -> None:
    """A prerequisite in a file that selections leave out: test_c needs it."""
    write_ini(pytester)
    make_modules(
        pytester,
        tests__test_a="""
            def test_a():
                mark("a")
        """,
        tests__test_b=f"""
            def test_flaky():
                mark("flaky")
                assert {flaky_passes}


            @depends_on("tests/test_a.py::test_a")
            def test_c():
                mark("c")


            @depends_on("test_c", "test_flaky")
            def test_d():
                mark("d")
        """,
    )


SELECTIONS = [
    ["--lf"],
    ["--ff"],
    ["--sw"],
    ["tests/test_b.py::test_d", "--dag-with-prerequisites"],
    ["-k", "test_d", "--dag-with-prerequisites"],
]
SELECTION_IDS = ["lf", "ff", "sw", "node-id", "k"]


@pytest.mark.parametrize("mode", MODES, ids=IDS)
@pytest.mark.parametrize("selection", SELECTIONS, ids=SELECTION_IDS)
def test_a_selection_collects_prerequisites_from_files_it_left_out(
        pytester: pytest.Pytester, mode: list[str], selection: list[str]) -> None:
    cross_file_suite(pytester, flaky_passes=False)
    run(pytester, *mode).assert_outcomes(passed=2, failed=1, skipped=1)
    cross_file_suite(pytester, flaky_passes=True)
    result = run(pytester, *mode, *selection)
    result.assert_outcomes(passed=4)
    assert sorted(read_log(pytester)) == ["a", "c", "d", "flaky"]


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_lf_says_how_many_tests_it_reruns_because_a_prerequisite_blocked_them(
        pytester: pytest.Pytester, mode: list[str]) -> None:
    cross_file_suite(pytester, flaky_passes=False)
    first = run(pytester, *mode)
    first.assert_outcomes(passed=2, failed=1, skipped=1)
    assert "--lf:" not in first.stdout.str()
    line = "--lf: also 1 test skipped last time because a prerequisite did not pass"
    # Still failing: the blocked test is re-run (and blocked) again, and said so.
    again = run(pytester, *mode, "--lf")
    again.assert_outcomes(passed=2, failed=1, skipped=1)
    assert again.stdout.str().count(line) == 1, again.stdout.str()
    cross_file_suite(pytester, flaky_passes=True)
    fixed = run(pytester, *mode, "--lf")
    fixed.assert_outcomes(passed=4)
    assert fixed.stdout.str().count(line) == 1, fixed.stdout.str()
    # Everything passed: no test is left that a prerequisite blocked.
    last = run(pytester, *mode, "--lf")
    assert "--lf:" not in last.stdout.str()


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_the_ci_recipe_reruns_a_failed_job_from_its_restored_cache(
        pytester: pytest.Pytester, mode: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """docs/ci.rst, "--lf in CI with a cache": the failed attempt saves
    .pytest_cache, the re-run restores it into a fresh checkout and passes --lf."""
    cross_file_suite(pytester, flaky_passes=False)
    first = run(pytester, *mode)
    first.assert_outcomes(passed=2, failed=1, skipped=1)
    saved = tmp_path_factory.mktemp("ci-cache") / ".pytest_cache"
    shutil.move(pytester.path / ".pytest_cache", saved)  # actions/cache/save
    shutil.rmtree(pytester.path / "tests")  # a fresh checkout, with the fix
    cross_file_suite(pytester, flaky_passes=True)
    shutil.copytree(saved, pytester.path / ".pytest_cache")  # actions/cache/restore
    rerun = run(pytester, *mode, "--lf")
    rerun.assert_outcomes(passed=4)
    # The failure, the test it blocked, and their prerequisites from both files.
    assert sorted(read_log(pytester)) == ["a", "c", "d", "flaky"]
    rerun.stdout.fnmatch_lines([
        "--lf: also 1 test skipped last time because a prerequisite did not pass"])
