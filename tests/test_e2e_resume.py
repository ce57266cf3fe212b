"""End to end: --lf and --sw with dependencies, serially and under -n 2.

Runs keep pytest's cache (the ``dagtester`` marker's ``cache``), which is
what both options read.
"""

from __future__ import annotations

import shutil

import pytest
from support.dagtester import DagTester

pytestmark = pytest.mark.dagtester(cache=True, timeout=120.0)


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


def test_lf_reruns_a_failed_dependent_with_its_prerequisites(
        dagtester: DagTester) -> None:
    dagtester.modules(test_m=suite(True, False))
    dagtester.run().assert_outcomes(passed=2, failed=1)
    dagtester.modules(test_m=suite(True, True))
    result = dagtester.run("--lf")
    result.assert_outcomes(passed=2)
    assert sorted(dagtester.ran()) == ["a", "b"]


def test_sw_resumes_at_a_failed_dependent_with_its_prerequisites(
        dagtester: DagTester) -> None:
    dagtester.modules(test_m=suite(True, False))
    dagtester.run("--sw").assert_outcomes(passed=2, failed=1)
    dagtester.modules(test_m=suite(True, True))
    result = dagtester.run("--sw")
    no_skip = result.parseoutcomes().get("skipped", 0)
    assert no_skip == 0, result.stdout.str()
    ran = dagtester.ran()
    assert "b" in ran and "a" in ran
    assert ran["a"].end <= ran["b"].start


def cross_file_suite(dagtester: DagTester, *, flaky_passes: bool) -> None:
    """A prerequisite in a file that selections leave out: test_c needs it."""
    dagtester.modules(
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


# --lf is not among them: test_the_ci_recipe_reruns_a_failed_job_from_its_restored_cache
# makes the same two runs of this suite (the failed one, then --lf with the
# fix) and asserts what this test would, and more.
SELECTIONS = [
    ["--ff"],
    ["--sw"],
    ["tests/test_b.py::test_d", "--dag-with-prerequisites"],
    ["-k", "test_d", "--dag-with-prerequisites"],
]
SELECTION_IDS = ["ff", "sw", "node-id", "k"]


@pytest.mark.parametrize("selection", SELECTIONS, ids=SELECTION_IDS)
def test_a_selection_collects_prerequisites_from_files_it_left_out(
        dagtester: DagTester, selection: list[str]) -> None:
    cross_file_suite(dagtester, flaky_passes=False)
    # --ff and --sw read what the run before recorded (under -n, its
    # controller); a node id or -k does not: the run before them leaves the
    # same cache behind serially, without an xdist run of its own.
    before = None if selection[0] in ("--ff", "--sw") else "serial"
    dagtester.run(mode=before).assert_outcomes(passed=2, failed=1, skipped=1)
    cross_file_suite(dagtester, flaky_passes=True)
    result = dagtester.run(*selection)
    result.assert_outcomes(passed=4)
    assert sorted(dagtester.ran()) == ["a", "c", "d", "flaky"]


def test_lf_says_how_many_tests_it_reruns_because_a_prerequisite_blocked_them(
        dagtester: DagTester) -> None:
    cross_file_suite(dagtester, flaky_passes=False)
    first = dagtester.run()
    first.assert_outcomes(passed=2, failed=1, skipped=1)
    assert "--lf:" not in first.stdout.str()
    line = "--lf: also 1 test skipped last time because a prerequisite did not pass"
    # Still failing: the blocked test is re-run (and blocked) again, and said so.
    again = dagtester.run("--lf")
    again.assert_outcomes(passed=2, failed=1, skipped=1)
    assert again.stdout.str().count(line) == 1, again.stdout.str()
    cross_file_suite(dagtester, flaky_passes=True)
    fixed = dagtester.run("--lf")
    fixed.assert_outcomes(passed=4)
    assert sorted(dagtester.ran()) == ["a", "c", "d", "flaky"]
    assert fixed.stdout.str().count(line) == 1, fixed.stdout.str()
    # Everything passed: nothing is left for --lf (it runs every test), and
    # no test is left that a prerequisite blocked.
    last = dagtester.run("--lf")
    last.assert_outcomes(passed=4)
    assert "--lf:" not in last.stdout.str()


def test_the_ci_recipe_reruns_a_failed_job_from_its_restored_cache(
        dagtester: DagTester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """docs/ci.rst, "--lf in CI with a cache": the failed attempt saves
    .pytest_cache, the re-run restores it into a fresh checkout and passes --lf."""
    cross_file_suite(dagtester, flaky_passes=False)
    first = dagtester.run()
    first.assert_outcomes(passed=2, failed=1, skipped=1)
    saved = tmp_path_factory.mktemp("ci-cache") / ".pytest_cache"
    shutil.move(dagtester.path / ".pytest_cache", saved)  # actions/cache/save
    shutil.rmtree(dagtester.path / "tests")  # a fresh checkout, with the fix
    cross_file_suite(dagtester, flaky_passes=True)
    shutil.copytree(saved, dagtester.path / ".pytest_cache")  # actions/cache/restore
    rerun = dagtester.run("--lf")
    rerun.assert_outcomes(passed=4)
    # The failure, the test it blocked, and their prerequisites from both files.
    assert sorted(dagtester.ran()) == ["a", "c", "d", "flaky"]
    rerun.stdout.fnmatch_lines([
        "--lf: also 1 test skipped last time because a prerequisite did not pass"])
