"""Every sentence users read about skips, stops and the summary, pinned in one table.

The texts come from one module (``pytest_dagorder.wording``); a change to one
of them shows here first, next to the sentence users saw before.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_dagorder import wording

CASES: list[tuple[Callable[[], str], str]] = [
    (lambda: wording.prerequisite_ended("test_a", "failed"), "prerequisite test_a failed"),
    (lambda: wording.prerequisite_ended("test_a", "error"), "prerequisite test_a had an error"),
    (lambda: wording.prerequisite_ended("test_a", "skipped"), "prerequisite test_a was skipped"),
    (lambda: wording.prerequisite_ended("test_a", "xfailed"), "prerequisite test_a xfailed"),
    (lambda: wording.prerequisite_ended("test_a", "crashed"),
     "prerequisite test_a crashed its worker"),
    (lambda: wording.prerequisite_ended("test_a", "deselected"),
     "prerequisite test_a was deselected"),
    (lambda: wording.prerequisite_ended("test_a", "not run"), "prerequisite test_a did not run"),
    (lambda: wording.prerequisite_ended("fetch", "cancelled"), "prerequisite fetch was cancelled"),
    (lambda: wording.prerequisite_skipped("test_b", "test_a", "failed"),
     "prerequisite test_b was skipped: test_a failed"),
    (lambda: wording.prerequisite_skipped_for("test_b", "run stopped"),
     "prerequisite test_b was skipped: run stopped"),
    (lambda: wording.stopped_after("test_a", "failed"), "run stopped after test_a failed"),
    (lambda: wording.STOPPED, "run stopped"),
    (lambda: wording.CANCELLED, "cancelled"),
    (lambda: "prerequisite test_z was deselected" + wording.DESELECTED_HINT,
     "prerequisite test_z was deselected; add --dag-with-prerequisites to run it"),
    (lambda: wording.not_run_yet("t.py::test_a"),
     "prerequisite t.py::test_a has not run yet (tests were reordered)"),
    (lambda: wording.SUMMARY_TITLE, "blocked by prerequisites (pytest-dagorder)"),
    (lambda: wording.blocked_line("t.py::test_a", "failed", 1),
     "t.py::test_a failed: blocked 1 test"),
    (lambda: wording.blocked_line("t.py::test_a", "error", 3),
     "t.py::test_a error: blocked 3 tests"),
    (lambda: wording.listed("t.py::test_b"), "  t.py::test_b"),
    (lambda: wording.not_started_line("run stopped after test_a failed", 2),
     "run stopped after test_a failed: 2 tests not started"),
    (lambda: wording.collection_errors(1), "1 error during collection"),
    (lambda: wording.prerequisite_module_skipped("t.py", "could not import 'x'"),
     "prerequisite module t.py was skipped: could not import 'x'"),
    (lambda: wording.target_uncollectable("h.py::test_x", "h.py", "SystemExit: boom"),
     "target 'h.py::test_x' is in h.py, which cannot be collected (SystemExit: boom); "
     "fix that file or the target"),
    (lambda: wording.some_of(["a", "b", "c", "d"]), "a, b, c, d"),
    (lambda: wording.some_of(["a", "b", "c", "d", "e"]), "a, b, c and 2 more"),
    (lambda: wording.pulled_back_line(2, 4),
     "dagorder: 2 prerequisites pulled back into the run (--dag-with-prerequisites): "
     "4 tests in all"),
    (lambda: wording.pulled_back_line(1, 1),
     "dagorder: 1 prerequisite pulled back into the run (--dag-with-prerequisites): "
     "1 test in all"),
    (lambda: wording.collection_errors(2), "2 errors during collection"),
    (lambda: wording.depends_not_passed("test_b", "test_a", " (call failed)"),
     "test_b depends on test_a, which did not pass (call failed)"),
    (lambda: wording.depends_no_test("test_b", "test_x", "module"),
     "test_b depends on test_x, which names no test of this run marked with "
     "@pytest.mark.dependency in its module scope"),
    (lambda: wording.depends_other_process("test_b", "test_a", "module"),
     "test_b depends on test_a, which did not run in this worker process before it: a "
     "runtime depends() sees only tests of test_b's own affinity group "
     "(--dag-affinity=module) that an edge runs first; declare the dependency with "
     "@pytest.mark.dependency(depends=[...]) to have it scheduled"),
    (lambda: wording.depends_not_run_yet("test_b", "test_a"),
     "test_b depends on test_a, which has not run yet: a runtime depends() does not order "
     "tests; declare the dependency with @pytest.mark.dependency(depends=[...]) to have it "
     "run first"),
    (lambda: wording.depends_unmarked("test_b", "'test_a'"),
     "test_b depends on 'test_a', which is not marked with @pytest.mark.dependency (mark "
     "it, or set automark_dependency = true)"),
    (lambda: wording.limits_header({"db": 2}, ["db", "broker"], []),
     "dagorder: resource limits db=2, broker=1"),
    (lambda: wording.limits_header({"dbb": 2}, [], ["dbb"]),
     "dagorder: resource limits none in use; warning: no test uses 'dbb' (check the name "
     "in --dag-limit / dag_limits)"),
    (lambda: wording.exclusive_header(1),
     "dagorder: 1 test run alone (dag_exclusive): nothing else runs meanwhile"),
    (lambda: wording.runtime_depends_header(2),
     "dagorder: runtime depends() in 2 modules: each runs on one worker, in collection order"),
    (lambda: wording.serial_header(4, 3, 2),
     "dagorder: 4 tests, 3 dependencies, longest chain 2 (serial)"),
    (lambda: wording.xdist_header(5, 4, 3, "module", 2, 0, 5),
     "dagorder: 5 tests, 4 dependencies, longest chain 3; xdist scheduling, affinity "
     "module (2 groups); critical path by test counts"),
    (lambda: wording.xdist_header(5, 4, 3, "none", 0, 5, 6),
     "dagorder: 5 tests, 4 dependencies, longest chain 3; xdist scheduling, affinity "
     "none (0 groups); critical path by recorded durations of 5/6 tests"),
]


@pytest.mark.parametrize(("make", "expected"), CASES, ids=[e[:40] for _, e in CASES])
def test_each_sentence_reads_as_users_know_it(make: Callable[[], str], expected: str) -> None:
    assert make() == expected


def test_every_outcome_that_can_block_has_a_phrase() -> None:
    from pytest_dagorder.scheduler import OUTCOMES

    assert set(wording.PHRASES) == (OUTCOMES - {"passed"}) | {"cancelled"}
