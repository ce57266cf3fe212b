"""End-to-end tests of the plugin without xdist: declarations, validation, order, skips."""

from __future__ import annotations

import pytest
from helpers import (
    LOG_NAME,
    junit_key,
    make_modules,
    read_junit,
    read_log,
)
from support.dagtester import DagTester
from support.suites import (
    BAD,
    MODULE_TEARDOWN_ERROR,
    POLICY,
    SKIPS,
    SKIPS_CONFTEST,
    check_skips,
    check_validation,
)

pytestmark = pytest.mark.dag_modes("serial")


def collected_order(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line and " " not in line]


# -- declarations and targets -------------------------------------------------

TARGETS = """
@pytest.mark.parametrize("n", [1, 2])
def test_p(n):
    mark(f"test_p{n}")
    assert n == 1


@depends_on("test_p[1]")
def test_one_instance():
    mark("test_one_instance")


@depends_on("test_p")
def test_all_instances():
    mark("test_all_instances")


def test_fails():
    mark("test_fails")
    assert 0


@depends_on(test_fails)
def test_by_function():
    mark("test_by_function")


@pytest.mark.depends_on("test_fails")
def test_by_mark():
    mark("test_by_mark")


def test_setup():
    mark("test_setup")


class TestA:
    def test_setup(self):
        mark("TestA.test_setup")
        assert 0

    @depends_on("test_setup")
    def test_use(self):
        mark("TestA.test_use")


class TestB:
    @depends_on("TestA::test_setup")
    def test_x(self):
        mark("TestB.test_x")

    @depends_on("test_setup")
    def test_y(self):
        mark("TestB.test_y")


class TestD:
    def test_1(self):
        mark("TestD.test_1")

    def test_2(self):
        mark("TestD.test_2")


@depends_on("TestA")
class TestC:
    def test_1(self):
        mark("TestC.test_1")

    def test_2(self):
        mark("TestC.test_2")


@depends_on("test_targets.py::TestD")
def test_after_class():
    mark("test_after_class")
"""

MOD2 = """
pytestmark = pytest.mark.depends_on("test_targets.py::test_setup")


def test_m1():
    mark("test_m1")


def test_m2():
    mark("test_m2")
"""

MOD3 = """
@depends_on("test_mod2.py")
def test_whole_module():
    mark("test_whole_module")


@depends_on("test_targets.py")
def test_whole_failing_module():
    mark("test_whole_failing_module")
"""


def test_target_forms_resolve_to_the_right_tests(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, test_targets=TARGETS, test_mod2=MOD2, test_mod3=MOD3)
    xml = pytester.path / "out.xml"
    result = dagtester.run("--strict-markers", f"--junitxml={xml}", "-rs")
    cases, n_cases = read_junit(xml)
    assert n_cases == 21
    result.assert_outcomes(passed=10, failed=3, skipped=8)

    def outcome(nodeid: str) -> tuple[str, str]:
        case = cases[junit_key(nodeid)]
        return case.outcome, case.message

    passed = [
        "test_targets.py::test_p[1]",
        "test_targets.py::test_one_instance",  # one instance: test_p[1] only
        "test_targets.py::test_setup",
        "test_targets.py::TestB::test_y",  # bare name: no TestB::test_setup, so the module's
        "test_targets.py::TestD::test_1",
        "test_targets.py::TestD::test_2",
        "test_targets.py::test_after_class",  # class node id
        "test_mod2.py::test_m1",  # pytestmark with a rootdir node id
        "test_mod2.py::test_m2",
        "test_mod3.py::test_whole_module",  # module node id
    ]
    for nodeid in passed:
        assert outcome(nodeid) == ("passed", ""), nodeid
    skipped = {
        "test_targets.py::test_all_instances": "prerequisite test_p[2] failed (assert 2 == 1)",
        "test_targets.py::test_by_function": "prerequisite test_fails failed (assert 0)",
        "test_targets.py::test_by_mark": "prerequisite test_fails failed (assert 0)",
        # bare name inside a class: the class's own test_setup wins over the module's
        "test_targets.py::TestA::test_use": "prerequisite TestA::test_setup failed (assert 0)",
        "test_targets.py::TestB::test_x": "prerequisite TestA::test_setup failed (assert 0)",
    }
    for nodeid, reason in skipped.items():
        assert outcome(nodeid) == ("skipped", reason), nodeid
    # class decorator applies to every test of the class; class target = all its tests
    for nodeid in ("test_targets.py::TestC::test_1", "test_targets.py::TestC::test_2"):
        kind, message = outcome(nodeid)
        assert kind == "skipped"
        assert message.startswith("prerequisite TestA::test_"), message
    kind, message = outcome("test_mod3.py::test_whole_failing_module")
    assert kind == "skipped" and message.startswith("prerequisite "), message
    ran = read_log(pytester)
    assert "test_p2" in ran and "test_fails" in ran
    for name in (
        "test_all_instances",
        "test_by_function",
        "TestA.test_use",
        "TestC.test_1",
        "test_whole_failing_module",
    ):
        assert name not in ran


def test_depends_on_is_the_marker(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(
        pytester,
        test_api="""
        import pytest_dagorder

        def test_same():
            assert depends_on("a", "b") == pytest.mark.depends_on("a", "b")
            assert run_after("a") == pytest.mark.run_after("a")
            assert depends_on is pytest_dagorder.depends_on
    """,
    )
    dagtester.run("--strict-markers").assert_outcomes(passed=1)


def test_rootdir_node_id_from_a_subdirectory(
    pytester: pytest.Pytester, dagtester: DagTester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_modules(
        pytester,
        pkg__test_base="""
            def test_create():
                mark("test_create")
                assert 0
        """,
        pkg__sub__test_use="""
            @depends_on("pkg/test_base.py::test_create")
            def test_login():
                mark("test_login")


            @depends_on("pkg/sub/test_use.py::test_login")
            def test_logout():
                mark("test_logout")
        """,
    )
    monkeypatch.chdir(pytester.path / "pkg")
    result = dagtester.run("-rs", "--strict-markers")
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "*prerequisite test_create failed (assert 0)",
            "*prerequisite test_login was skipped: test_create failed (assert 0)",
        ]
    )
    assert set(read_log(pytester)) == {"test_create"}


# -- validation ------------------------------------------------------------------


def test_bad_declarations_stop_the_run_before_any_test(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, test_bad=BAD)
    result = dagtester.run("--strict-markers")
    check_validation(result, pytester)


# -- serial order ----------------------------------------------------------------------


def test_collect_only_lists_the_stable_topological_order(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(
        pytester,
        test_order="""
        def test_a():
            mark("test_a")


        @depends_on("test_d")
        def test_b():
            mark("test_b")


        def test_c():
            mark("test_c")


        def test_d():
            mark("test_d")


        def test_e():
            mark("test_e")
    """,
    )
    expected = [f"test_order.py::test_{x}" for x in "acdbe"]
    # xdist installed but not asked for: the serial order all the same.
    result = dagtester.run("--collect-only", "-q", mode="own")
    assert collected_order(result) == expected
    assert not (pytester.path / LOG_NAME).exists()
    result = dagtester.run("-v", mode="own")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines([f"{nid} PASSED*" for nid in expected])
    ran = read_log(pytester)
    assert sorted(ran, key=lambda n: ran[n].start) == [f"test_{x}" for x in "acdbe"]


# -- skips -------------------------------------------------------------------------------


def test_blocked_tests_are_skipped_with_reasons(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    pytester.makeconftest(SKIPS_CONFTEST)
    make_modules(pytester, test_skips=SKIPS)
    result = dagtester.run("-rs", "-v", "--junitxml=out.xml")
    check_skips(result, pytester, "out.xml")
    result.stdout.fnmatch_lines(["test_skips.py::test_err error: blocked 1 test"])


# -- selection ------------------------------------------------------------------------

SELECTION = """
def test_create():
    mark("test_create")


@depends_on("test_create")
def test_login():
    mark("test_login")


def test_other():
    mark("test_other")
"""


def test_deselected_prerequisite_blocks_unless_pulled_back(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, test_sel=SELECTION)
    result = dagtester.run("-k", "login or other", "-rs")
    result.assert_outcomes(passed=1, skipped=1, deselected=1)
    line = next(ln for ln in result.outlines if ln.startswith("SKIPPED"))
    assert "prerequisite test_create was deselected" in line
    assert "--dag-with-prerequisites" in line
    assert set(read_log(pytester)) == {"test_other"}

    (pytester.path / LOG_NAME).unlink()
    result = dagtester.run("-k", "login", "--dag-with-prerequisites", "-v")
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(
        ["*test_sel.py::test_create PASSED*", "*test_sel.py::test_login PASSED*"]
    )
    assert set(read_log(pytester)) == {"test_create", "test_login"}

    (pytester.path / LOG_NAME).unlink()
    result = dagtester.run("test_sel.py::test_login", "--dag-with-prerequisites", "-v")
    result.assert_outcomes(passed=2)
    assert set(read_log(pytester)) == {"test_create", "test_login"}

    (pytester.path / LOG_NAME).unlink()
    result = dagtester.run("test_sel.py::test_login", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*prerequisite test_create was deselected*"])
    assert not (pytester.path / LOG_NAME).exists()


CROSS_FILES = {
    "test_base": """
        def test_create():
            mark("test_create")
    """,
    "sub__test_use": """
        @depends_on("test_base.py::test_create")
        def test_login():
            mark("test_login")
    """,
}


def test_prerequisite_in_an_unselected_file_is_deselected(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, **CROSS_FILES)
    result = dagtester.run("sub/test_use.py", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*prerequisite test_create was deselected*"])


def test_prerequisite_in_an_unselected_file_is_pulled_back(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, **CROSS_FILES)
    result = dagtester.run("sub/test_use.py::test_login", "--dag-with-prerequisites")
    result.assert_outcomes(passed=2)
    assert set(read_log(pytester)) == {"test_create", "test_login"}


def test_disabled_plugin_runs_plain_pytest(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    dagtester.ini("markers =\n    depends_on\n    run_after\n")
    make_modules(
        pytester,
        test_off="""
        @depends_on("test_b")
        def test_a():
            mark("test_a")


        def test_b():
            mark("test_b")
            assert 0


        @depends_on("test_b")
        def test_c():
            mark("test_c")
    """,
    )
    result = dagtester.run("-p", "no:dagorder", "-v")
    result.assert_outcomes(passed=2, failed=1)
    assert "blocked by prerequisites" not in result.stdout.str()
    ran = read_log(pytester)
    assert sorted(ran, key=lambda n: ran[n].start) == ["test_a", "test_b", "test_c"]


def test_disabled_plugin_leaves_markers_unknown(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(
        pytester,
        test_off="""
        @depends_on("test_b")
        def test_a():
            mark("test_a")


        def test_b():
            mark("test_b")
    """,
    )
    result = dagtester.run(
        "-p", "no:dagorder", "--strict-markers",
        own_process="pytest.mark remembers the markers any run of the process knew")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*'depends_on' not found in `markers`*"])


# -- options ----------------------------------------------------------------------------


def test_on_failure_stop(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(pytester, test_policy=POLICY)
    result = dagtester.run("--dag-on-failure=stop", "-rs", "-v")
    result.assert_outcomes(failed=1, skipped=3)
    assert set(read_log(pytester)) == {"test_a"}
    skips = [ln for ln in result.outlines if ln.startswith("SKIPPED")]
    assert len(skips) == 3
    assert sum("run stopped after" in ln for ln in skips) >= 2, skips
    # -v names the tests behind each count.
    result.stdout.fnmatch_lines([
        "test_policy.py::test_a failed: blocked 1 test",
        "  test_policy.py::test_b",
        "run stopped after test_a failed: 2 tests not started",
        "  test_policy.py::test_c",
        "  test_policy.py::test_d",
    ], consecutive=True)


def test_on_failure_stop_stops_a_suite_that_declares_nothing(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, test_plain="""
        def test_a():
            mark("test_a")
            assert 0


        def test_b():
            mark("test_b")


        def test_c():
            mark("test_c")


        def test_d():
            mark("test_d")
    """)
    result = dagtester.run("--dag-on-failure=stop", "-rs")
    result.assert_outcomes(failed=1, skipped=3)
    assert set(read_log(pytester)) == {"test_a"}
    result.stdout.fnmatch_lines(["run stopped after test_a failed: 3 tests not started"])
    # Without the option, nothing changes for such a suite.
    (pytester.path / LOG_NAME).unlink()
    dagtester.run().assert_outcomes(failed=1, passed=3)


def test_on_failure_run_from_option_and_ini(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, test_policy=POLICY)
    dagtester.run("--dag-on-failure=run").assert_outcomes(failed=1, passed=3)
    assert set(read_log(pytester)) == {"test_a", "test_b", "test_c", "test_d"}

    (pytester.path / LOG_NAME).unlink()
    dagtester.ini("dag_on_failure = run\n")
    dagtester.run().assert_outcomes(failed=1, passed=3)
    (pytester.path / LOG_NAME).unlink()
    dagtester.ini("dag_on_failure = stop\n")
    dagtester.run().assert_outcomes(failed=1, skipped=3)
    # the command line beats the ini
    (pytester.path / LOG_NAME).unlink()
    dagtester.run("--dag-on-failure=skip").assert_outcomes(failed=1, skipped=1, passed=2)


def test_help_shows_the_options(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    result = dagtester.run("--help")
    assert result.ret == 0
    out = result.stdout.str()
    _, _, group = out.partition("dependency DAG scheduling (pytest-dagorder)")
    group = group.split("\n\n")[0]  # the group's own block of options
    for option in ("--dag-with-prerequisites", "--dag-affinity", "--dag-on-failure"):
        assert option in group, (option, out)
    result.stdout.fnmatch_lines(
        [
            "*dependency DAG scheduling (pytest-dagorder)*",
            "*--dag-with-prerequisites*",
            "*--dag-affinity*",
            "*--dag-on-failure*",
        ]
    )
    result.stdout.fnmatch_lines(["*dag_on_failure*", "*dag_affinity*"], consecutive=False)


def test_module_fixture_teardown_error(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(
        pytester,
        test_mfix=MODULE_TEARDOWN_ERROR,
        test_other="""
        def test_z():
            mark("test_z")
    """,
    )
    result = dagtester.run()
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_b*", "*module teardown broke*"])
    assert set(read_log(pytester)) == {"test_a", "test_b", "test_z"}


def test_summary_counts_only_skips_that_were_reported(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    """With -x the run stops before the dependent: the summary must not claim it."""
    make_modules(
        pytester,
        test_p="""
        def test_a():
            assert 0


        @depends_on("test_a")
        def test_b():
            pass
    """,
    )
    stopped = dagtester.run("-x")
    stopped.assert_outcomes(failed=1)
    assert "blocked by prerequisites" not in stopped.stdout.str()
    full = dagtester.run()
    full.assert_outcomes(failed=1, skipped=1)
    full.stdout.fnmatch_lines(["test_p.py::test_a failed: blocked 1 test"])
    assert "  test_p.py::test_b" not in full.outlines, "only -v lists the blocked tests"


def test_ambiguous_function_target_is_a_clean_error(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    """A function object collected twice (inherited by a subclass) names two tests."""
    make_modules(
        pytester,
        test_amb="""
        class TestA:
            def test_x(self):
                mark("x")


        class TestB(TestA):
            pass


        @depends_on(TestA.test_x)
        def test_y():
            mark("y")
    """,
    )
    result = dagtester.run()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*'TestA.test_x' is ambiguous*TestA and *TestB*"])
    assert read_log(pytester) == {}
