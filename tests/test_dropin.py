"""The takeover keeps each original's semantics and options (their own suites pass).

Every scenario runs serially and under ``-n 2`` with the same outcomes; the
real pytest-dependency, pytest-depends and pytest-order are needed (the
``test`` extra installs them).  Their whole suites are run by
``benchmarks/peer_suites.py``.
"""

from __future__ import annotations

import importlib.util

import pytest
from helpers import (
    assert_after,
    base_args,
    junit_key,
    read_log,
)
from support.dagtester import MODES, DagTester

pytestmark = [
    pytest.mark.skipif(
        not all(importlib.util.find_spec(m) for m in
                ("pytest_dependency", "pytest_depends", "pytest_order")),
        reason="needs pytest-dependency, pytest-depends and pytest-order (the test extra)"),
    # The takeover of the installed originals is what this module tests.
    pytest.mark.autoload,
    # Suites as their authors left them (no ini); each run writes the JUnit XML
    # :func:`check` reads.
    pytest.mark.dagtester(ini=None, args=("-rs", "--junitxml=out.xml")),
]


def check(dagtester: DagTester, expected: dict[str, str]) -> None:
    """``expected``: node id -> outcome, or ``outcome:<part of the message>``."""
    got = dagtester.outcomes()
    for nodeid, want in expected.items():
        outcome, message = got[junit_key(nodeid)]
        kind, _, part = want.partition(":")
        assert outcome == kind, (nodeid, outcome, message)
        assert part in message, (nodeid, message)


def order_of(pytester: pytest.Pytester) -> list[str]:
    return [r.name for r in sorted(read_log(pytester).values(), key=lambda r: r.start)]


# -- pytest-dependency / pytest-depends: a name that matches nothing skips ---------------

UNKNOWN = """
@pytest.mark.dependency()
def test_a():
    mark("a")

@pytest.mark.dependency(depends=["test_a", "test_typo"])
def test_b():
    mark("b")

@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.dependency()
def test_p(p):
    mark(f"p{p}")

@pytest.mark.dependency(depends=["test_p"])    # a base name is no name there
def test_base():
    mark("base")

@pytest.mark.depends(on=["nothing_here"])
def test_c():
    mark("c")

@pytest.mark.depends(on=["test_a"])
def test_d():
    mark("d")

class TestK:
    @pytest.mark.dependency()
    def test_m(self):
        mark("m")

    @pytest.mark.dependency(depends=["test_m"])   # module scope: TestK::test_m there
    def test_n(self):
        mark("n")
"""


def test_unknown_names_skip_the_dependent_and_are_listed(
        dagtester: DagTester) -> None:
    dagtester.modules(test_u=UNKNOWN)
    result = dagtester.run()
    assert result.ret == 0
    check(dagtester, {
        "test_u.py::test_a": "passed",
        "test_u.py::test_b": "skipped:test_b depends on 'test_typo', which names no test",
        "test_u.py::test_base": "skipped:test_base depends on 'test_p'",
        "test_u.py::test_c": "skipped:test_u.py::test_c depends on 'nothing_here'",
        "test_u.py::test_d": "passed",
        "test_u.py::TestK::test_n": "skipped:in module scope write TestK::test_m, or give "
                                    "the marker scope='class'",
    })
    result.stdout.fnmatch_lines([
        "dagorder: tests were skipped for names that match no test: "
        "*'test_typo'*'nothing_here'*"])
    assert sorted(dagtester.ran()) == ["a", "d", "m", "p1", "p2"]


def test_dependency_options(dagtester: DagTester) -> None:
    """pytest-dependency's automark_dependency and --ignore-unknown-dependency."""
    dagtester.modules(test_auto="""
        def test_plain():
            mark("plain")

        @pytest.mark.dependency(depends=["test_plain"])
        def test_dependent():
            mark("dependent")
        """)
    dagtester.run()  # test_plain is not marked: skipped, as there
    check(dagtester, {"test_auto.py::test_dependent": "skipped:not marked"})
    dagtester.run("-o", "automark_dependency=true")
    check(dagtester, {"test_auto.py::test_dependent": "passed"})
    dagtester.run("-k", "dependent", "-o", "automark_dependency=true")
    check(dagtester, {"test_auto.py::test_dependent": "skipped:test_plain"})
    if dagtester.xdist:
        # --ignore-unknown-dependency reaches the workers as every foreign
        # option does (test_foreign_options_same_outcomes_serially_and_under_xdist
        # gives it), and is read while planning, alike serially and in a worker.
        return
    dagtester.run("--ignore-unknown-dependency")
    check(dagtester, {"test_auto.py::test_dependent": "passed"})
    dagtester.run("-k", "dependent", "--ignore-unknown-dependency")
    check(dagtester, {"test_auto.py::test_dependent": "passed"})


def test_depends_on_stays_strict(dagtester: DagTester) -> None:
    dagtester.modules(test_s="""
        @depends_on("test_typo")
        def test_x():
            mark("x")
        """)
    result = dagtester.run()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*target 'test_typo' matches no collected test*"])
    assert dagtester.ran() == {}


# -- pytest-depends' options ---------------------------------------------------------

DEPENDS = """
def test_bar():
    mark("bar")
    assert False

@pytest.mark.depends(on=["test_bar"])
def test_foo():
    mark("foo")

@pytest.mark.depends(on=["baz"])
def test_missing():
    mark("missing")
"""


@pytest.mark.parametrize(("failed", "missing", "foo", "miss"), [
    ("skip", "skip", "skipped:prerequisite test_bar failed", "skipped:which names no test"),
    ("fail", "fail", "failed:test_d.py::test_foo depends on test_d.py::test_bar",
     "failed:test_d.py::test_missing depends on baz, which was not found"),
])
def test_depends_actions(dagtester: DagTester, failed: str, missing: str,
                         foo: str, miss: str) -> None:
    dagtester.modules(test_d=DEPENDS)
    dagtester.run(f"--failed-dependency-action={failed}",
        f"--missing-dependency-action={missing}")
    check(dagtester, {"test_d.py::test_bar": "failed", "test_d.py::test_foo": foo,
                     "test_d.py::test_missing": miss})


def test_depends_fail_action_sees_every_outcome(dagtester: DagTester) -> None:
    """Prerequisites in other modules (under -n: test_foo runs where test_slow ran,
    test_bar failed on the other worker), and a dependent of a failed dependent."""
    dagtester.modules(test_a="""
        def test_bar():
            mark("bar")
            assert False
        """, test_c="""
        def test_slow():
            mark("slow", sleep=1.0)
        """, test_b="""
        @pytest.mark.depends(on=["test_a.py::test_bar", "test_c.py::test_slow"])
        def test_foo():
            mark("foo")
        """, test_d="""
        @pytest.mark.depends(on=["test_b.py::test_foo"])
        def test_after_foo():
            mark("after_foo")
        """)
    dagtester.run("--failed-dependency-action=fail")
    check(dagtester, {
        "test_a.py::test_bar": "failed",
        "test_c.py::test_slow": "passed",
        "test_b.py::test_foo": "failed:test_b.py::test_foo depends on test_a.py::test_bar",
        "test_d.py::test_after_foo":
            "failed:test_d.py::test_after_foo depends on test_b.py::test_foo",
    })
    if dagtester.mode == "xdist":  # decided by the controller: the bodies never ran
        assert "foo" not in dagtester.ran() and "after_foo" not in dagtester.ran()


def test_depends_fail_action_counts_towards_maxfail(dagtester: DagTester) -> None:
    dagtester.modules(test_a="""
        def test_bar():
            assert False
        """, test_b="""
        @pytest.mark.depends(on=["test_a.py::test_bar"])
        def test_foo():
            mark("foo")
        """, test_d="""
        @pytest.mark.parametrize("k", range(8))
        def test_later(k):
            mark(f"later{k}", sleep=0.5)
        """)
    result = dagtester.run("--failed-dependency-action=fail", "--maxfail=2")
    result.stdout.fnmatch_lines(["*stopping after 2 failures*"])
    assert len(dagtester.ran()) < 8  # the run stopped


def test_depends_actions_from_the_ini(dagtester: DagTester) -> None:
    """Both actions from the ini; then the command line wins over it, which makes
    the "run" case of :func:`test_depends_actions` (failed run, missing run)."""
    dagtester.modules(test_d=DEPENDS)
    dagtester.pytester.makeini("[pytest]\nfailed_dependency_action = run\n"
                     "missing_dependency_action = fail\n")
    dagtester.run()
    check(dagtester, {"test_d.py::test_foo": "passed", "test_d.py::test_missing": "failed"})
    # the command line wins over the ini
    dagtester.run("--missing-dependency-action=run")
    check(dagtester, {"test_d.py::test_bar": "failed", "test_d.py::test_foo": "passed",
                      "test_d.py::test_missing": "passed"})
    assert_after(dagtester.ran(), [("bar", "foo")])


@pytest.mark.dag_modes("serial")
def test_depends_bad_ini_action_is_a_usage_error(dagtester: DagTester) -> None:
    dagtester.modules(test_d=DEPENDS)
    dagtester.pytester.makeini("[pytest]\nmissing_dependency_action = explode\n")
    result = dagtester.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: missing_dependency_action = 'explode'*run, skip, fail*"])
    assert "Traceback" not in result.stderr.str()


@pytest.mark.dag_modes("serial")
def test_depends_listings(dagtester: DagTester) -> None:
    dagtester.modules(test_l="""
        @pytest.mark.depends(name="alias")
        def test_foo():
            pass

        @pytest.mark.depends(on=["alias", "ghost"])
        def test_bar():
            pass
        """)
    result = dagtester.run("--list-dependency-names",
                 "--list-processed-dependencies")
    result.stdout.fnmatch_lines([
        "Available dependency names:",
        "  alias -> test_l.py::test_foo",
        "Dependencies:",
        "  test_l.py::test_bar depends on",
        "    ghost (MISSING)",
        "    test_l.py::test_foo",
        "collected 2 items*",
    ])


@pytest.mark.dag_modes("serial")  # runs in this process: its manager list is the point
def test_blocked_depends_leaves_no_manager_behind(dagtester: DagTester) -> None:
    """Sessions in one process: pytest-depends' manager list stays as it was."""
    import pytest_depends

    before = list(pytest_depends.managers)
    dagtester.modules(test_n="""
        @pytest.mark.depends(on=["test_a"])
        def test_b():
            pass

        def test_a():
            pass
        """)
    for _ in range(2):
        dagtester.run().assert_outcomes(passed=2)
    assert pytest_depends.managers == before


@pytest.mark.dag_modes("serial")
def test_a_depends_session_around_ours(dagtester: DagTester) -> None:
    """pytest-depends alone outside, pytest-dagorder inside: both end cleanly."""
    dagtester.modules(test_outer=f"""
        pytest_plugins = "pytester"

        def test_a():
            mark("a")

        @pytest.mark.depends(on=["test_a"])
        def test_nested(pytester):
            pytester.makepyfile(test_inner='''
        import pytest

        @pytest.mark.depends(on=["test_y"])
        def test_x():
            pass

        def test_y():
            pass
        ''')
            pytester.runpytest_inprocess({", ".join(map(repr, base_args()))},
                                         "-p", "no:xdist").assert_outcomes(passed=2)
            mark("nested")
        """)
    result = dagtester.run("-p", "no:dagorder")
    result.assert_outcomes(passed=2)
    assert sorted(dagtester.ran()) == ["a", "nested"]


# -- pytest-order ----------------------------------------------------------------------


def test_order_ordinal_beside_relative_marker(dagtester: DagTester) -> None:
    dagtester.modules(test_o="""
        @pytest.mark.order("first", after="test_c")
        def test_a():
            mark("a")

        @pytest.mark.order("second")
        def test_b():
            mark("b")

        def test_c():
            mark("c")
        """)
    dagtester.run().assert_outcomes(passed=3)
    assert_after(dagtester.ran(), [("c", "a")])
    if dagtester.mode == "serial":
        assert order_of(dagtester.pytester) == ["c", "a", "b"]  # as pytest-order runs them


def test_order_class_mark_names_a_test_outside_the_class(
        dagtester: DagTester) -> None:
    dagtester.modules(test_k="""
        @pytest.mark.order(after="test_1")
        class TestK:
            def test_1(self):
                mark("k1")

        def test_1():
            mark("m1")
        """)
    dagtester.run().assert_outcomes(passed=2)
    assert_after(dagtester.ran(), [("m1", "k1")])


def test_order_problems_stay_warnings(dagtester: DagTester) -> None:
    dagtester.modules(test_w="""
        @pytest.mark.order(after="test_ghost")
        def test_unknown():
            mark("unknown")

        @pytest.mark.order("soon")
        def test_bad_ordinal():
            mark("bad")

        @pytest.mark.order(after="test_y")
        def test_x():
            mark("x")

        @pytest.mark.order(after="test_x")
        def test_y():
            mark("y")
        """)
    result = dagtester.run()
    assert result.ret == 0
    result.assert_outcomes(passed=4)
    if dagtester.mode == "serial":
        out = result.stdout.str()
        assert "cannot execute" in out and "test_ghost" in out, out
        result.stdout.fnmatch_lines(["*Unknown order attribute:'soon'*"])


def test_order_failed_ordering_options(dagtester: DagTester) -> None:
    dagtester.modules(test_f="""
        @pytest.mark.order(after="test_ghost")
        def test_unknown():
            mark("unknown")

        def test_fine():
            mark("fine")
        """)
    result = dagtester.run("--error-on-failed-ordering")
    check(dagtester, {"test_f.py::test_unknown": "error:The test could not be ordered",
                     "test_f.py::test_fine": "passed"})
    result = dagtester.run("--fail-all-on-failed-ordering", keep_log=True)
    # pytest-order's usage error, also where a worker met it (the controller ends the run).
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "cannot execute 'test_unknown' relative to others" in (
        result.stdout.str() + result.stderr.str())
    assert dagtester.ran().keys() == {"fine"}  # from the first run only


ORDINALS = """
@pytest.mark.order(2)
def test_two():
    mark("two")

def test_plain():
    mark("plain")

@pytest.mark.order(0)
def test_zero():
    mark("zero")
"""


PREFIXED = """
@pytest.mark.m1
def test_x():
    mark("x")

def test_y():
    mark("y")

@pytest.mark.m0
def test_z():
    mark("z")
"""


@pytest.mark.parametrize(("module", "args", "expected"), [
    (ORDINALS, (), ["zero", "two", "plain"]),
    (ORDINALS, ("--sparse-ordering",), ["zero", "plain", "two"]),
    (PREFIXED, (), ["x", "y", "z"]),
    (PREFIXED, ("--order-marker-prefix=m",), ["z", "x", "y"]),
])
@pytest.mark.dag_modes("serial")
def test_order_options_shape_the_serial_order(
        dagtester: DagTester, module: str, args: tuple[str, ...],
        expected: list[str]) -> None:
    dagtester.modules(test_r=module)
    dagtester.run(*args).assert_outcomes(passed=3)
    assert order_of(dagtester.pytester) == expected


@pytest.mark.dag_modes("serial")
def test_order_scope_module(dagtester: DagTester) -> None:
    dagtester.modules(test_1="""
        def test_a():
            mark("1a")

        @pytest.mark.order(0)
        def test_b():
            mark("1b")
        """, test_2="""
        @pytest.mark.order(0)
        def test_c():
            mark("2c")
        """)
    dagtester.run().assert_outcomes(passed=3)
    assert order_of(dagtester.pytester) == ["1b", "2c", "1a"]
    (dagtester.path / "ran.log").unlink()
    dagtester.run("--order-scope=module").assert_outcomes(passed=3)
    assert order_of(dagtester.pytester) == ["1b", "1a", "2c"]


def test_order_several_ordinal_markers_become_parameters(
        dagtester: DagTester) -> None:
    dagtester.modules(test_m="""
        @pytest.mark.order(1)
        @pytest.mark.order(3)
        def test_twice():
            pass

        @pytest.mark.order(2)
        def test_once():
            pass
        """)
    result = dagtester.run("-v")
    result.assert_outcomes(passed=3)
    if dagtester.mode == "serial":
        result.stdout.fnmatch_lines(["*test_twice?index=1? PASSED*", "*test_once PASSED*",
                                     "*test_twice?index=3? PASSED*"])


@pytest.mark.dag_modes("serial")
@pytest.mark.dagtester(cache=True)
def test_order_ff_and_order_after_ff(dagtester: DagTester) -> None:
    dagtester.modules(test_f="""
        import os

        @pytest.mark.order(0)
        def test_first():
            mark("first")

        def test_flaky():
            mark("flaky")
            assert not os.environ.get("FAIL_FLAKY")
        """)
    # test_flaky fails in the runs before each --ff run: the cache names it failed.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAIL_FLAKY", "1")
        dagtester.run().assert_outcomes(passed=1, failed=1)
        dagtester.run("--ff").assert_outcomes(passed=1, failed=1)
        assert order_of(dagtester.pytester) == ["flaky", "first"]  # --ff wins, as with pytest-order
    dagtester.run("--ff", "--order-after-ff").assert_outcomes(passed=2)
    assert order_of(dagtester.pytester) == ["first", "flaky"]


def test_order_without_pytest_order_warns_too(dagtester: DagTester) -> None:
    """pytest-order switched off: ordinals are ours; what it warned about, we warn about."""
    dagtester.modules(test_w="""
        @pytest.mark.order(after="test_ghost")
        def test_unknown():
            mark("unknown")

        @pytest.mark.order("soon")
        def test_bad_ordinal():
            mark("bad")

        @pytest.mark.order(0)
        def test_zero():
            mark("zero")
        """)
    result = dagtester.run("-p", "no:pytest_order")
    assert result.ret == 0
    # Once, however many workers collected the tests (pytest-order's sorter
    # warns in each worker).
    result.assert_outcomes(passed=3, warnings=2)
    result.stdout.fnmatch_lines([
        "*test_w.py:*: PytestWarning: @pytest.mark.order on test_w.py::test_unknown: target "
        "'test_ghost' matches no collected test*; the relation is ignored",
        "*test_w.py:*: PytestWarning: @pytest.mark.order on test_w.py::test_bad_ordinal: "
        "'soon' is not an ordinal*; the ordinal is ignored",
    ])
    if dagtester.mode == "serial":
        assert order_of(dagtester.pytester)[0] == "zero"


# -- every option set: the same outcomes serially and under -n 2 -----------------------

MIXED_1 = """
@pytest.mark.order(after="test_x2.py::test_late")
def test_early():
    mark("early")

@pytest.mark.m1
@pytest.mark.order(2)
def test_two():
    mark("two")

@pytest.mark.dependency()
def test_fails():
    assert False

@pytest.mark.dependency(depends=["test_fails"])
def test_blocked():
    mark("blocked")

@pytest.mark.dependency(depends=["test_later"])
def test_before():
    mark("before")

@pytest.mark.dependency()
def test_later():
    mark("later")
"""

MIXED_2 = """
def test_late():
    mark("late")

@pytest.mark.depends(on=["test_x1.py::test_fails"])
def test_dep():
    mark("dep")

@pytest.mark.depends(on=["test_late"])
def test_dep_ok():
    mark("dep_ok")
"""


@pytest.mark.parametrize("args", [
    (),
    ("--order-scope=module",),
    ("--order-scope=module", "--error-on-failed-ordering"),
    ("--sparse-ordering", "--order-marker-prefix=m"),
    ("--indulgent-ordering", "--order-dependencies"),
    ("--order-group-scope=module", "--order-scope-level=0"),
    ("--ignore-unknown-dependency", "--failed-dependency-action=run"),
    ("--missing-dependency-action=fail", "--failed-dependency-action=fail"),
], ids=lambda a: " ".join(a) or "defaults")
@pytest.mark.dag_modes("own")
def test_foreign_options_same_outcomes_serially_and_under_xdist(
        dagtester: DagTester, args: tuple[str, ...]) -> None:
    dagtester.modules(test_x1=MIXED_1, test_x2=MIXED_2)
    got = {}
    for mode in MODES:  # one test: the outcomes of both runs are compared
        result = dagtester.run(*args, mode=mode)
        got[mode] = (result.ret, {k: v[0] for k, v in dagtester.outcomes().items()})
    assert got["serial"] == got["xdist"]
    assert got["serial"][1][junit_key("test_x1.py::test_blocked")] == "skipped"
