"""End to end: every --dist mode but ``each`` schedules a suite that declares dependencies.

``loadfile`` keeps each file on one worker in collection order, ``loadscope``
each class (and each module's tests outside classes), as xdist's own modes
do; ``worksteal`` is the default scheduling.
"""

from __future__ import annotations

import itertools

import pytest
from helpers import (
    A_THEN_B,
    assert_after,
    free_tests,
    make_modules,
    read_log,
)
from support.dagtester import DagTester

from pytest_dagorder.core.affinity import DocumentKind
from pytest_dagorder.planning.facts import kept_whole

pytestmark = pytest.mark.dag_modes("own")

TIMEOUT = 180.0

#: Undeclared state along collection order (what loadfile/loadscope users rely
#: on), one declared edge across files, and a class whose methods share state.
SUITE = {
    "test_one": """
        ORDER = []


        def test_first():
            ORDER.append("first")
            mark("first", 0.05)


        def test_second():
            assert ORDER == ["first"], ORDER
            ORDER.append("second")
            mark("second", 0.05)


        @depends_on("test_two.py::test_root")
        def test_third():
            assert ORDER == ["first", "second"], ORDER
            mark("third", 0.05)


        class TestKept:
            seen = []

            def test_in(self):
                type(self).seen.append(os.getpid())
                mark("in", 0.05)

            def test_out(self):
                assert type(self).seen == [os.getpid()], "state lost"
                mark("out", 0.05)
    """,
    "test_two": """
        def test_root():
            mark("root", 0.1)
    """,
    "test_free": free_tests(6),
}


@pytest.mark.parametrize("dist", ["loadfile", "loadscope"])
def test_files_or_scopes_run_whole_with_declarations(
        dagtester: DagTester, dist: str) -> None:
    dagtester.modules(**SUITE)
    result = dagtester.run("-n", "3", "--dist", dist, "--dag-affinity=none")
    result.assert_outcomes(passed=12)
    ran = dagtester.ran()
    assert_after(ran, [("root", "third"), ("in", "out")])
    assert ran["in"].pid == ran["out"].pid
    if dist == "loadfile":
        # The whole file on one worker, in the run's order (collection order
        # but for test_third, which waits for a test collected after it).
        names = ["first", "second", "in", "out", "third"]
        assert len({ran[n].pid for n in names}) == 1
        assert_after(ran, list(itertools.pairwise(names)))
    else:
        assert ran["first"].pid == ran["second"].pid == ran["third"].pid
        assert_after(ran, [("first", "second"), ("second", "third")])
    result.stdout.fnmatch_lines(["dagorder: * each runs on one worker, in collection order"])


@pytest.mark.parametrize("dist", ["loadfile", "loadscope"])
def test_files_or_scopes_run_whole_in_a_suite_that_declares_nothing(
        pytester: pytest.Pytester, dagtester: DagTester, dist: str) -> None:
    """Nothing declared, yet files (scopes) are chains handed out one test after
    another: the workers keep their barrier, or a worker would wait for ever
    for the next test of a file that follows the one it runs."""
    make_modules(pytester, **{
        f"test_f{f}": "".join(
            f"def test_{k}():\n    mark('f{f}_{k}', 0.05)\n\n\n" for k in range(3))
        for f in range(3)})
    result = dagtester.run("-n", "2", "--dist", dist, timeout=TIMEOUT)
    result.assert_outcomes(passed=9)
    ran = read_log(pytester)
    for f in range(3):
        names = [f"f{f}_{k}" for k in range(3)]
        assert len({ran[n].pid for n in names}) == 1
        assert_after(ran, list(itertools.pairwise(names)))


def test_worksteal_schedules_the_graph(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(pytester, test_x="""
        def test_a():
            mark("a", 0.05)


        @depends_on("test_a")
        def test_b():
            mark("b")
    """)
    result = dagtester.run("-n", "2", "--dist", "worksteal",
                           timeout=TIMEOUT)
    result.assert_outcomes(passed=2)
    assert_after(read_log(pytester), [("a", "b")])


def test_each_is_refused_with_the_reason(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(pytester, test_x=A_THEN_B)
    result = dagtester.run("-n", "2", "--dist", "each", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*--dist each cannot honour*every test once on every worker*"])
    assert read_log(pytester) == {}


def test_kept_whole_follows_xdists_scopes() -> None:
    ids = ["a.py::t1", "a.py::C::t2", "a.py::C::t3", "a.py::t4", "b.py::t5", "d.txt::x",
           "d.txt::y"]
    modules = ["a.py", "a.py", "a.py", "a.py", "b.py", None, None]
    classes = [None, "a.py::C", "a.py::C", None, None, None, None]
    assert kept_whole("loadfile", "module", ids, modules, classes) == {
        "loadfile a.py": [0, 1, 2, 3], "loadfile d.txt": [5, 6]}
    assert kept_whole("loadscope", "module", ids, modules, classes) == {
        "loadscope a.py": [0, 3], "loadscope a.py::C": [1, 2], "loadscope d.txt": [5, 6]}
    kinds: list[DocumentKind | None] = [None, None, None, None, None, "file", "file"]
    assert kept_whole("load", "module", ids, modules, classes, kinds) == {
        "document d.txt": [5, 6]}
    assert kept_whole("load", "none", ids, modules, classes, kinds) == {}
