"""Never hang silently: the stall report (ini ``dag_stall_report``) says which test each
worker runs, and where it waits.

The stuck test here sleeps four times the report's delay and then passes:
the report must come while it sleeps, name the worker, the test and the
line it waits on, come once, and leave the run to end as it would.
"""

from __future__ import annotations

import re

import helpers
import pytest
from support.dagtester import DagTester

#: Each test gives ``-n`` or none itself; no ini unless the test writes one.
pytestmark = [pytest.mark.dag_modes("own"), pytest.mark.dagtester(ini=None, timeout=120)]

#: A chain whose second test sleeps past the report's delay (1 s), then passes: the
#: report comes within two delays (one more if the worker's dump is late), and
#: the rest of the sleep is where a second report would show.
STUCK = """
    def test_first():
        mark("test_first")


    @depends_on("test_first")
    def test_stuck():
        time.sleep(4)  # the line the stack shows


    def test_other():
        mark("test_other")
"""

HEAD = "stall (pytest-dagorder)"


@pytest.fixture(autouse=True)
def _fresh_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """These runs start fresh worker interpreters (``helpers.forked_workers``):
    what they check is the stacks a worker dumps, and a forked worker has a
    thread of the fork server's (its watch on the launcher) that a fresh one
    has not."""
    monkeypatch.setattr(helpers, "fresh_workers", "stack dumps")


def stuck_line(dagtester: DagTester) -> int:
    lines = (dagtester.path / "test_m.py").read_text().splitlines()
    return next(n for n, text in enumerate(lines, 1) if "time.sleep(4)" in text)


def reports_naming(result: pytest.RunResult, test: str) -> list[int]:
    """Where a stall report starts whose worker lines name ``test`` as running."""
    out = result.outlines
    starts = [k for k, line in enumerate(out) if HEAD in line]
    found = []
    for n, k in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(out)
        if any(re.match(rf"gw\d: running {re.escape(test)} since ", line) for line in out[k:end]):
            found.append(k)
    return found


def test_a_stuck_test_under_xdist_is_reported_once_with_its_worker_and_stack(
        dagtester: DagTester) -> None:
    # The delay from the ini file; the tests below give it with -o.
    dagtester.pytester.makeini("[pytest]\ndag_stall_report = 1\n")
    dagtester.modules(test_m=STUCK)
    result = dagtester.run("-n", "2")
    result.assert_outcomes(passed=3)  # the report waits; it ends nothing
    found = reports_naming(result, "test_m.py::test_stuck")
    assert len(found) == 1, result.stdout.str()
    report = "\n".join(result.outlines[found[0]:])
    assert re.search(r"stack of gw\d \(every thread but the watch's", report), report
    assert "dagorder-stall-dumps" not in report and "in _watch" not in report, report
    where = f'test_m.py", line {stuck_line(dagtester)} in test_stuck'
    assert where in report, report


def test_a_failed_test_before_leaves_the_workers_stack_dumps_on(
        dagtester: DagTester) -> None:
    # pytest's faulthandler plugin cancels faulthandler's timer at every
    # failed test (the plugin's watch is no such timer); the group keeps the
    # failure on the stuck test's worker.
    grouped = """
    @pytest.mark.xdist_group("one")
    def test_fails():
        assert False


    @pytest.mark.xdist_group("one")
    def test_first():
        mark("test_first")


    @pytest.mark.xdist_group("one")
    @depends_on("test_first")
    def test_stuck():
        time.sleep(4)  # the line the stack shows


    def test_other():
        mark("test_other")
    """
    dagtester.modules(test_m=grouped)
    result = dagtester.run("-n", "2", "-o", "dag_stall_report=1")
    result.assert_outcomes(passed=3, failed=1)
    found = reports_naming(result, "test_m.py::test_stuck")
    assert len(found) == 1, result.stdout.str()
    report = "\n".join(result.outlines[found[0]:])
    assert f'test_m.py", line {stuck_line(dagtester)} in test_stuck' in report, report


def test_zero_turns_the_report_off(dagtester: DagTester) -> None:
    dagtester.pytester.makeini("[pytest]\ndag_stall_report = 1\n")
    dagtester.modules(test_m=STUCK)
    result = dagtester.run("-n", "2", "-o", "dag_stall_report=0")
    result.assert_outcomes(passed=3)
    assert HEAD not in result.stdout.str()


def test_with_pytests_faulthandler_timeout_both_show_the_stack(dagtester: DagTester) -> None:
    """pytest's timer dumps to stderr, the report has the worker's stack as well."""
    dagtester.pytester.makeini("[pytest]\nfaulthandler_timeout = 2\n")
    dagtester.modules(test_m=STUCK)
    result = dagtester.run("-n", "2", "-o", "dag_stall_report=1")
    result.assert_outcomes(passed=3)
    found = reports_naming(result, "test_m.py::test_stuck")
    assert len(found) == 1, result.stdout.str()
    report = "\n".join(result.outlines[found[0]:])
    assert f'test_m.py", line {stuck_line(dagtester)} in test_stuck' in report, report
    assert "Timeout (0:00:02)!" in result.stderr.str(), result.stderr.str()


def test_a_worker_busy_in_deep_calls_survives_the_dumps(dagtester: DagTester) -> None:
    """The stacks are read while the watch holds the interpreter: faulthandler's
    watchdog, which reads them without it, crashed such a worker on CPython 3.11
    within a few dumps (a dump every tenth of a second here)."""
    busy = """
    def deep(n):
        return 0 if n == 0 else deep(n - 1) + 1


    def test_first():
        mark("test_first")


    @depends_on("test_first")
    def test_busy():
        end = time.monotonic() + 3
        while time.monotonic() < end:
            deep(400)
    """
    dagtester.modules(test_m=busy)
    result = dagtester.run("-n", "2", "-o", "dag_stall_report=0.1")
    result.assert_outcomes(passed=2)
    found = reports_naming(result, "test_m.py::test_busy")
    assert found, result.stdout.str()
    report = "\n".join(result.outlines[found[0]:])
    assert "in test_busy" in report, report


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_bad_value_is_a_usage_error_before_anything_runs(
        dagtester: DagTester, value: str) -> None:
    dagtester.modules(test_m=STUCK)
    result = dagtester.run("-o", f"dag_stall_report={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*ini dag_stall_report {value!r} is not valid; give a number "
                                 "of seconds*"])
    assert not (dagtester.path / "ran.log").exists()


@pytest.mark.parametrize("args", [("-n", "2"), ()], ids=["xdist", "serial"])
def test_a_suite_that_declares_nothing_is_not_watched(
        dagtester: DagTester, args: tuple[str, ...]) -> None:
    dagtester.modules(test_m=STUCK.replace('@depends_on("test_first")', ""))
    why = "" if args else "the serial report goes to descriptor 2"
    result = dagtester.run(*args, "-o", "dag_stall_report=1", own_process=why)
    result.assert_outcomes(passed=3)
    assert HEAD not in result.stdout.str() + result.stderr.str()


def test_a_stuck_test_run_serially_is_reported_once_a_quiet_spell_with_its_stack(
        dagtester: DagTester) -> None:
    """Two quiet spells with a test reporting between them: one report each (none
    repeated while a test stays stuck), with the running test and its stack; the
    first line never claims it is said once; the watch's thread is not shown."""
    twice = STUCK.replace("        time.sleep(4)  # the line the stack shows", (
        "        time.sleep(4)  # the line the stack shows\n\n\n"
        "    @depends_on(\"test_stuck\")\n"
        "    def test_stuck_again():\n"
        "        time.sleep(4)"))
    dagtester.modules(test_m=twice)
    result = dagtester.run("-o", "dag_stall_report=1",
                           own_process="the report is written to descriptor 2")
    result.assert_outcomes(passed=4)
    err = result.stderr.str()
    assert err.count(HEAD) == 2, err
    assert "serial: running test_m.py::test_stuck since " in err
    assert "serial: running test_m.py::test_stuck_again since " in err
    assert "said once" not in err, err
    assert "said again only after another test reports" in err, err
    assert "dagorder-stall-watch" not in err and "in _watch" not in err, err
    assert "features/stall.py" not in err.replace("\\", "/"), err
    assert f'test_m.py", line {stuck_line(dagtester)} in test_stuck' in err

