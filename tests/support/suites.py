"""Suites the serial and the xdist end-to-end tests both run, and what each must give."""

from __future__ import annotations

import pytest
from helpers import LOG_NAME, junit_key, read_junit, read_log

BAD = """
def test_create():
    mark("test_create")


@depends_on("test_craete")
def test_unknown():
    mark("test_unknown")


@depends_on("test_cyc_b")
def test_cyc_a():
    mark("test_cyc_a")


@depends_on("test_cyc_a")
def test_cyc_b():
    mark("test_cyc_b")


@depends_on("test_self")
def test_self():
    mark("test_self")


@depends_on(42)
def test_not_a_string():
    mark("test_not_a_string")


@depends_on()
def test_empty():
    mark("test_empty")
"""


def check_validation(result: pytest.RunResult, pytester: pytest.Pytester) -> None:
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, out
    assert "INTERNALERROR" not in out and "Traceback" not in out
    result.stdout.fnmatch_lines(["*Interrupted: 5 errors*"])
    assert out.count("test_bad.py::test_unknown") >= 1
    details = [ln for ln in result.outlines if ln.startswith("pytest-dagorder: ")]
    assert len(details) == 5, out
    unknown = [ln for ln in details if "matches no collected test" in ln]
    assert len(unknown) == 1, out
    assert "test_bad.py::test_unknown" in unknown[0]
    assert "'test_craete'" in unknown[0] and "did you mean" in unknown[0]
    assert "'test_create'" in unknown[0]
    cycle = [ln for ln in details if "dependency cycle" in ln]
    assert len(cycle) == 1 and "->" in cycle[0], out
    assert "test_cyc_a" in cycle[0] and "test_cyc_b" in cycle[0]
    assert sum("depends on itself" in ln for ln in details) == 1
    assert sum("42 is not a test name" in ln for ln in details) == 1
    assert sum("no target given" in ln for ln in details) == 1
    assert not (pytester.path / LOG_NAME).exists()


SKIPS = """
def test_create():
    mark("test_create")
    assert 0


@depends_on("test_create")
def test_login():
    mark("test_login")


@depends_on("test_login")
def test_checkout(tracked):
    mark("test_checkout")


@pytest.fixture
def broken():
    raise RuntimeError("setup broke")


def test_err(broken):
    mark("test_err")


@depends_on("test_err")
def test_after_err(tracked):
    mark("test_after_err")


def test_skip():
    mark("test_skip")
    pytest.skip("not today")


@depends_on("test_skip")
def test_after_skip(tracked):
    mark("test_after_skip")


@pytest.mark.xfail(reason="known")
def test_xf():
    mark("test_xf")
    assert 0


@depends_on("test_xf")
def test_after_xf(tracked):
    mark("test_after_xf")


@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown broke")


def test_td(bad_teardown):
    mark("test_td")


@depends_on("test_td")
def test_after_td(tracked):
    mark("test_after_td")


def test_free(tracked):
    mark("test_free")
"""


SKIPS_CONFTEST = """
import os

import pytest

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures.log")


@pytest.fixture
def tracked(request):
    with open(FIXTURES, "a") as f:
        f.write(request.node.name + "\\n")
"""


SKIP_REASONS = {
    "test_login": "prerequisite test_create failed (assert 0)",
    "test_checkout": "prerequisite test_login was skipped: test_create failed (assert 0)",
    "test_after_err": "prerequisite test_err had an error (RuntimeError: setup broke)",
    "test_after_skip": "prerequisite test_skip was skipped",
    "test_after_xf": "prerequisite test_xf xfailed",
    "test_after_td": "prerequisite test_td had an error (RuntimeError: teardown broke)",
}


def check_skips(result: pytest.RunResult, pytester: pytest.Pytester, xml_name: str) -> None:
    # 12 tests; test_td passes its call and errors at teardown (counted twice by pytest)
    result.assert_outcomes(passed=2, failed=1, errors=2, skipped=7, xfailed=1)
    for name, reason in SKIP_REASONS.items():
        result.stdout.fnmatch_lines([f"SKIPPED [[]1[]] test_skips.py:*: {reason}"])
        # The controller's own skip reads "nodeid SKIPPED (reason)"; one the
        # worker reported (a test sent ahead) reads "[gwN] [..%] SKIPPED nodeid".
        result.stdout.re_match_lines(
            [rf".*(test_skips\.py::{name} SKIPPED|SKIPPED test_skips\.py::{name}\b).*"])
    assert "pytest_dagorder" not in "\n".join(
        ln for ln in result.outlines if ln.startswith("SKIPPED")
    )
    # -v lists the blocked tests under each root cause, in collection order.
    start = next(i for i, line in enumerate(result.outlines)
                 if "= blocked by prerequisites (pytest-dagorder) =" in line)
    summary = result.outlines[start:]
    assert summary[1:9] == [
        "test_skips.py::test_create failed: blocked 2 tests",
        "  test_skips.py::test_login",
        "  test_skips.py::test_checkout",
        "test_skips.py::test_err error: blocked 1 test",
        "  test_skips.py::test_after_err",
        "test_skips.py::test_skip skipped: blocked 1 test",
        "  test_skips.py::test_after_skip",
        "test_skips.py::test_xf xfailed: blocked 1 test",
    ], summary
    cases, n_cases = read_junit(pytester.path / xml_name)
    assert n_cases == 12
    for name, reason in SKIP_REASONS.items():
        case = cases[junit_key(f"test_skips.py::{name}")]
        assert case.outcome == "skipped" and reason in case.message, (name, case)
    ran = read_log(pytester)
    assert set(ran) == {"test_create", "test_skip", "test_xf", "test_td", "test_free"}
    built = (pytester.path / "fixtures.log").read_text().split()
    assert built == ["test_free"]


POLICY = """
def test_a():
    mark("test_a")
    assert 0


@depends_on("test_a")
def test_b():
    mark("test_b")


def test_c():
    mark("test_c")


def test_d():
    mark("test_d")
"""


# A module fixture whose teardown fails after its last test (test_b).
MODULE_TEARDOWN_ERROR = """
@pytest.fixture(scope="module")
def res():
    yield
    raise RuntimeError("module teardown broke")


def test_a(res):
    mark("test_a")


@depends_on("test_a")
def test_b(res):
    mark("test_b")
"""
