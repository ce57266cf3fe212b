"""End to end: ``--dag-explain`` prints, after the run, why tests waited or did not run.

Each line is one test and its moves as the core recorded them (released by,
held for, skipped because), in the run's order; by default only the tests
that did not run or waited, with ``-v`` every test.  Serially and under
``-n 2`` (there from the controller's core).
"""

from __future__ import annotations

import fnmatch
import re

import pytest
from support.dagtester import DagTester

TITLE = "*why tests waited or did not run (pytest-dagorder --dag-explain)*"

CHAIN = {
    "test_m": """
        def test_a():
            mark("test_a")
            assert False


        @depends_on("test_a")
        def test_b():
            mark("test_b")


        @depends_on("test_b")
        def test_c():
            mark("test_c")


        def test_d():
            mark("test_d")
        """,
}


def section(result: pytest.RunResult) -> list[str]:
    """The lines of the explanation, up to the next section."""
    lines = result.stdout.lines
    start = next(k for k, line in enumerate(lines) if "--dag-explain)" in line and "=" in line)
    end = next((k for k in range(start + 1, len(lines)) if lines[k].startswith("=")),
               len(lines))
    return lines[start + 1:end]


def test_the_tests_that_did_not_run_are_explained_in_the_runs_order(
        dagtester: DagTester) -> None:
    dagtester.modules(**CHAIN)
    result = dagtester.run("--dag-explain")
    result.assert_outcomes(passed=1, failed=1, skipped=2)
    result.stdout.fnmatch_lines([
        TITLE,
        # Under -n the worker running test_a may hold test_b and test_c behind it.
        "test_m.py::test_b: *skipped because prerequisite test_a failed (assert False)",
        "test_m.py::test_c: *skipped because prerequisite test_b was skipped: test_a failed "
        "(assert False)",
    ])
    said = section(result)
    assert [line.split(":")[2] for line in said] == ["test_b", "test_c"], said
    assert sum("--dag-explain)" in line for line in result.stdout.lines) == 1  # said once
    assert all(" on gw" not in line or "held on gw" in line for line in said), said
    assert set(dagtester.ran()) == {"test_a", "test_d"}


def test_with_v_every_test_is_explained(dagtester: DagTester) -> None:
    dagtester.modules(**CHAIN)
    result = dagtester.run("--dag-explain", "-v")
    result.assert_outcomes(passed=1, failed=1, skipped=2)
    said = section(result)
    assert [line.split(":")[2] for line in said] == ["test_a", "test_b", "test_c", "test_d"], said
    where = "" if dagtester.mode == "serial" else " on gw?"
    result.stdout.fnmatch_lines([
        TITLE,
        f"test_m.py::test_a: ready at the start (no prerequisite); started{where}; "
        f"failed{where}",
        "test_m.py::test_b: *skipped because prerequisite test_a failed (assert False)",
        "test_m.py::test_c: *skipped because prerequisite test_b was skipped: test_a failed "
        "(assert False)",
        f"test_m.py::test_d: ready at the start (no prerequisite); started{where}; "
        f"passed{where}",
    ])


def test_a_run_with_nothing_to_explain_says_so(dagtester: DagTester) -> None:
    """A chain that passes: under -n its dependent may be held behind its
    prerequisite, which is not worth a line (it starts the soonest it can)."""
    dagtester.modules(test_m="""
        def test_a():
            mark("test_a")


        @depends_on("test_a")
        def test_b():
            mark("test_b")
        """)
    result = dagtester.run("--dag-explain")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([TITLE, "dagorder: no test was skipped, put back or kept "
                                 "waiting for its group's worker"])



@pytest.mark.dag_modes("xdist")
def test_a_test_kept_for_its_groups_worker_says_how_long(dagtester: DagTester) -> None:
    """test_b and test_c (a group with test_a) become ready together on
    test_a's worker, which runs the slow test_b; meanwhile the other worker
    starts free tests, and test_c waits for its group's worker.  Under
    ``--dag-on-failure=run`` no test is held ahead: test_c waits ready."""
    dagtester.modules(test_g="""
        def test_a():
            mark("test_a", sleep=0.3)


        @depends_on("test_a")
        def test_b():
            mark("test_b", sleep=2.0)


        @depends_on("test_a")
        def test_c():
            mark("test_c")
        """, test_free="\n".join(
            f"def test_f{k}():\n    mark('test_f{k}', sleep=0.3)\n\n" for k in range(6)))
    result = dagtester.run("--dag-explain", "--dag-on-failure=run")
    result.assert_outcomes(passed=9)
    result.stdout.fnmatch_lines([
        TITLE,
        "test_g.py::test_c: released by test_a; started on gw? after * started on other "
        "workers (kept for its affinity group's worker); passed on gw?",
    ])
    assert [line.split(":")[2] for line in section(result)] == ["test_c"]


def story(result: pytest.RunResult, test: str) -> list[str]:
    """The story section's lines for ``test``, up to the next section."""
    lines = result.stdout.lines
    start = next(k for k, line in enumerate(lines)
                 if f"the story of {test} (pytest-dagorder --dag-explain)" in line)
    end = next((k for k in range(start + 1, len(lines)) if lines[k].startswith("=")),
               len(lines))
    return lines[start + 1:end]


def test_one_tests_story_tells_its_moves_and_their_causes(dagtester: DagTester) -> None:
    """``--dag-explain=TEST_ID``: what it waits for, what released it, where it
    ran and how it ended; a skipped test's story names the root cause."""
    dagtester.modules(**CHAIN)
    result = dagtester.run("--dag-explain=test_m.py::test_c")
    result.assert_outcomes(passed=1, failed=1, skipped=2)
    told = story(result, "test_m.py::test_c")
    # Under xdist test_c may be sent to its group's worker ahead of test_b's end
    # (whether it is depends on when test_a's report arrives): a move of its own.
    ahead = [line for line in told if " ahead, to start there the moment test_b ends" in line]
    assert len(ahead) <= (1 if dagtester.mode == "xdist" else 0)
    assert [re.sub(r"^  \d+\. ", "  ", line) for line in told if line not in ahead] == [
        "test_m.py::test_c",
        "  declared: test_b must pass first",
        *(["  runs with the group of test_m.py::test_a (3 tests) on one worker, in "
           "serial order"] if dagtester.mode == "xdist" else []),
        "  skipped because prerequisite test_b was skipped: test_a failed (assert False)",
    ]
    assert [line.split(".")[0] for line in told[1:]] == [f"  {k}" for k in range(1, len(told))]
    assert "why tests waited or did not run" not in result.stdout.str()


def test_a_released_tests_story_says_what_released_it_and_where_it_went(
        dagtester: DagTester) -> None:
    """test_b is released by test_a's pass (under --dag-on-failure=run no test
    is held ahead on the worker of its prerequisite, and none shares a worker
    with it: affinity none); under -n it is sent to a worker."""
    dagtester.modules(test_m="""
        def test_a():
            mark("test_a")


        @run_after("test_a")
        def test_b():
            mark("test_b")
        """)
    result = dagtester.run("--dag-explain=test_m.py::test_b", "--dag-on-failure=run",
                           "--dag-affinity=none")
    result.assert_outcomes(passed=2)
    said = story(result, "test_m.py::test_b")
    where = "" if dagtester.mode == "serial" else " on gw?"
    sent = "started" if dagtester.mode == "serial" else "sent to gw?"
    assert said[:3] == ["test_m.py::test_b", "  1. declared: runs after test_a",
                        "  2. ready because test_a passed"], said
    assert len(said) == 5, said
    assert fnmatch.fnmatch(said[3], f"  3. {sent}"), said
    assert fnmatch.fnmatch(said[4], f"  4. passed{where}"), said


def test_an_unknown_test_id_is_a_usage_error_naming_close_ones(dagtester: DagTester) -> None:
    dagtester.modules(**CHAIN)
    result = dagtester.run("--dag-explain=test_m.py::test_cc")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: --dag-explain='test_m.py::test_cc' names no selected test; did you mean "
        "'test_m.py::test_c'*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert dagtester.ran() == {}


@pytest.mark.dag_modes("serial")
def test_a_value_that_is_no_test_id_is_a_usage_error(dagtester: DagTester) -> None:
    dagtester.modules(**CHAIN)
    result = dagtester.run("--dag-explain=test_m.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --dag-explain='test_m.py' is not a test id*"])


@pytest.mark.dag_modes("serial")
def test_the_bare_option_before_a_path_keeps_the_path(dagtester: DagTester) -> None:
    """``pytest --dag-explain test_m.py``: the path is not read as a TEST_ID."""
    dagtester.modules(**CHAIN, test_other="""
        def test_z():
            mark("test_z")
        """)
    result = dagtester.run("--dag-explain", "test_m.py")
    result.assert_outcomes(passed=1, failed=1, skipped=2)
    result.stdout.fnmatch_lines([TITLE])
    assert "test_z" not in dagtester.ran()
