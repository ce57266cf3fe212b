"""End-to-end tests of the plugin under pytest-xdist (the controller runs in this process, its
workers in their own: see ``helpers.runpytest``)."""

from __future__ import annotations

import itertools
import os
import textwrap

import pytest
from helpers import (
    LOG_NAME,
    Ran,
    assert_after,
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
    SKIP_REASONS,
    SKIPS,
    SKIPS_CONFTEST,
    check_skips,
    check_validation,
)

import pytest_dagorder

pytestmark = pytest.mark.dag_modes("own")


# -- graph shapes, all passing: order, invisibility of barriers, reports --------------

HOOKS_CONFTEST = """
import os

import pytest

SEEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hooks.log")


def _note(hook, nodeid):
    with open(SEEN, "a") as f:
        f.write(f"{hook} {nodeid}\\n")


def pytest_runtest_setup(item):
    _note("setup", item.nodeid)


def pytest_runtest_call(item):
    _note("call", item.nodeid)


def pytest_runtest_teardown(item, nextitem):
    _note("teardown", item.nodeid)
    if nextitem is not None:
        _note("next", nextitem.nodeid)


def pytest_runtest_logreport(report):
    _note("logreport-" + report.when, report.nodeid)


def pytest_runtest_logstart(nodeid, location):
    _note("logstart", nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _note("protocol", item.nodeid)
    return (yield)


@pytest.fixture(scope="session")
def session_res():
    return {}
"""

SHAPES_CHAIN = """
def test_c1():
    mark("c1", 0.05)


@depends_on("test_c1")
def test_c2():
    mark("c2", 0.05)


@depends_on("test_c2")
def test_c3():
    mark("c3", 0.05)


def test_top():
    mark("top", 0.05)


@depends_on("test_top")
def test_left():
    mark("left", 0.1)


@depends_on("test_top")
def test_right():
    mark("right", 0.1)


@depends_on("test_left", "test_right")
def test_bottom():
    mark("bottom")


@pytest.mark.parametrize("n", range(3))
def test_param(n):
    mark(f"param{n}", 0.02)


@depends_on("test_param")
def test_after_all_params():
    mark("after_all_params")


@depends_on("test_param[1]")
def test_after_one_param():
    mark("after_one_param")


@pytest.mark.xdist_group("g")
def test_group_1():
    mark("group1")


@pytest.mark.xdist_group("g")
def test_group_2():
    mark("group2")


@pytest.mark.xdist_group("g")
def test_group_3():
    mark("group3")
"""

SHAPES_FAN = """
def test_root():
    mark("root", 0.05)


@pytest.mark.parametrize("k", range(8))
@depends_on("test_root")
def test_fan(k):
    mark(f"fan{k}", 0.03)


@depends_on("test_fan")
def test_join():
    mark("join")


@depends_on("test_chain.py::test_c3")
def test_cross_module():
    mark("cross_module")


class TestFlow:
    def test_open(self, session_res):
        mark("flow_open", 0.03)

    @depends_on("test_open")
    def test_use(self):
        mark("flow_use", 0.03)

    @depends_on("test_use")
    def test_close(self):
        mark("flow_close")


@depends_on("TestFlow")
class TestAfterFlow:
    def test_1(self):
        mark("after_flow1")

    def test_2(self):
        mark("after_flow2")
"""

SHAPES_EDGES = [
    ("c1", "c2"),
    ("c2", "c3"),
    ("top", "left"),
    ("top", "right"),
    ("left", "bottom"),
    ("right", "bottom"),
    *[(f"param{n}", "after_all_params") for n in range(3)],
    ("param1", "after_one_param"),
    *[("root", f"fan{k}") for k in range(8)],
    *[(f"fan{k}", "join") for k in range(8)],
    ("c3", "cross_module"),
    ("flow_open", "flow_use"),
    ("flow_use", "flow_close"),
    ("flow_close", "after_flow1"),
    ("flow_close", "after_flow2"),
]

SHAPES_IDS = [
    *(f"test_chain.py::test_{n}" for n in ("c1", "c2", "c3", "top", "left", "right", "bottom")),
    *(f"test_chain.py::test_param[{n}]" for n in range(3)),
    "test_chain.py::test_after_all_params",
    "test_chain.py::test_after_one_param",
    *(f"test_chain.py::test_group_{n}" for n in (1, 2, 3)),
    "test_fan.py::test_root",
    *(f"test_fan.py::test_fan[{k}]" for k in range(8)),
    "test_fan.py::test_join",
    "test_fan.py::test_cross_module",
    *(f"test_fan.py::TestFlow::test_{n}" for n in ("open", "use", "close")),
    "test_fan.py::TestAfterFlow::test_1",
    "test_fan.py::TestAfterFlow::test_2",
]


def make_shapes(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(HOOKS_CONFTEST)
    make_modules(pytester, test_chain=SHAPES_CHAIN, test_fan=SHAPES_FAN)


def check_shapes(result: pytest.RunResult, pytester: pytest.Pytester) -> dict[str, Ran]:
    n = len(SHAPES_IDS)
    result.assert_outcomes(passed=n)
    ran = read_log(pytester)
    assert len(ran) == n
    assert_after(ran, SHAPES_EDGES)
    assert len({ran[f"group{k}"].pid for k in (1, 2, 3)}) == 1
    return ran


def test_graph_shapes_under_two_workers(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_shapes(pytester)
    xml = pytester.path / "out.xml"
    result = dagtester.run("-n", "2", "-v", "--strict-markers", f"--junitxml={xml}")
    check_shapes(result, pytester)
    out = result.stdout.str()
    assert "scheduling tests via DependencyScheduling" in out
    assert "[100%]" in out
    assert "dagorder-barrier" not in out

    # barriers never reach a hook of the user's conftest, on any worker
    seen = [line.split(" ", 1) for line in (pytester.path / "hooks.log").read_text().splitlines()]
    # (``nextitem`` is checked in test_barrier_is_never_a_nextitem)
    assert not [s for s in seen if s[0] != "next" and "dagorder-barrier" in s[1]]
    by_hook: dict[str, list[str]] = {}
    for hook, nodeid in seen:
        by_hook.setdefault(hook, []).append(nodeid)
    for hook in ("setup", "call", "teardown", "protocol"):
        assert sorted(by_hook[hook]) == sorted(SHAPES_IDS), hook  # each real test once
    for hook in ("logstart", "logreport-setup", "logreport-call", "logreport-teardown"):
        # once on the worker, once on the controller (xdist replays reports there)
        assert sorted(by_hook[hook]) == sorted(SHAPES_IDS * 2), hook

    cases, n_cases = read_junit(xml)
    assert n_cases == len(SHAPES_IDS)
    assert set(cases) == {junit_key(nid) for nid in SHAPES_IDS}
    assert {c.outcome for c in cases.values()} == {"passed"}


def test_graph_shapes_under_four_workers(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_shapes(pytester)
    result = dagtester.run("-n", "4")
    check_shapes(result, pytester)


def test_independent_tests_overlap_and_affinity_none_is_accepted(
    pytester: pytest.Pytester, dagtester: DagTester,
) -> None:
    make_modules(
        pytester,
        test_sleep_a="""
        def test_sleep_a():
            mark("a", 0.5)
    """,
        test_sleep_b="""
        def test_sleep_b():
            mark("b", 0.5)


        @depends_on("test_sleep_a.py::test_sleep_a", "test_sleep_b")
        def test_both():
            mark("both")
    """,
    )
    result = dagtester.run("-n", "2", "--dag-affinity=none")
    result.assert_outcomes(passed=3)
    ran = read_log(pytester)
    a, b = ran["a"], ran["b"]
    assert a.pid != b.pid
    assert a.start < b.end and b.start < a.end, "independent tests did not overlap"
    assert_after(ran, [("a", "both"), ("b", "both")])


def test_barrier_is_never_a_nextitem(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    pytester.makeconftest(
        HOOKS_CONFTEST.replace(
            '    _note("protocol", item.nodeid)\n',
            '    _note("protocol", item.nodeid)\n'
            "    if nextitem is not None:\n"
            '        _note("protocol-next", nextitem.nodeid)\n',
        )
    )
    make_modules(
        pytester,
        test_one="""
        def test_a():
            mark("a")


        @depends_on("test_a")
        def test_b():
            mark("b")
    """,
        test_two="""
        class TestT:
            def test_c(self):
                mark("c")
    """,
    )
    result = dagtester.run("-n", "2")
    result.assert_outcomes(passed=3)
    seen = (pytester.path / "hooks.log").read_text()
    assert "dagorder-barrier" not in seen, seen


# -- failures upstream ---------------------------------------------------------------


def test_blocked_tests_are_skipped_under_xdist(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    pytester.makeconftest(SKIPS_CONFTEST)
    make_modules(
        pytester,
        test_skips=SKIPS,
        test_more="""
        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_p(n):
            mark(f"p{n}")
            assert n != 2


        @depends_on("test_p[1]")
        def test_after_p1():
            mark("after_p1")


        @depends_on("test_p")
        def test_after_all_p():
            mark("after_all_p")


        class TestChain:
            def test_a(self):
                mark("TestChain.a")
                assert 0

            @depends_on("test_a")
            def test_b(self):
                mark("TestChain.b")

            @depends_on("test_b")
            def test_c(self):
                mark("TestChain.c")


        @depends_on("test_skips.py::test_create")
        def test_cross():
            mark("cross")
    """,
    )
    result = dagtester.run("-n", "2", "-rs", "-v", "--junitxml=out.xml")
    # test_skips.py: as serially; test_more.py: 3 + 2 + 3 + 1 tests
    result.assert_outcomes(passed=5, failed=3, errors=2, skipped=11, xfailed=1)
    for reason in SKIP_REASONS.values():
        result.stdout.fnmatch_lines([f"SKIPPED [[]1[]] test_skips.py:*: {reason}"])
    cases, n_cases = read_junit(pytester.path / "out.xml")
    assert n_cases == 12 + 9
    for name, reason in SKIP_REASONS.items():
        case = cases[junit_key(f"test_skips.py::{name}")]
        assert (case.outcome, case.message) == ("skipped", reason), name
    more = {
        "test_after_p1": ("passed", ""),
        "test_after_all_p": ("skipped", "prerequisite test_p[2] failed (assert 2 != 2)"),
        "TestChain::test_b": ("skipped", "prerequisite TestChain::test_a failed (assert 0)"),
        "TestChain::test_c": (
            "skipped",
            "prerequisite TestChain::test_b was skipped: TestChain::test_a failed (assert 0)",
        ),
        "test_cross": ("skipped", "prerequisite test_create failed (assert 0)"),
    }
    for name, expected in more.items():
        case = cases[junit_key(f"test_more.py::{name}")]
        assert (case.outcome, case.message) == expected, name
    result.stdout.fnmatch_lines(["*= blocked by prerequisites (pytest-dagorder) =*"])
    result.stdout.fnmatch_lines(["test_skips.py::test_create failed: blocked 3 tests"])
    result.stdout.fnmatch_lines(["test_more.py::test_p[[]2[]] failed: blocked 1 test"])
    ran = read_log(pytester)
    assert set(ran) == {
        "test_create",
        "test_skip",
        "test_xf",
        "test_td",
        "test_free",
        "p1",
        "p2",
        "p3",
        "after_p1",
        "TestChain.a",
    }
    assert (pytester.path / "fixtures.log").read_text().split() == ["test_free"]


def test_skip_lines_name_each_test_s_own_line(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    """Skips the controller reports carry the test's location, as serial ones do.

    The workers compute the locations in shares (every n-th test each);
    whichever worker computed a line, -rs shows the serial run's line.
    """
    make_modules(pytester, test_fan="""
        def test_root():
            assert 0
        """ + "".join(f"""

        @depends_on("test_root")
        def test_leaf{k}():
            pass
        """ for k in range(6)))

    def skip_lines(result: pytest.RunResult) -> list[str]:
        return sorted(ln for ln in result.outlines if ln.startswith("SKIPPED"))

    serial = dagtester.run("-p", "no:xdist", "-rs")
    serial.assert_outcomes(failed=1, skipped=6)
    parallel = dagtester.run("-n", "2", "--dag-affinity=none", "-rs")
    parallel.assert_outcomes(failed=1, skipped=6)
    assert len(skip_lines(serial)) == 6
    assert skip_lines(parallel) == skip_lines(serial)


@pytest.mark.parametrize("affinity", ["module", "none"])
def test_skips_match_the_serial_run(
    pytester: pytest.Pytester, dagtester: DagTester, affinity: str
) -> None:
    # module: a connected module runs as one group, its chain handed out ahead;
    # none: each dependent waits on its prerequisite's worker when nothing is
    # ready.  Either way the worker skips what it holds with the core's reason.
    pytester.makeconftest(SKIPS_CONFTEST)
    make_modules(pytester, test_skips=SKIPS)
    result = dagtester.run("-n", "2", "-rs", "-v", "--junitxml=out.xml",
                           f"--dag-affinity={affinity}")
    check_skips(result, pytester, "out.xml")


def test_module_fixture_teardown_error_under_xdist(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(
        pytester,
        test_mfix=MODULE_TEARDOWN_ERROR,
        test_other="""
        @pytest.mark.parametrize("n", range(4))
        def test_z(n):
            mark(f"test_z{n}")
    """,
    )
    result = dagtester.run("-n", "2")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=6, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_b*", "*module teardown broke*"])
    assert len(read_log(pytester)) == 6


# A stand-in for pytest-benchmark: its report hook reads ``item.funcargs``,
# which pytest unbinds once a test's protocol ended.  It notes what each
# teardown report showed it.
FUNCARGS_READER = """
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    used = sorted(name for name in item.funcargs if name == "res")
    if call.when == "teardown":
        with open("reports.log", "a") as f:
            f.write(f"{item.name} {outcome.get_result().outcome} {used}\\n")
"""


@pytest.mark.parametrize("scope", ["module", "class"])
def test_a_teardown_error_at_a_barrier_reaches_report_hooks_as_serially(
        pytester: pytest.Pytester, dagtester: DagTester, scope: str) -> None:
    pytester.makeconftest(FUNCARGS_READER)
    holder = "class TestKeep:\n" if scope == "class" else ""
    indent = "    " if scope == "class" else ""
    body = f"""
@pytest.fixture(scope="{scope}")
def res():
    yield
    raise RuntimeError("{scope} teardown broke")


{holder}{indent}def test_a({"self, " if holder else ""}res):
{indent}    mark("test_a")


{indent}@depends_on("test_a")
{indent}def test_b({"self, " if holder else ""}res):
{indent}    mark("test_b")
"""
    make_modules(pytester, test_mfix=body, test_other="""
        def test_x():
            mark("test_x")


        @depends_on("test_x")
        def test_y():
            mark("test_y")
    """)
    for args in (["-p", "no:xdist"], ["-n", "2"]):
        (pytester.path / "reports.log").unlink(missing_ok=True)
        result = dagtester.run(*args)
        assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str(), args
        assert result.ret == pytest.ExitCode.TESTS_FAILED, args
        result.assert_outcomes(passed=4, errors=1)
        result.stdout.fnmatch_lines(["*ERROR at teardown of *test_b*",
                                     f"*{scope} teardown broke*"])
        seen = (pytester.path / "reports.log").read_text().splitlines()
        # One teardown report per test, as serially: test_b's failed, and
        # its report hooks saw the fixture the test used.
        assert sorted(seen) == ["test_a passed ['res']", "test_b failed ['res']",
                                "test_x passed []", "test_y passed []"], (args, seen)


def test_a_teardown_error_a_barrier_reports_reaches_report_hooks_as_in_the_teardown(
        pytester: pytest.Pytester, dagtester: DagTester) -> None:
    """The module still has a test to come when test_b ends (test_late, held by
    its prerequisite on the other worker), so test_b's worker keeps the fixture
    and its barrier tears it down at the end: the error comes after test_b's own
    teardown passed, and the report hooks still see test_b as in its teardown."""
    pytester.makeconftest(FUNCARGS_READER)
    make_modules(pytester, test_mfix="""
        import pathlib


        @pytest.fixture(scope="module")
        def res():
            yield
            raise RuntimeError("module teardown broke")


        def test_a(res):
            mark("test_a")


        @depends_on("test_a")
        def test_b(res):
            mark("test_b")
            pathlib.Path("b.done").touch()


        @pytest.mark.xdist_group("late")
        @depends_on("test_other.py::test_gate")
        def test_late():
            mark("test_late")
    """, test_other="""
        import pathlib


        @pytest.mark.xdist_group("late")
        def test_gate():
            deadline = time.monotonic() + 60
            while not pathlib.Path("b.done").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            mark("test_gate")
    """)
    result = dagtester.run("-n", "2")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=4, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_b*", "*module teardown broke*"])
    seen = (pytester.path / "reports.log").read_text().splitlines()
    assert [ln for ln in seen if ln.startswith("test_b")] == [
        "test_b passed ['res']", "test_b failed ['res']"], seen


# -- validation -------------------------------------------------------------------------


def test_bad_declarations_under_xdist(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(pytester, test_bad=BAD)
    result = dagtester.run("-n", "2")
    check_validation(result, pytester)


def test_other_dist_mode_with_declarations_is_refused_cleanly(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(
        pytester,
        test_x="""
        def test_a():
            mark("a")


        @depends_on("test_a")
        def test_b():
            mark("b")
    """,
    )
    result = dagtester.run("-n", "2", "--dist", "each")
    assert not (pytester.path / LOG_NAME).exists()
    # Named on the test that declares a prerequisite, not on the first test.
    result.stdout.fnmatch_lines([
        "*--dist each cannot honour depends_on/run_after declarations "
        "(test_x.py::test_b declares one)*every worker*",
        "ERROR test_x.py::test_b*"])
    assert "test_x.py::test_a" not in result.stdout.str()
    assert result.ret in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.USAGE_ERROR)


def test_a_worker_of_another_plugin_version_is_a_usage_error(
        pytester: pytest.Pytester, dagtester: DagTester) -> None:
    # The workers announce another version (as an older install there would).
    pytester.makeconftest("""
        import os

        if os.environ.get("PYTEST_XDIST_WORKER"):
            import pytest_dagorder.drivers.distributed.wire

            pytest_dagorder.drivers.distributed.wire.__version__ = "0.0.1"
    """)
    make_modules(pytester, test_x="""
        def test_a():
            mark("a")
    """)
    result = dagtester.run("-n", "2")
    assert not (pytester.path / LOG_NAME).exists()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    ours = pytest_dagorder.__version__
    result.stderr.fnmatch_lines([
        f"*a worker runs pytest-dagorder 0.0.1, this process runs pytest-dagorder {ours}; "
        "install the same version where the workers run*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()



@pytest.mark.parametrize("side", ["worker", "controller"])
def test_a_side_channel_message_of_unknown_kind_is_a_usage_error(
        pytester: pytest.Pytester, dagtester: DagTester, side: str) -> None:
    # One side sends a message of a kind the other does not read, after the
    # first test: the session ends naming the worker, whichever side it was.
    pytester.makeconftest("""
        import os

        import pytest

        if os.environ.get("PYTEST_XDIST_WORKER") and SIDE == "worker":
            @pytest.fixture(autouse=True)
            def bogus(request):
                yield
                request.config.workerinput["dagorder_channel"].send(("bogus", None))
        elif SIDE == "controller":
            def pytest_runtest_logreport(report):
                if report.when == "call" and hasattr(report, "node"):
                    report.node.workerinput["dagorder_channel"].send(("bogus", None))
    """.replace("SIDE", repr(side)))
    make_modules(pytester, test_x=SHAPES_CHAIN)
    result = dagtester.run("-n", "1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = ("the worker could not read the controller: " if side == "controller" else "")
    result.stderr.fnmatch_lines([
        f"*pytest-dagorder: worker gw0: {said}a message of unknown kind 'bogus' "
        "on the dagorder channel*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()

# -- faults and stops -----------------------------------------------------------------

CRASH = """
def test_boom():
    mark("boom")
    os._exit(1)


@depends_on("test_boom")
def test_after_boom():
    mark("after_boom")


@depends_on("test_after_boom")
def test_after_after_boom():
    mark("after_after_boom")


@pytest.mark.parametrize("n", range(4))
def test_ok(n):
    mark(f"ok{n}", 0.05)
"""


def test_worker_crash_skips_dependents(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(pytester, test_crash=CRASH)
    result = dagtester.run("-n", "2", "-rs")
    result.assert_outcomes(passed=4, failed=1, skipped=2)
    out = result.stdout.str()
    assert "crashed" in out
    result.stdout.fnmatch_lines(
        [
            "*test_crash.py::test_boom*crashed*",
            "*prerequisite test_boom crashed its worker",
            "*prerequisite test_after_boom was skipped: test_boom crashed its worker",
        ]
    )
    assert set(read_log(pytester)) == {"boom", "ok0", "ok1", "ok2", "ok3"}


def test_a_crash_is_reported_before_the_skips_it_causes(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    """after_boom waits on boom's worker (handed out ahead); the crash still comes first."""
    make_modules(pytester, test_crash=CRASH)
    result = dagtester.run("-n", "2", "-v")
    result.assert_outcomes(passed=4, failed=1, skipped=2)
    result.stdout.fnmatch_lines([
        "*FAILED test_crash.py::test_boom*",
        "test_crash.py::test_after_boom SKIPPED*",
        "test_crash.py::test_after_after_boom SKIPPED*",
    ])


GW0_DIES_ONCE = """
import os
import pathlib

import pytest

@pytest.hookimpl({order})
def {hook}:
    flag = pathlib.Path(str({config}.rootpath)) / "gw0-died"
    if os.environ.get("PYTEST_XDIST_WORKER") == "gw0" and not flag.exists():
        flag.write_text("once")
        os._exit(1)
"""


@pytest.mark.parametrize(("order", "hook", "config"), [
    # In its collection: the plan comes from a worker that collected (gw1
    # or the replacement).
    ("", "pytest_collection_modifyitems(config, items)", "config"),
    # Once xdist sent its collection, before it could ship a plan: the
    # controller, which asks the first worker whose collection came in,
    # asks the next one (fails if that ask ends the session instead).
    ("trylast=True", "pytest_collection_finish(session)", "session.config"),
], ids=["while-collecting", "right-after-collecting"])
def test_a_crash_of_a_worker_at_the_start_is_survived(
        pytester: pytest.Pytester, dagtester: DagTester, order: str, hook: str,
        config: str) -> None:
    pytester.makeconftest(GW0_DIES_ONCE.format(order=order, hook=hook, config=config))
    make_modules(pytester, test_x=POLICY)
    result = dagtester.run("-n", "2", "-rs")
    assert (pytester.path / "gw0-died").exists()
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*replacing crashed worker gw0*",
                                 "SKIPPED * test_x.py:*: prerequisite test_a failed (assert 0)"])
    assert set(read_log(pytester)) == {"test_a", "test_c", "test_d"}
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_worker_crash_without_restarts_does_not_hang(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, test_crash=CRASH)
    result = dagtester.run("-n", "2", "--max-worker-restart=0")
    assert result.ret != 0
    assert result.duration < 60
    assert "after_boom" not in read_log(pytester)


def test_exitfirst_stops_the_run(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(
        pytester,
        test_x="""
        def test_fail():
            mark("fail", 0.2)
            assert 0


        @depends_on("test_fail")
        def test_dep():
            mark("dep")


        @pytest.mark.parametrize("n", range(12))
        def test_later(n):
            mark(f"later{n}", 0.1)
    """,
    )
    result = dagtester.run("-n", "2", "-x")
    # plain xdist ends a -x run with "Interrupted: stopping after 1 failures" (status 2)
    assert result.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 1
    ran = read_log(pytester)
    assert "dep" not in ran
    assert len(ran) < 14
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])


#: The controller (not a worker) writes FAILED once it has taken test_a's failed
#: report in: the run's own hook handles a report before any conftest's.
STOP_CONFTEST = """
    import pathlib

    FAILED = pathlib.Path(__file__).parent / "a-failed"
    ON_WORKER = []


    def pytest_configure(config):
        ON_WORKER.append(hasattr(config, "workerinput"))


    def pytest_runtest_logreport(report):
        if not ON_WORKER[0] and report.nodeid.endswith("::test_a") and report.failed:
            FAILED.write_text("")
"""


def test_on_failure_stop_under_xdist(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    pytester.makeconftest(textwrap.dedent(STOP_CONFTEST))
    make_modules(
        pytester,
        test_stop="""
        import pathlib

        FAILED = pathlib.Path(__file__).parent / "a-failed"


        def test_a():
            mark("a")
            assert 0


        @depends_on("test_a")
        def test_b():
            mark("b")


        def test_c():
            # Ends a second after the controller took test_a's failure in (the
            # wait bounded): the stop has reached this worker by then, and the
            # tests handed to it ahead after test_c are withdrawn.
            end = time.monotonic() + 60
            while not FAILED.exists() and time.monotonic() < end:
                time.sleep(0.02)
            mark("c", 1.0)


        @pytest.mark.parametrize("n", range(3))
        @depends_on("test_c")
        def test_later(n):
            mark(f"later{n}")
    """,
    )
    result = dagtester.run("-n", "2", "--dag-on-failure=stop", "-rs")
    result.assert_outcomes(failed=1, passed=1, skipped=4)
    assert set(read_log(pytester)) == {"a", "c"}
    result.stdout.fnmatch_lines(["*prerequisite test_a failed (assert 0)",
                                 "*run stopped after test_a failed"])


def test_plugin_loaded_explicitly_brings_xdist(
    pytester: pytest.Pytester, dagtester: DagTester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    make_modules(
        pytester,
        test_x="""
        def test_a():
            mark("a")


        @depends_on("test_a")
        def test_b():
            mark("b")


        def test_c():
            mark("c")
    """,
    )
    result = dagtester.run("-p", "dagorder", "-n", "2", "-v", "--strict-markers")
    result.assert_outcomes(passed=3)
    assert "scheduling tests via DependencyScheduling" in result.stdout.str()
    ran = read_log(pytester)
    assert_after(ran, [("a", "b")])
    assert len({r.pid for r in ran.values()}) >= 1
    assert os.getpid() not in {r.pid for r in ran.values()}


# -- affinity ------------------------------------------------------------------------

AFFINITY_CHAIN = """
BUILT = os.path.join(os.path.dirname(LOG), "built.log")
STATE = {}


def built(kind):
    with open(BUILT, "a") as f:
        f.write(kind + "\\n")


@pytest.fixture(scope="module")
def modfix():
    built("module")
    return {}


def test_gate():
    # Ends while the chain's worker runs busy tests: without affinity the
    # chain's second test would go to the worker that ran this one.
    mark("gate", 0.8)


class TestChain:
    store = {}

    @pytest.fixture(scope="class")
    @classmethod
    def clsfix(cls):
        built("class")
        return {}

    def test_1(self, modfix, clsfix):
        mark("chain1", 0.05)
        STATE["a"] = 1
        TestChain.store["b"] = 2
        modfix["c"] = 3
        clsfix["d"] = 4

    @depends_on("test_1", "test_affinity.py::test_gate")
    def test_2(self, modfix, clsfix):
        mark("chain2", 0.05)
        assert (STATE, TestChain.store, modfix, clsfix) == ({"a": 1}, {"b": 2}, {"c": 3}, {"d": 4})
        STATE["a"] = 10

    @depends_on("test_2")
    def test_3(self, modfix, clsfix):
        mark("chain3", 0.05)
        assert STATE == {"a": 10} and clsfix == {"d": 4} and modfix == {"c": 3}


@depends_on("TestChain::test_3")
def test_4(modfix):
    mark("chain4")
    assert STATE == {"a": 10} and modfix == {"c": 3}
"""

AFFINITY_BUSY = """
@pytest.mark.parametrize("n", range(8))
def test_busy(n):
    mark(f"busy{n}", 0.3)
"""


def test_affinity_keeps_chain_state_on_one_worker(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    make_modules(pytester, test_affinity=AFFINITY_CHAIN, test_busy=AFFINITY_BUSY)
    # One run: on four workers a chain of four split by chance would rarely
    # come together again (the suite runs this test on every CI pass).  The
    # gate makes the chain split without affinity: with --dag-affinity=none
    # this run fails (3 of 3 tried).
    result = dagtester.run("-n", "4")
    result.assert_outcomes(passed=13)
    built = sorted((pytester.path / "built.log").read_text().split())
    assert built == ["class", "module"], built
    ran = read_log(pytester)
    chain = [ran[f"chain{k}"] for k in range(1, 5)]
    assert len({r.pid for r in chain}) == 1, chain
    for a, b in itertools.pairwise(chain):
        assert b.start >= a.end
    assert len({ran[f"busy{n}"].pid for n in range(8)}) > 1


STATE_FREE = """
def test_root():
    mark("root", 0.05)


@depends_on("test_root")
def test_left():
    mark("left", 0.05)


@depends_on("test_root")
def test_right():
    mark("right", 0.05)
"""

STATE_GLOBAL = """
SEEN = []


def test_first():
    mark("first", 0.05)
    SEEN.append(os.getpid())


@depends_on("test_first")
def test_second():
    mark("second", 0.05)
    assert SEEN == [os.getpid()]
"""

STATE_FIXTURE = """
@pytest.fixture(scope="module")
def box():
    return {}


def test_put(box):
    mark("put", 0.05)
    box["pid"] = os.getpid()


@depends_on("test_put")
def test_read(box):
    mark("read", 0.05)
    assert box == {"pid": os.getpid()}
"""


STATE_SHOP = """
def test_stock(shop):
    mark("stock", 0.05)
    shop["gizmo"] = os.getpid()
"""

STATE_SHOP_READ = """
@depends_on("tests/test_shop.py::test_stock")
def test_listed(shop):
    mark("listed", 0.05)
    assert shop == {"gizmo": os.getpid()}


@depends_on("tests/test_free.py::test_root")
def test_unrelated(tmp_path):
    mark("unrelated", 0.05)
"""

SHOP_CONFTEST = """
import pytest


@pytest.fixture(scope="session")
def shop():
    return {}
"""


def test_default_affinity_keeps_every_declared_edge_in_one_process_in_serial_order(
        pytester: pytest.Pytester, dagtester: DagTester) -> None:
    """--dag-affinity=state: every declared edge keeps its tests together,
    whatever their source shows or their fixtures share (a session fixture
    they share is said, not decided on); --dag-explain says so, with each
    group's reasons and its tests in the order they run.  ``module`` keeps
    the in-module chains only."""
    dagtester.ini("testpaths = tests\n")
    pytester.mkdir("tests")
    (pytester.path / "tests" / "conftest.py").write_text(textwrap.dedent(SHOP_CONFTEST))
    make_modules(pytester, tests__test_free=STATE_FREE, tests__test_global=STATE_GLOBAL,
                 tests__test_fixture=STATE_FIXTURE, tests__test_shop=STATE_SHOP,
                 tests__test_shop_read=STATE_SHOP_READ, tests__test_busy=AFFINITY_BUSY)
    result = dagtester.run("-n", "2", "--dag-explain")
    result.assert_outcomes(passed=18)
    result.stdout.fnmatch_lines([
        "*affinity state (4 groups)*",
        "dagorder: 4 affinity groups keep 10 of 18 tests on one worker each, in serial "
        "order (every declared edge keeps its two tests in one process); --dag-explain: "
        "each group",
        "dagorder: group of tests/test_free.py::test_root (4 tests): edges from "
        "tests/test_free.py to tests/test_shop_read.py; edges inside tests/test_free.py; "
        "they run in this order, on one worker:",
        "    tests/test_free.py::test_root",
        "    tests/test_free.py::test_left",
        "    tests/test_free.py::test_right",
        "    tests/test_shop_read.py::test_unrelated",
        "dagorder: group of tests/test_shop.py::test_stock (2 tests): edges from "
        "tests/test_shop.py to tests/test_shop_read.py; its tests share session fixture "
        "'shop' of tests; they run in this order, on one worker:",
        "dagorder: no dependency left free*",
    ], consecutive=False)
    ran = read_log(pytester)
    for a, b in (("first", "second"), ("put", "read"), ("root", "left"), ("root", "right"),
                 ("stock", "listed"), ("root", "unrelated")):
        assert ran[a].pid == ran[b].pid and ran[b].start >= ran[a].end
    (pytester.path / LOG_NAME).unlink()
    result = dagtester.run("-n", "2", "--dag-affinity=module")
    result.assert_outcomes(passed=18)
    result.stdout.fnmatch_lines(["*affinity module (3 groups)*"])


# -- chains handed out ahead (short tests, default affinity) ----------------------------


def _fast_chain(length: int, fail_at: int) -> str:
    parts = []
    for j in range(length):
        deco = f'@depends_on("test_{j - 1}")\n' if j else ""
        body = "assert 0" if j == fail_at else f'mark("c{j}")'
        parts.append(f"{deco}def test_{j}():\n    {body}\n")
    return "\n\n".join(parts)


def test_fast_chain_handed_out_ahead_matches_the_serial_run(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    """Short tests make the controller send a group's chain ahead to its worker,
    which then skips what follows a failure itself: outcomes, reasons and counts
    must be exactly those of a serial run, and every test reported once."""
    make_modules(
        pytester,
        test_chain=_fast_chain(40, fail_at=15),
        test_busy1="\n".join(f"def test_{j}():\n    pass\n" for j in range(60)),
        test_busy2="\n".join(f"def test_{j}():\n    pass\n" for j in range(60)),
    )
    serial = dagtester.run("-p", "no:xdist", "--junitxml=serial.xml")
    serial.assert_outcomes(passed=135, failed=1, skipped=24)
    expected, _ = read_junit(pytester.path / "serial.xml")
    # module: the chain shares nothing, so only this rule makes it a group.
    result = dagtester.run("-n", "2", "--dag-affinity=module", "--junitxml=dist.xml")
    result.assert_outcomes(passed=135, failed=1, skipped=24)
    got, n_cases = read_junit(pytester.path / "dist.xml")
    assert n_cases == 160
    assert got == expected
    result.stdout.fnmatch_lines(["test_chain.py::test_15 failed: blocked 24 tests"])


def test_dist_loadgroup_is_scheduled_as_a_dag(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    """--dist loadgroup (often fixed in addopts for xdist_group) is taken over:
    names keep working although xdist appends "@group" to the node ids."""
    make_modules(
        pytester,
        test_g="""
        @pytest.mark.xdist_group("db")
        def test_create():
            mark("create")


        @pytest.mark.xdist_group("db")
        @depends_on("test_create")
        def test_use():
            mark("use")


        @depends_on("test_use")
        def test_report():
            mark("report")


        def test_free():
            mark("free")
    """,
    )
    result = dagtester.run("-n", "2", "--dist", "loadgroup", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*scheduling tests via DependencyScheduling*"])
    ran = read_log(pytester)
    assert ran["create"].pid == ran["use"].pid
    assert_after(ran, [("create", "use"), ("use", "report")])


STATED_CONFTEST = """
import pytest


@pytest.fixture(scope="session")
def client():
    return object()
"""


#: Eight more tests, none grouped, for a test that reads the plan only (the
#: groups --dag-explain lists): where no pid is compared, nothing needs them slow.
BUSY_QUICK = AFFINITY_BUSY.replace(', 0.3)', ')')


def test_the_user_states_what_is_shared_nothing_per_module_and_per_fixture(
        pytester: pytest.Pytester, dagtester: DagTester) -> None:
    """``dag_shares_nothing`` on a module frees its edges; ini
    ``dag_stateless_fixtures`` lifts no edge (no group rests on a fixture):
    the rest stays grouped, and --dag-explain lists the edge left free."""
    dagtester.ini("dag_stateless_fixtures = client\n")
    pytester.makeconftest(STATED_CONFTEST)
    make_modules(pytester, test_stated="""
        pytestmark = pytest.mark.dag_shares_nothing


        def test_root():
            mark("root", 0.05)


        @depends_on("test_root")
        def test_leaf():
            mark("leaf", 0.05)
    """, test_kept=STATE_GLOBAL, test_api="""
        def test_get(client):
            mark("get", 0.05)
    """, test_api_more="""
        @depends_on("test_api.py::test_get")
        def test_get_more(client):
            mark("get_more", 0.05)
    """, test_busy=BUSY_QUICK)
    result = dagtester.run("-n", "2", "--dag-explain")
    result.assert_outcomes(passed=14)
    result.stdout.fnmatch_lines([
        "*affinity state (2 groups)*",
        "dagorder: group of test_api.py::test_get (2 tests): edges from test_api.py to "
        "test_api_more.py; they run in this order, on one worker:",
        "dagorder: group of test_kept.py::test_first (2 tests): edges inside test_kept.py; "
        "they run in this order, on one worker:",
        "dagorder: 1 dependency left free*",
        "    test_stated.py::test_root -> test_stated.py::test_leaf",
    ], consecutive=False)
    serial = dagtester.run("-p", "no:xdist", "--dag-explain")
    serial.assert_outcomes(passed=14)
    serial.stdout.fnmatch_lines(["dagorder: serial run: every test runs in this process, *"])
    # Without the statements both are groups.
    (pytester.path / "test_stated.py").write_text(
        (pytester.path / "test_stated.py").read_text().replace(
            "pytestmark = pytest.mark.dag_shares_nothing", ""))
    dagtester.ini()
    result = dagtester.run("-n", "2")
    result.assert_outcomes(passed=14)
    result.stdout.fnmatch_lines(["*affinity state (3 groups)*"])
