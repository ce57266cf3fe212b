"""End to end: declarations and pytest's collection errors, serially and under -n 2.

``--continue-on-collection-errors`` runs what was collected, as pytest and
plain xdist do: the tests whose declarations are broken are left out (their
problems reported as collection errors), the rest runs.
"""

from __future__ import annotations

import pytest
from support.dagtester import DagTester

pytestmark = pytest.mark.dagtester(timeout=120.0)


def broken_suite(dagtester: DagTester) -> None:
    (dagtester.path / "test_broken.py").write_text(
        "import no_such_module_here\n\n\ndef test_gone():\n    pass\n", encoding="utf-8")
    dagtester.modules(test_ok="""
        def test_free():
            mark("free")


        @depends_on("test_broken.py::test_gone")
        def test_on_broken():
            mark("on_broken")


        @depends_on("test_on_broken")
        def test_after():
            mark("after")


        @depends_on("test_free")
        def test_chain():
            mark("chain")
    """)


def test_continue_on_collection_errors_runs_what_was_collected(
        dagtester: DagTester) -> None:
    broken_suite(dagtester)
    result = dagtester.run("--continue-on-collection-errors", "-rs")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # The import error and the declaration naming its file.
    result.assert_outcomes(passed=2, skipped=1, errors=2)
    assert sorted(dagtester.ran()) == ["chain", "free"]
    result.stdout.fnmatch_lines([
        "*test_ok.py::test_on_broken: target 'test_broken.py::test_gone' is in "
        "test_broken.py, which cannot be collected*",
    ])
    result.stdout.fnmatch_lines([
        "SKIPPED*prerequisite test_ok.py::test_on_broken did not run: its declaration "
        "has an error (see the collection errors)"])
    assert "Interrupted" not in result.stdout.str()
    # Without the option, a broken declaration still runs nothing.
    stopped = dagtester.run()
    assert stopped.ret == pytest.ExitCode.INTERRUPTED
    assert dagtester.ran() == {}


def test_continue_leaves_out_a_cycle_and_runs_the_rest(
        dagtester: DagTester) -> None:
    dagtester.modules(test_cycle="""
        @depends_on("test_y")
        def test_x():
            mark("x")


        @depends_on("test_x")
        def test_y():
            mark("y")


        @depends_on("test_typo_here")
        def test_typo():
            mark("typo")


        def test_free():
            mark("free")
    """)
    result = dagtester.run("--continue-on-collection-errors")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert sorted(dagtester.ran()) == ["free"], result.stdout.str()
    assert "Interrupted" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*cycle*"])
    result.stdout.fnmatch_lines(["*'test_typo_here' matches no collected test*"])


@pytest.mark.dagtester(ini=None)
def test_an_unknown_node_id_names_the_rootdir_it_is_relative_to(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # No ini file: run from tests/, the rootdir is tests/ and node ids drop "tests/".
    dagtester.modules(tests__test_a="""
        def test_a():
            mark("a")
    """, tests__test_b="""
        @depends_on("tests/test_a.py::test_a")
        def test_b():
            mark("b")


        @depends_on("test_nothing")
        def test_c():
            mark("c")
    """)
    monkeypatch.chdir(dagtester.path / "tests")
    result = dagtester.run()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    rootdir = dagtester.path / "tests"
    result.stdout.fnmatch_lines([
        "*target 'tests/test_a.py::test_a' matches no collected test; did you mean "
        f"'test_a.py::test_a'*? (node ids are relative to the rootdir {rootdir})"])
    # A bare name is not a path: nothing to say about the rootdir.  (Its
    # error shows twice where the short summary is not cut, as under CI=true.)
    lines = [ln for ln in result.outlines if "'test_nothing' matches" in ln]
    assert lines
    assert not any("node ids are relative to the rootdir" in ln for ln in lines), lines
