"""Every sentence users read about skips, stops and the summary, pinned in one table.

The texts about the graph come from ``pytest_dagorder.core.wording``, and those
that name pytest's options, xdist or another plugin from the layers that say them
(``options/wording.py``, ``drivers/distributed/wording.py``, ``declaring/foreign_wording.py``); a
change to one of them shows here first, next to the sentence users saw before.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from pytest_dagorder.core import wording
from pytest_dagorder.declaring import foreign_wording as foreign_wording
from pytest_dagorder.drivers.distributed import wording as xdist_wording
from pytest_dagorder.options import wording as options_wording

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
    (lambda: wording.prerequisite_ended("test_a", "failed", "KeyError: 'ann'"),
     "prerequisite test_a failed (KeyError: 'ann')"),
    (lambda: wording.prerequisite_skipped("test_b", "test_a", "error", "fixture broke"),
     "prerequisite test_b was skipped: test_a had an error (fixture broke)"),
    (lambda: wording.prerequisite_skipped_for("test_b", "run stopped"),
     "prerequisite test_b was skipped: run stopped"),
    (lambda: wording.stopped_after("test_a", "failed"), "run stopped after test_a failed"),
    (lambda: wording.STOPPED, "run stopped"),
    (lambda: wording.CANCELLED, "cancelled"),
    (lambda: "prerequisite test_z was deselected" + options_wording.DESELECTED_HINT,
     "prerequisite test_z was deselected; add --dag-with-prerequisites to run it"),
    (lambda: wording.not_run_yet("t.py::test_a"),
     "prerequisite t.py::test_a has not run yet (tests were reordered)"),
    (lambda: options_wording.SUMMARY_TITLE, "blocked by prerequisites (pytest-dagorder)"),
    (lambda: wording.blocked_line("t.py::test_a", "failed", 1),
     "t.py::test_a failed: blocked 1 test"),
    (lambda: wording.blocked_line("t.py::test_a", "error", 3),
     "t.py::test_a error: blocked 3 tests"),
    (lambda: wording.listed("t.py::test_b"), "  t.py::test_b"),
    (lambda: wording.not_started_line("run stopped after test_a failed", 2),
     "run stopped after test_a failed: 2 tests not started"),
    (lambda: options_wording.collection_errors(1), "1 error during collection"),
    (lambda: wording.prerequisite_module_skipped("t.py", "could not import 'x'"),
     "prerequisite module t.py was skipped: could not import 'x'"),
    (lambda: wording.target_uncollectable("h.py::test_x", "h.py", "SystemExit: boom"),
     "target 'h.py::test_x' is in h.py, which cannot be collected (SystemExit: boom); "
     "fix that file or the target"),
    (lambda: wording.some_of(["a", "b", "c", "d"]), "a, b, c, d"),
    (lambda: wording.some_of(["a", "b", "c", "d", "e"]), "a, b, c and 2 more"),
    (lambda: options_wording.pulled_back_line(2, 4),
     "dagorder: 2 prerequisites pulled back into the run (--dag-with-prerequisites): "
     "4 tests in all"),
    (lambda: options_wording.pulled_back_line(1, 1),
     "dagorder: 1 prerequisite pulled back into the run (--dag-with-prerequisites): "
     "1 test in all"),
    (lambda: options_wording.collection_errors(2), "2 errors during collection"),
    (lambda: foreign_wording.depends_not_passed("test_b", "test_a", " (call failed)"),
     "test_b depends on test_a, which did not pass (call failed)"),
    (lambda: foreign_wording.depends_no_test("test_b", "test_x", "module"),
     "test_b depends on test_x, which names no test of this run marked with "
     "@pytest.mark.dependency in its module scope"),
    (lambda: foreign_wording.depends_other_process("test_b", "test_a", "module"),
     "test_b depends on test_a, which did not run in this worker process before it: a "
     "runtime depends() sees only tests of test_b's own affinity group "
     "(--dag-affinity=module) that an edge runs first; declare the dependency with "
     "@pytest.mark.dependency(depends=[...]) to have it scheduled"),
    (lambda: foreign_wording.depends_not_run_yet("test_b", "test_a"),
     "test_b depends on test_a, which has not run yet: a runtime depends() does not order "
     "tests; declare the dependency with @pytest.mark.dependency(depends=[...]) to have it "
     "run first"),
    (lambda: foreign_wording.depends_unmarked("test_b", "'test_a'"),
     "test_b depends on 'test_a', which is not marked with @pytest.mark.dependency (mark "
     "it, or set automark_dependency = true)"),
    (lambda: wording.limits_header({"db": 2}, ["db", "broker"]),
     "dagorder: resource limits db=2, broker=1"),
    (lambda: options_wording.unused_limits_warning(["dbb"]),
     "dagorder: warning: no test uses 'dbb' (check the name "
     "in --dag-limit / dag_limits)"),
    (lambda: options_wording.exclusive_header(1),
     "dagorder: 1 test run alone (dag_exclusive): nothing else runs meanwhile"),
    (lambda: foreign_wording.runtime_depends_header(2),
     "dagorder: runtime depends() in 2 modules: each runs on one worker, in collection order"),
    (lambda: options_wording.kept_whole_header("load", 2),
     "dagorder: 2 documents (files of non-Python test items): each runs on one worker, "
     "in collection order"),
    (lambda: options_wording.kept_whole_header("loadfile", 1),
     "dagorder: 1 file: each runs on one worker, in collection order"),
    (lambda: options_wording.kept_whole_header("loadscope", 3),
     "dagorder: 3 scopes (classes, modules): each runs on one worker, in collection order"),
    (lambda: xdist_wording.past_time_limit(2.0),
     "past its pytest-timeout limit of 2 s, whose thread method ends the process"),
    (lambda: xdist_wording.dist_refused("each", "t.py::test_b"),
     "--dist each cannot honour depends_on/run_after declarations (t.py::test_b "
     "declares one): it runs every test "
     "once on every worker, while a dependency graph runs each test once, after its "
     "prerequisites; use --dist load, loadgroup, loadfile, loadscope or worksteal, or "
     "run with -p no:dagorder for plain xdist"),
    (lambda: options_wording.group_cost(3.1, 14.2, 13.9, 10.8,
                                [(wording.group_name("t.py::test_a", None), 40, 9.8)]),
     "dagorder: affinity groups cost at least 3.10 s of this 14.20 s run (no schedule "
     "beats 13.90 s with them, 10.80 s without);\n  on the critical path: the group of "
     "t.py::test_a (40 tests, 9.80 s).  --dag-find-missing learns which of their edges "
     "a dependent needs; if these tests share no process state, --dag-affinity=none (or "
     "dag.publish for what they pass on) lifts it"),
    # A group a fixture instance holds together: none would split it, never advised.
    (lambda: options_wording.group_cost(3.1, 14.2, 13.9, 10.8,
                                [(wording.group_name("t.py::test_a", None), 40, 9.8)],
                                ["module fixture 'index' of t.py"]),
     "dagorder: affinity groups cost at least 3.10 s of this 14.20 s run (no schedule "
     "beats 13.90 s with them, 10.80 s without);\n  on the critical path: the group of "
     "t.py::test_a (40 tests, 9.80 s).  --dag-find-missing learns which of their edges "
     "a dependent needs; module fixture 'index' of t.py holds tests of a group together"),
    (lambda: wording.serial_header(4, 3, 2),
     "dagorder: 4 tests, 3 dependencies, longest chain 2 (serial)"),
    (lambda: options_wording.xdist_header(5, 4, 3, "module", 2, 0, 5),
     "dagorder: 5 tests, 4 dependencies, longest chain 3; xdist scheduling, affinity "
     "module (2 groups); critical path by test counts"),
    (lambda: options_wording.xdist_header(5, 4, 3, "none", 0, 5, 6),
     "dagorder: 5 tests, 4 dependencies, longest chain 3; xdist scheduling, affinity "
     "none (0 groups); critical path by recorded durations of 5/6 tests"),
    # dag.publish / dag.result
    (lambda: wording.publish_bad_key("test_a", 3), "test_a publishes 3: a key must be a "
     "non-empty str"),
    (lambda: wording.publish_twice("test_a", "k"),
     "test_a publishes 'k' twice; publish each key once per test"),
    (lambda: wording.publish_bad_type("test_a", "k", "value[0]", "datetime.date"),
     "test_a publishes 'k': value[0] is a datetime.date, which cannot be sent to another "
     "process; publish str, bytes, int, float, complex, bool, None, or lists, tuples, dicts "
     "and sets of those"),
    (lambda: wording.publish_int_range("test_a", "k", "value[1]", -(2**31)),
     "test_a publishes 'k': value[1] is an int below -2147483648, which cannot be sent to "
     "another process; publish it as a str"),
    (lambda: wording.publish_not_utf8("test_a", "k", "value"),
     "test_a publishes 'k': value is a str that cannot be encoded as UTF-8 (a lone "
     "surrogate); publish bytes instead"),
    (lambda: wording.publish_cycle("test_a", "k", "value"),
     "test_a publishes 'k': value contains itself; publish a tree of values"),
    (lambda: wording.publish_too_deep("test_a", "k", 100),
     "test_a publishes 'k': the value is nested more than 100 levels deep"),
    (lambda: wording.publish_value_too_big("test_a", "k", 2_000_000, 1024 * 1024),
     "test_a publishes 'k': 2,000,000 bytes, over the limit of 1 MiB per value; publish an "
     "id or a file path instead"),
    (lambda: wording.publish_test_too_big("test_a", "k", 5_000_000, 4 * 1024 * 1024),
     "test_a publishes 'k': its values would total 5,000,000 bytes, over the limit of 4 MiB "
     "per test; publish ids or file paths instead"),
    (lambda: options_wording.result_unknown("test_b", "test_x"),
     "test_b reads dag.result('test_x'): it names no test of this run; name a test it "
     "depends on (a test name, Class::test, a node id or the function)"),
    (lambda: options_wording.result_ambiguous("test_b", "test_p", ["test_p[1]", "test_p[2]"]),
     "test_b reads dag.result('test_p'), which matches 2 tests (test_p[1], test_p[2]); pick "
     "one instance, e.g. dag.result('test_p[1]')"),
    (lambda: options_wording.result_not_prerequisite("test_b", "test_a"),
     "test_b reads the results of test_a, which is not one of its prerequisites: it may "
     "still be running; declare @depends_on('test_a') on test_b (directly or through "
     "another prerequisite)"),
    (lambda: wording.result_no_key("test_b", "test_a", "k", ["x", "y"]),
     "test_b reads 'k' from test_a, which published only 'x', 'y'"),
    (lambda: wording.result_no_key("test_b", "test_a", "k", []),
     "test_b reads 'k' from test_a, which published nothing (or did not pass)"),
    (lambda: options_wording.result_not_requested("test_b"),
     "test_b got the dag fixture from request.getfixturevalue(); request it as an argument "
     "of the test (or of a fixture the test uses) so that its prerequisites' results are "
     "sent ahead of it"),
    (lambda: options_wording.result_timeout("test_b", 60.0),
     "test_b: the results of its prerequisites did not arrive from the xdist controller "
     "within 60 s"),
    (lambda: options_wording.result_no_driver("test_b"),
     "test_b uses the dag fixture, but pytest-dagorder does not run this session (plugin "
     "disabled, or the worker was not started by its controller)"),
    (lambda: options_wording.published_line("t.py::test_a", ["x", "y"]), "t.py::test_a: x, y"),
    (lambda: options_wording.PUBLISHED_TITLE, "published results, keys only (pytest-dagorder)"),
    (lambda: options_wording.shard_spec_invalid("0/4"),
     "--dag-shard '0/4' is not valid; write K/N with N a whole number of at least 1 and K "
     "from 1 to N, e.g. --dag-shard 2/4"),
    # --dag-explain: a test's moves
    (lambda: wording.move("free", None, "gw0", None), "ready at the start (no prerequisite)"),
    (lambda: wording.move("released", "test_a", None, None), "released by test_a"),
    (lambda: wording.move("held", "test_a", "gw0", None), "held on gw0 for test_a"),
    (lambda: wording.move("put back", None, "gw1", None), "put back (gw1 left)"),
    (lambda: wording.move("started", None, "gw1", None, 3),
     "started on gw1 after 3 tests started on other workers"),
    (lambda: wording.move("started", None, None, None), "started"),
    (lambda: wording.move("ended", None, "gw0", "passed"), "passed on gw0"),
    (lambda: wording.move("ended", None, None, "error"), "had an error"),
    (lambda: wording.move("skipped", "test_a", None, "prerequisite test_a failed"),
     "skipped because prerequisite test_a failed"),
    (lambda: wording.move("failed check", "test_a", None, "prerequisite test_a failed"),
     "failed without running because prerequisite test_a failed"),
    (lambda: wording.history_line("t.py::test_b", ["released by test_a", "started"]),
     "t.py::test_b: released by test_a; started"),
    (lambda: wording.NOTHING_TO_EXPLAIN,
     "dagorder: no test was skipped, put back or kept waiting for its group's worker"),
    (lambda: options_wording.EXPLAINED_TITLE,
     "why tests waited or did not run (pytest-dagorder --dag-explain)"),
    (lambda: ("started on gw1 after 2 tests started on other workers"
              + options_wording.FOR_ITS_GROUP),
     "started on gw1 after 2 tests started on other workers (kept for its affinity group's "
     "worker)"),
    (lambda: wording.story_declared(["test_a", "test_b"], ["test_c"], 2),
     "declared: test_a, test_b must pass first; runs after test_c; needed by 2 tests"),
    (lambda: wording.story_declared([], [], 0), "declared: no prerequisite"),
    (lambda: wording.story_group("the group of t.py::test_a", 3),
     "runs with the group of t.py::test_a (3 tests) on one worker, in serial order"),
    (lambda: wording.story_step("free", None, None, None, None), "ready at the start"),
    (lambda: wording.story_step("released", "test_a", "passed", None, None),
     "ready because test_a passed"),
    (lambda: wording.story_step("released", "test_a", "failed", None, None),
     "ready because test_a failed"),
    (lambda: wording.story_step("held", "test_a", None, "gw0", None),
     "sent to gw0 ahead, to start there the moment test_a ends"),
    (lambda: wording.story_step("started", None, None, "gw1", None, 2),
     "sent to gw1, after 2 tests started on other workers (kept for its group's worker)"),
    (lambda: wording.story_step("started", None, None, None, None), "started"),
    (lambda: wording.story_step("put back", None, None, "gw1", None), "put back: gw1 left"),
    (lambda: wording.story_step("ended", None, None, "gw1", "error", why="boom"),
     "had an error on gw1: boom"),
    (lambda: wording.story_step("skipped", "test_a", None, None, "prerequisite test_a failed"),
     "skipped because prerequisite test_a failed"),
    (lambda: options_wording.story_title("t.py::test_b"),
     "the story of t.py::test_b (pytest-dagorder --dag-explain)"),
    (lambda: options_wording.explain_unknown("t.py::test_bb", ["t.py::test_b"]),
     "--dag-explain='t.py::test_bb' names no selected test; did you mean 't.py::test_b'? "
     "(pytest --collect-only -q lists the node ids)"),
    (lambda: options_wording.explain_not_a_test("t.py"),
     "--dag-explain='t.py' is not a test id; name one test as path::name, or give "
     "--dag-explain alone to explain the whole run"),
]


@pytest.mark.parametrize(("make", "expected"), CASES, ids=[e[:40] for _, e in CASES])
def test_each_sentence_reads_as_users_know_it(make: Callable[[], str], expected: str) -> None:
    assert make() == expected


def test_every_outcome_that_can_block_has_a_phrase() -> None:
    from pytest_dagorder.core.state_machine import OUTCOMES

    assert set(wording.PHRASES) == (OUTCOMES - {"passed"}) | {"cancelled"}


#: A count of one followed by a plural noun ("1 tests", "(1 groups)").
ONE_PLURAL = re.compile(r"(?<![\d,./])1 (?:[a-z]+ )?(?:tests|groups|dependencies|modules|files|"
                        r"scopes|documents|records|probes|prerequisites|errors)\b")

SINGULARS: list[Callable[[], str]] = [
    lambda: wording.serial_header(1, 1, 1),
    lambda: options_wording.groups_header(1, 1, 1, None),
    lambda: foreign_wording.runtime_depends_header(1),
    lambda: options_wording.xdist_header(1, 1, 1, "state", 1, 1, 1),
    lambda: options_wording.kept_whole_header("loadscope", 1),
    lambda: options_wording.kept_whole_header("load", 1, ["a.txt"]),
    lambda: options_wording.explain_free([("t.py::test_a", "t.py::test_b")], "state"),
    lambda: wording.shard_header(1, 2, 0, 1, None, None),
    lambda: wording.shard_header(1, 2, 0, 1, None, None, selected_elsewhere=True),
    lambda: wording.shard_header(1, 2, 1, 1, 2.0, wording.Oversized("t.py::test_a", 1, 2.0)),
    lambda: wording.blocked_line("t.py::test_a", "failed", 1),
    lambda: options_wording.pulled_back_line(1, 1),
    lambda: options_wording.collection_errors(1),
    lambda: wording.move("started", None, "gw1", None, 1),
]


@pytest.mark.parametrize("make", SINGULARS)
def test_a_count_of_one_reads_in_the_singular(make: Callable[[], str]) -> None:
    text = make()
    assert not ONE_PLURAL.search(text), text


def test_counts_read_as_users_expect() -> None:
    assert wording.serial_header(1, 1, 1) == (
        "dagorder: 1 test, 1 dependency, longest chain 1 (serial)")
    assert options_wording.xdist_header(1, 0, 1, "state", 1, 0, 1) == (
        "dagorder: 1 test, 0 dependencies, longest chain 1; xdist scheduling, affinity "
        "state (1 group); critical path by test counts")
    assert wording.plural(1200, "test") == "1,200 tests"


@pytest.mark.parametrize("affinity", ["state", "module", "none"])
def test_the_cross_worker_hint_names_each_prerequisite_and_never_advice_already_followed(
        affinity: str) -> None:
    # a1 -> b -> a2: a2 may read what a1 left, not b: both are named.
    said = options_wording.ran_elsewhere([("t.py::test_b", "gw1"), ("t.py::test_a1", "gw1")],
                                      "gw0", affinity)
    assert said.startswith("prerequisites t.py::test_b ran on worker gw1; t.py::test_a1 "
                           "ran on worker gw1, this test on gw0: ")
    # The tests may request one session fixture already: never the remedy.
    assert "session fixture" not in said
    assert ("--dag-affinity=none" in said) == (affinity == "none")
    assert ("dag_shares_nothing" in said) == (affinity == "state")
    one = options_wording.ran_elsewhere([("t.py::test_b", "gw1")], "gw0", affinity)
    assert one.startswith("prerequisite t.py::test_b ran on worker gw1, this test on gw0: ")
