"""pytest-repeat: a bare target names the same repetition of a repeated test."""

from __future__ import annotations

import pytest
from helpers import make_modules
from support.dagtester import DagTester

pytestmark = pytest.mark.dag_modes("own")

pytest.importorskip("pytest_repeat")

#: The inner runs load pytest-repeat by name: how it is loaded is not what
#: this file checks, and loading every installed plugin costs each process.
REPEAT = ("-p", "repeat")

TIMEOUT = 180.0

SUITE = """
    def test_b(__pytest_repeat_step_number):
        mark(f"b{__pytest_repeat_step_number}")
        assert __pytest_repeat_step_number != 1, "the second repetition fails"


    @depends_on("test_b")
    def test_a(__pytest_repeat_step_number):
        mark(f"a{__pytest_repeat_step_number}")


    @depends_on("test_b[1-3]")
    def test_named():
        mark("named")


    @depends_on(test_b)
    def test_by_object(__pytest_repeat_step_number):
        mark(f"o{__pytest_repeat_step_number}")


    def test_single():
        mark("single")


    @depends_on("test_single")
    def test_after_single():
        mark("after_single")
"""


@pytest.mark.parametrize("extra", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_bare_target_names_the_same_repetition(pytester: pytest.Pytester, dagtester: DagTester,
                                                 extra: list[str]) -> None:
    make_modules(pytester, test_r=SUITE)
    result = dagtester.run(*REPEAT, "--count", "3", "-rs", "-v", *extra,
                           timeout=TIMEOUT)
    # b[2-3] fails: only a[2-3] and by_object[2-3] are skipped; test_named
    # names b[1-3] with brackets, so every repetition depends on that one.
    result.assert_outcomes(passed=15, failed=1, skipped=2)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_r.py:*: prerequisite test_b[[]2-3[]] fail*"])
    skipped = sorted(line.split("::")[1].split()[0] for line in result.outlines
                     if "SKIPPED" in line and "::" in line)
    assert skipped == ["test_a[2-3]", "test_by_object[2-3]"], skipped
