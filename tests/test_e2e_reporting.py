"""End to end: how failures outside a test's own call reach its dependents and the report.

A module fixture's teardown error under ``-n`` gates
the dependents that start after it on the same worker; a prerequisite's
line comes before the skips it causes; ``pytest.exit()`` in a test ends
the session cleanly.  Serially and under ``-n 2``.
"""

from __future__ import annotations

import pytest
from helpers import make_modules, read_log
from support.dagtester import DagTester

# -- a module fixture's failing teardown -----------------------------------------------

TEARDOWN_ERROR = {
    # Collected first and slow: under -n 2 it keeps one worker busy, so the
    # chain test_last -> test_b runs on the other worker, one after the other.
    "test_a_slow": """
        def test_slow():
            mark("test_slow", sleep=1.0)
        """,
    "test_mod_a": """
        @pytest.fixture(scope="module")
        def res():
            yield 1
            raise RuntimeError("teardown boom")


        def test_first(res):
            mark("test_first")


        def test_last(res):
            mark("test_last-" + os.environ.get("PYTEST_XDIST_WORKER", "serial"))
        """,
    "test_mod_b": """
        @depends_on("test_mod_a.py::test_last")
        def test_b():
            mark("test_b")
        """,
}


def test_a_failing_module_teardown_skips_the_dependents_that_start_after_it(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, **TEARDOWN_ERROR)
    result = dagtester.run("-rs")
    # The teardown error is reported on test_last (under -n, also on any other
    # test that set the fixture up on another worker, or again later).
    outcomes = result.parseoutcomes()
    assert outcomes["skipped"] == 1
    assert outcomes["errors"] >= 1
    result.stdout.fnmatch_lines([
        "*ERROR at teardown of test_last*",
        "SKIPPED [[]1[]] test_mod_b.py:*: prerequisite test_last had an error "
        "(RuntimeError: teardown boom)",
    ])
    assert "test_b" not in read_log(pytester)


# -- a skip's line comes after its cause's line ----------------------------------------

CHAIN = {
    "test_chain": """
        def test_a():
            mark("test_a", sleep=0.3)
            assert False


        @depends_on("test_a")
        def test_b():
            mark("test_b")


        @depends_on("test_b")
        def test_c():
            mark("test_c")


        @depends_on("test_c")
        def test_d():
            mark("test_d")


        def test_free():
            mark("test_free", sleep=0.5)
        """,
    "test_other": """
        @depends_on("test_chain.py::test_a")
        def test_other():
            mark("test_other")
        """,
}

WORDS = ("PASSED", "FAILED", "SKIPPED", "ERROR")


def outcome_line(result: pytest.RunResult, name: str) -> int:
    """Where ``name``'s outcome line is in -v output (serial and xdist spell it differently)."""
    for k, line in enumerate(result.outlines):
        if f"::{name} " in line + " " and any(word in line.split() for word in WORDS):
            return k
    raise AssertionError(f"no outcome line for {name}:\n{result.stdout.str()}")


def test_a_skip_is_reported_after_the_line_of_its_cause(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, **CHAIN)
    result = dagtester.run("-v")
    result.assert_outcomes(passed=1, failed=1, skipped=4)
    at = {name: outcome_line(result, name)
          for name in ("test_a", "test_b", "test_c", "test_d", "test_other")}
    assert at["test_a"] < at["test_b"] < at["test_c"] < at["test_d"], result.stdout.str()
    assert at["test_a"] < at["test_other"], result.stdout.str()


# -- pytest.exit() in a test -----------------------------------------------------------

EXIT = """
    def test_a():
        mark("test_a")


    @depends_on("test_a")
    def test_exit():
        mark("test_exit")
        pytest.exit("enough for today"{code})


    @depends_on("test_exit")
    def test_after():
        mark("test_after")
    """


@pytest.mark.parametrize("code", [None, 3])
def test_pytest_exit_in_a_test_ends_the_session_as_serially(
    pytester: pytest.Pytester, dagtester: DagTester, code: int | None
) -> None:
    make_modules(pytester, test_exit=EXIT.format(code="" if code is None else f", {code}"))
    result = dagtester.run()
    assert result.ret == (2 if code is None else code)
    result.stdout.fnmatch_lines(["!!!* _pytest.outcomes.Exit: enough for today !!!*"])
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out
    assert "crashed" not in out
    assert "node down" not in out
    assert sorted(read_log(pytester)) == ["test_a", "test_exit"]
