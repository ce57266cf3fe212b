"""End to end: resource limits and tests that run alone, serially and under -n."""

from __future__ import annotations

import pytest
from helpers import Ran, make_modules, read_log
from support.dagtester import DagTester

pytestmark = pytest.mark.dag_modes("own")



def most_at_once(ran: list[Ran]) -> int:
    """The largest number of these intervals that overlap at one instant."""
    events = sorted([(r.start, 1) for r in ran] + [(r.end, -1) for r in ran],
                    key=lambda e: (e[0], e[1]))  # an end before a start at the same time
    now = best = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


def db_suite(n: int = 12, free: int = 12, sleep: float = 0.1) -> str:
    lines = []
    for k in range(n):
        lines += ["@pytest.mark.dag_resource('db')", f"def test_db{k}():",
                  f"    mark('db{k}', {sleep})", "", ""]
    for k in range(free):
        lines += [f"def test_free{k}():", f"    mark('free{k}', {sleep})", "", ""]
    return "\n".join(lines)


@pytest.mark.parametrize("limit", [None, 2])
def test_a_resource_limit_holds_across_workers(pytester: pytest.Pytester, dagtester: DagTester,
                                                limit: int | None) -> None:
    make_modules(pytester, test_db=db_suite())
    args = ["-n", "4", "--dag-affinity=none"]
    if limit is not None:
        args.append(f"--dag-limit=db={limit}")
    result = dagtester.run(*args)
    result.assert_outcomes(passed=24)
    ran = read_log(pytester)
    db = [r for name, r in ran.items() if name.startswith("db")]
    assert len(db) == 12
    assert most_at_once(db) <= (limit or 1)
    # The limit does not idle the other workers: free tests overlap resource ones.
    assert most_at_once(list(ran.values())) >= 3
    result.stdout.fnmatch_lines([f"dagorder: resource limits db={limit or 1}*"])


def test_resources_with_dependencies_and_groups_never_deadlock(
        pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(pytester, test_chain="""
        @pytest.mark.dag_resource("db")
        def test_a():
            mark("a", 0.05)


        @pytest.mark.dag_resource("db")
        @depends_on("test_a")
        def test_b():
            mark("b", 0.05)


        @depends_on("test_b")
        def test_c():
            mark("c", 0.05)


        @pytest.mark.dag_resource("db", "broker")
        @depends_on("test_c")
        def test_d():
            mark("d", 0.05)
    """, test_other="""
        @pytest.mark.dag_resource("broker")
        def test_x():
            mark("x", 0.05)


        @pytest.mark.dag_resource("db")
        @depends_on("test_x")
        def test_y():
            mark("y", 0.05)
    """)
    for affinity in ("module", "none"):
        (pytester.path / "ran.log").unlink(missing_ok=True)
        result = dagtester.run("-n", "2", f"--dag-affinity={affinity}")
        result.assert_outcomes(passed=6)
        ran = read_log(pytester)
        assert most_at_once([ran[k] for k in "abdy"]) == 1
        assert most_at_once([ran[k] for k in "dx"]) == 1


def test_serial_runs_accept_the_markers(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    make_modules(pytester, test_db=db_suite(2, 1, 0.0))
    result = dagtester.run("-p", "no:xdist", "--dag-limit", "db=2")
    result.assert_outcomes(passed=3)


@pytest.mark.parametrize("bad", ["db", "db=0", "db=-1", "db=x", "=2"])
def test_a_malformed_limit_is_a_usage_error(
    pytester: pytest.Pytester, dagtester: DagTester, bad: str
) -> None:
    make_modules(pytester, test_db=db_suite(1, 0, 0.0))
    result = dagtester.run("-n", "2", f"--dag-limit={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--dag-limit {bad!r} is not valid; write NAME=N*"])
    assert not (pytester.path / "ran.log").exists()


MODES = pytest.mark.parametrize("mode", [["-n", "2"], ["-p", "no:xdist"]],
                                ids=["xdist", "serial"])


@MODES
def test_a_limit_no_test_uses_is_a_warning(
    pytester: pytest.Pytester, dagtester: DagTester, mode: list[str]
) -> None:
    make_modules(pytester, test_db=db_suite(2, 0, 0.0))
    result = dagtester.run(*mode, "--dag-limit=db=2", "--dag-limit=dbb=3")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "dagorder: warning: no test uses 'dbb' (check the name in --dag-limit / dag_limits)"])
    if mode[0] == "-n":  # serially a limit changes nothing: only the warning is written
        result.stdout.fnmatch_lines(["dagorder: resource limits db=2"])


@MODES
def test_a_limit_in_a_suite_without_resources_is_the_same_warning(
        pytester: pytest.Pytester, dagtester: DagTester, mode: list[str]) -> None:
    make_modules(pytester, test_x=db_suite(0, 2, 0.0) + (
        '@depends_on("test_free0")\ndef test_after():\n    mark("after")\n'))
    result = dagtester.run(*mode, "--dag-limit=unused=2")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "dagorder: warning: no test uses 'unused' (check the name in --dag-limit / dag_limits)"])
    assert "resource limits" not in result.stdout.str()


def test_the_ini_option_gives_limits_too(pytester: pytest.Pytester, dagtester: DagTester) -> None:
    dagtester.ini("dag_limits =\n    db=3\n")
    make_modules(pytester, test_db=db_suite(2, 0, 0.0))
    result = dagtester.run("-n", "2")
    result.stdout.fnmatch_lines(["dagorder: resource limits db=3*"])


@pytest.mark.parametrize("extra", [["-n", "2"], ["-p", "no:xdist"]], ids=["xdist", "serial"])
def test_a_malformed_marker_is_a_collection_error(pytester: pytest.Pytester, dagtester: DagTester,
                                                  extra: list[str]) -> None:
    make_modules(pytester, test_bad="""
        @pytest.mark.dag_resource()
        def test_a():
            mark("a")


        @pytest.mark.dag_resource(3)
        def test_b():
            mark("b")
    """)
    result = dagtester.run(*extra)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "*@pytest.mark.dag_resource on test_bad.py::test_a: name one or more resources*",
        "*@pytest.mark.dag_resource on test_bad.py::test_b: 3 is not a resource name*",
    ])
    assert not (pytester.path / "ran.log").exists()


@pytest.mark.parametrize("affinity", ["module", "none"])
def test_an_exclusive_test_runs_alone(
    pytester: pytest.Pytester, dagtester: DagTester, affinity: str
) -> None:
    make_modules(pytester, test_x=db_suite(4, 8, 0.1) + """

@pytest.mark.dag_exclusive
def test_alone():
    mark("alone", 0.2)


@depends_on("test_free0")
@pytest.mark.dag_exclusive
def test_alone_after():
    mark("alone_after", 0.1)


@depends_on("test_alone_after")
def test_after_alone():
    mark("after_alone", 0.1)
""")
    result = dagtester.run("-n", "4", f"--dag-affinity={affinity}", "--dag-limit=db=2")
    result.assert_outcomes(passed=15)
    ran = read_log(pytester)
    for name in ("alone", "alone_after"):
        lone = ran[name]
        overlapping = [r.name for r in ran.values() if r.name != name
                       and r.start < lone.end and lone.start < r.end]
        assert overlapping == [], (name, overlapping)
    assert most_at_once([r for n, r in ran.items() if n.startswith("db")]) <= 2
    result.stdout.fnmatch_lines(["dagorder: resource limits db=2",
                                 "dagorder: 2 tests run alone (dag_exclusive)*"])


@MODES
def test_an_exclusive_test_without_resources_gets_no_limits_line(
        pytester: pytest.Pytester, dagtester: DagTester, mode: list[str]) -> None:
    make_modules(pytester, test_x="""
        @pytest.mark.dag_exclusive
        def test_alone():
            mark("alone")


        def test_other():
            mark("other")
    """)
    result = dagtester.run(*mode)
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "resource limits" not in out and "warning" not in out
    if mode[0] == "-n":
        result.stdout.fnmatch_lines(["dagorder: 1 test run alone (dag_exclusive)*"])
