"""``--dag-find-missing`` end to end: a small suite with two prerequisites and one
conflict nobody declared, found by probe processes; the ``--dag-edges`` file
carries them into later runs."""

from __future__ import annotations

import json
import signal
import socketserver
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest
from helpers import base_args, forked_workers
from support.dagtester import DagTester

from pytest_dagorder.finder import find_missing, probe_plugin

#: Each test gives ``-n`` or none itself.
pytestmark = [pytest.mark.dag_modes("own"), pytest.mark.dagtester(timeout=300)]
#: The search, on two workers.
FIND = ("--dag-find-missing", "-n", "2")

#: test_b.py::test_read reads a file test_a.py::test_write writes at a fixed path;
#: test_b.py::test_env reads a variable test_a.py::test_set_env sets in the
#: process; test_b.py::test_x and test_c.py::test_y write one file and read it back
#: (a pause between: the overlap probes release both at one start line, so a
#: fraction of a second lets the other write in between; every other run pays it).
HIDDEN = {
    "test_a": """
        import os, pathlib
        HERE = pathlib.Path(__file__).parent

        def test_write():
            (HERE / "out").mkdir(exist_ok=True)
            (HERE / "out" / "data.txt").write_text("42")

        def test_set_env():
            os.environ["DAGORDER_E2E_TOKEN"] = "abc"

        def test_free():
            pass
    """,
    "test_b": """
        import os, pathlib, time
        HERE = pathlib.Path(__file__).parent

        def test_read():
            assert (HERE / "out" / "data.txt").read_text() == "42"

        def test_env():
            assert os.environ["DAGORDER_E2E_TOKEN"] == "abc"

        def test_x():
            p = HERE / "shared.txt"
            p.write_text("x")
            time.sleep(0.15)
            assert p.read_text() == "x"
    """,
    "test_c": """
        import os, pathlib, time
        HERE = pathlib.Path(__file__).parent

        def test_y():
            p = HERE / "shared.txt"
            p.write_text("y")
            time.sleep(0.15)
            assert p.read_text() == "y"

        def test_log_pid():
            with open(HERE / "pids.txt", "a") as f:
                f.write(f"{os.getpid()}\\n")
    """,
}


def checked_learning(dagtester: DagTester, conftest: str, module: str,
                     body: str) -> pytest.RunResult:
    """The learning pass over a conftest and one test module (``module``, whose
    test_read reads what its test_write wrote): its result, once it ended well
    with that need found and the ``-n 2`` check of it giving the serial outcomes."""
    dagtester.pytester.makeconftest(textwrap.dedent(conftest))
    dagtester.pytester.makepyfile(**{module: textwrap.dedent(body)})
    result = dagtester.run(*FIND, "--dag-edges", "edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: with the findings, -n 2 gave the serial outcomes",
        f"dagorder: {module}.py::test_read needs {module}.py::test_write"])
    return result


def make_suite(dagtester: DagTester, **changes: str) -> None:
    for name, body in {**HIDDEN, **changes}.items():
        dagtester.pytester.makepyfile(**{name: textwrap.dedent(body)})


def test_the_hidden_prerequisites_and_the_conflict_are_found_and_written(
        dagtester: DagTester) -> None:
    make_suite(dagtester)
    result = dagtester.run(*FIND, "--dag-edges", "edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: serial pass: 8 passed in * s; screening 7 tests",
        "dagorder: checking the findings: the selection under -n 2 with them",
        "dagorder: with the findings, -n 2 gave the serial outcomes",
        "dagorder: test_b.py::test_read needs test_a.py::test_write",
        "    @depends_on(\"test_a.py::test_write\")",
        "dagorder: test_b.py::test_env needs test_a.py::test_set_env",
        "    @depends_on(\"test_a.py::test_set_env\")",
        "    # it reads what they leave in the process: declared, the edge keeps them on one "
        "worker",
        "dagorder: test_b.py::test_x and test_c.py::test_y fail when run at the same time*",
        "    @pytest.mark.dag_resource(\"shared.txt\") on each",
        "dagorder: 2 missing prerequisites, 1 conflict in * s with * pytest process*;"
        " written to *edges.json",
    ])
    assert "test_free" not in result.stdout.str().split("screening", 1)[1]
    written = json.loads((dagtester.path / "edges.json").read_text())
    assert written["edges"] == [
        {"test": "test_b.py::test_read", "after": "test_a.py::test_write",
         "same_process": False},
        {"test": "test_b.py::test_env", "after": "test_a.py::test_set_env",
         "same_process": True},
    ]
    assert written["resources"] == [
        {"name": "shared.txt", "tests": ["test_b.py::test_x", "test_c.py::test_y"]}]
    # The probes ran in copies: the project holds nothing a test wrote.
    assert not (dagtester.path / "out").exists()
    assert not (dagtester.path / "shared.txt").exists()
    assert not (dagtester.path / "pids.txt").exists()


EDGES = {
    "version": 1,
    "edges": [
        {"test": "test_b.py::test_read", "after": "test_a.py::test_write",
         "same_process": False},
        {"test": "test_b.py::test_env", "after": "test_a.py::test_set_env",
         "same_process": True},
        {"test": "test_gone.py::test_old", "after": "test_a.py::test_write",
         "same_process": False},
    ],
    "resources": [{"name": "shared.txt", "tests": ["test_b.py::test_x", "test_c.py::test_y"]}],
}


def test_a_run_with_the_edges_file_gives_the_serial_outcomes_under_n(
        dagtester: DagTester) -> None:
    make_suite(dagtester)
    (dagtester.path / "edges.json").write_text(json.dumps(EDGES))
    result = dagtester.run("-n", "2", "--dag-edges", "edges.json")
    result.stdout.fnmatch_lines([
        "dagorder: 2 edges and 1 resource from edges.json (1 entry naming tests not "
        "collected here)"])
    result.assert_outcomes(passed=8)


def test_the_graph_export_shows_the_files_edges_as_their_own_kind(
        dagtester: DagTester) -> None:
    make_suite(dagtester, test_b="""
        import pytest
        from pytest_dagorder import depends_on

        @depends_on("test_a.py::test_free")
        def test_read():
            pass
    """)
    (dagtester.path / "edges.json").write_text(json.dumps(EDGES))
    result = dagtester.run("--dag-edges", "edges.json", "--dag-graph", "graph.json",
                           "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()
    edges = json.loads((dagtester.path / "graph.json").read_text())["edges"]
    assert sorted((e["from"], e["to"], e["kind"]) for e in edges) == [
        ("test_a.py::test_free", "test_b.py::test_read", "requires-pass"),
        ("test_a.py::test_write", "test_b.py::test_read", "edges-file"),
    ]


def test_a_suite_that_fails_serially_is_refused_with_its_failures(
        dagtester: DagTester) -> None:
    make_suite(dagtester, test_c="""
        def test_broken():
            assert False
    """)
    result = dagtester.run(*FIND)
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "dagorder: the selection does not pass serially*make these tests pass (or deselect "
        "them) first:",
        "    test_c.py::test_broken",
    ])
    assert "searching" not in result.stdout.str()


def test_a_serial_pass_whose_process_ended_early_runs_again_not_blamed_on_the_suite(
        dagtester: DagTester, tmp_path: Path) -> None:
    # The pass's first process ends in test_end (outside pytest's reach, as a
    # crashed probe would); the second runs it through.  Old code: "does not
    # pass serially", listing the tests that had no record.
    mark = tmp_path / "ended-once"
    make_suite(dagtester, test_c=f"""
        import os

        def test_end():
            if not os.path.exists({str(mark)!r}):
                open({str(mark)!r}, "w").close()
                os._exit(0)
    """)
    result = dagtester.run(*FIND)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: serial pass: its process ended after * of 7 tests (*); running it again",
        "dagorder: test_b.py::test_read needs test_a.py::test_write",
    ])
    assert "does not pass serially" not in result.stdout.str()


def test_a_serial_pass_ending_twice_names_the_test_and_runs_nothing_else(
        dagtester: DagTester) -> None:
    make_suite(dagtester, test_c="""
        import os

        def test_end():
            os._exit(3)
    """)
    result = dagtester.run(*FIND)
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: a probe could not run the tests:",
        "the serial pass's process ended twice after * of 7 tests, while "
        "test_c.py::test_end ran: status 3; its output ends:",
    ])
    out = result.stdout.str()
    assert "does not pass serially" not in out and "searching" not in out
    assert "Traceback" not in out and "INTERNALERROR" not in out


def test_a_serial_pass_stopped_by_its_idle_time_is_a_timeout_not_run_again(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # In this process (the finder reads the bound when the pass starts); the
    # test hangs in the probes only.  Neither an early end (run again) nor the
    # suite failing serially.  The bound counts from the pass's request, which
    # its server reads once it collected: a few seconds, for a loaded machine.
    monkeypatch.setattr(find_missing, "SERIAL_IDLE", 6.0)
    dagtester.pytester.makepyfile(test_f="""
        import os, time

        def test_a():
            pass

        def test_hang():
            if os.environ.get("DAGORDER_PROBE_OUT"):
                time.sleep(60)

        def test_z():
            pass
    """)
    result = dagtester.run(*FIND)
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: the serial pass was stopped, a timeout: no test ended for 6 s (1 of 3 "
        "tests had ended; running: test_f.py::test_hang)*"])
    out = result.stdout.str()
    assert "running it again" not in out and "does not pass serially" not in out


def test_a_probe_that_cannot_collect_says_how_it_ended_and_its_output(
        dagtester: DagTester) -> None:
    # Each probe's pytest ends at its start (a conftest that refuses it).  Old
    # code: the log's last 2,000 characters as they were, cut mid-line, with no
    # word of what ended.
    dagtester.pytester.makeconftest("""
        import os

        def pytest_sessionstart(session):
            if os.environ.get("DAGORDER_PROBE_OUT"):
                raise RuntimeError("no probe wanted here")
    """)
    dagtester.pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = dagtester.run(*FIND)
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: a probe could not run the tests:",
        "its pytest ended before it ran a test (status 3); its output ends:",
        "    *RuntimeError: no probe wanted here"])
    out = result.stdout.str()
    assert "searching" not in out and "Traceback" not in out.split("its output ends:")[0]


@pytest.mark.skipif(not find_missing.FORKS, reason="needs os.fork")
def test_a_check_that_ends_before_its_tests_is_no_difference_the_findings_made(
        dagtester: DagTester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The -n 2 check's controller (xdist asked for, no worker) breaks as its
    # session starts.  Old code: "-n 2 still gave other outcomes than the
    # serial run for 2 tests (not fixed)", both listed, and the file written.
    dagtester.pytester.makeconftest("""
        import os

        def pytest_sessionstart(session):
            config = session.config
            if (os.environ.get("DAGORDER_PROBE_OUT") and config.option.numprocesses
                    and not hasattr(config, "workerinput")):
                raise RuntimeError("the check's controller breaks")
    """)
    monkeypatch.setenv("DAGORDER_E2E_LOG", str(tmp_path / "imports.log"))
    dagtester.pytester.makepyfile(test_f=textwrap.dedent(FORKED))
    result = dagtester.run(*FIND, "--dag-edges", "edges.json")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: a probe could not run the tests:",
        "the -n 2 check of the findings ended before its tests ran (status 3); "
        "its output ends:",
        "*RuntimeError: the check's controller breaks"])
    assert "other outcomes" not in result.stdout.str()
    assert not (dagtester.path / "edges.json").exists()


def test_one_test_is_searched_alone(dagtester: DagTester) -> None:
    make_suite(dagtester)
    result = dagtester.run(*FIND, "--dag-find-missing=test_b.py::test_read")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: finding missing declarations of 1 test with*",
        "dagorder: test_b.py::test_read needs test_a.py::test_write",
    ])
    assert "test_env needs" not in result.stdout.str()
    assert "add --dag-edges PATH" in result.stdout.str()


def test_a_pytest_order_suite_gets_pytest_orders_syntax(dagtester: DagTester) -> None:
    pytest.importorskip("pytest_order")
    make_suite(dagtester, test_c="""
        import pytest

        @pytest.mark.order(1)
        def test_first():
            pass
    """)
    result = dagtester.run(*FIND, "--dag-find-missing=test_b.py::test_read")
    result.stdout.fnmatch_lines(['    @pytest.mark.order(after="test_a.py::test_write")'])


@pytest.mark.parametrize(("args", "message"), [
    (["--dag-find-missing=test_b.py"], "*--dag-find-missing='test_b.py' is not a test id*"),
    (["--dag-find-missing=test_b.py::nope"], "*names no selected test*"),
    (["--dag-find-missing", "-o", "dag_find_budget=0"],
     "*ini dag_find_budget '0' is not valid; give a number of seconds above 0*"),
    (["--dag-find-missing", "-o", "dag_find_budget=soon"], "*dag_find_budget 'soon' is not valid*"),
])
def test_bad_options_are_usage_errors(dagtester: DagTester, args: list[str],
                                      message: str) -> None:
    make_suite(dagtester)
    result = dagtester.run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_damaged_edges_file_is_a_usage_error_and_kept(dagtester: DagTester) -> None:
    make_suite(dagtester)
    (dagtester.path / "edges.json").write_text("{not json")
    result = dagtester.run("--dag-edges", "edges.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dag-edges *edges.json: is not JSON*fix or delete the file*"])
    assert (dagtester.path / "edges.json").read_text() == "{not json"


def test_a_spent_budget_lists_the_tests_left_unsearched(dagtester: DagTester) -> None:
    make_suite(dagtester)
    result = dagtester.run(*FIND, "-o", "dag_find_budget=0.001")
    assert result.ret == 0, result.stdout.str()
    # The serial pass runs whatever the budget; nothing after it starts.
    result.stdout.fnmatch_lines([
        "dagorder: serial pass: 8 passed in * s; screening 7 tests",
        "dagorder: the time budget ran out: what was found so far is reported; phases not "
        "finished: screening, search, conflicts",
        "dagorder: the time budget ran out before 7 tests were searched:",
        "    test_a.py::test_set_env",
    ])
    assert " needs " not in result.stdout.str()


#: Two declared chains: test_get reads a module global test_set filled (it needs
#: their process), test_read a file test_write wrote (it does not).
DECLARED = """
    import pathlib
    from pytest_dagorder import depends_on
    HERE = pathlib.Path(__file__).parent
    STATE = {}

    def test_set():
        STATE["x"] = 1

    @depends_on("test_set")
    def test_get():
        assert STATE["x"] == 1

    def test_write():
        (HERE / "f.txt").write_text("1")

    @depends_on("test_write")
    def test_read():
        assert (HERE / "f.txt").read_text() == "1"
"""


def test_declared_edges_get_verdicts_that_a_changed_file_voids(dagtester: DagTester) -> None:
    dagtester.pytester.makepyfile(test_d=textwrap.dedent(DECLARED))
    result = dagtester.run(*FIND, "--dag-edges", "edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*checking 2 tests with declared prerequisites in a fresh process (1 alone after their "
        "screening batch)",
        "dagorder: declared edges: 1 of 2 edges separable*",
        "dagorder: 0 missing prerequisites, 0 conflicts, 1 of 2 declared edges separable*"])
    verdicts = json.loads((dagtester.path / "edges.json").read_text())["verdicts"]
    assert [(v["after"], v["test"], v["separable"]) for v in verdicts] == [
        ("test_d.py::test_set", "test_d.py::test_get", False),
        ("test_d.py::test_write", "test_d.py::test_read", True)]
    assert verdicts[0]["probe"].startswith("test_d.py::test_get failed in a fresh process")
    assert not (dagtester.path / "f.txt").exists()
    result = dagtester.run("-n", "2", "--dag-edges", "edges.json", "--dag-explain")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([
        "dagorder: 1 of 2 edges free by evidence from edges.json",
        "dagorder: lifted by evidence*: test_d.py::test_write -> test_d.py::test_read",
        "dagorder: kept by evidence: test_d.py::test_set -> test_d.py::test_get "
        "(test_d.py::test_get failed in a fresh process*)"])
    # A file of verdicts alone is said by that line, not also as "0 edges and 0 resources".
    result.stdout.no_fnmatch_line("*edges and 0 resources from*")
    # A changed module voids what rested on it: the edges are kept again.
    with (dagtester.path / "test_d.py").open("a") as f:
        f.write("\n# changed\n")
    result = dagtester.run("-n", "2", "--dag-edges", "edges.json")
    result.stdout.fnmatch_lines([
        "dagorder: 0 of 2 edges free by evidence from edges.json (2 stale: a file they rest "
        "on changed; renew with pytest --dag-find-missing -n 2 --dag-edges=edges.json)"])


def test_an_edges_file_that_cannot_be_written_is_said_before_the_search(
        dagtester: DagTester) -> None:
    make_suite(dagtester)
    (dagtester.path / "out").write_text("a file, not a folder")
    result = dagtester.run(*FIND, "--dag-edges", "out/edges.json")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["dagorder: cannot write the edges file *edges.json (*out is "
                                 "not a folder); name another with --dag-edges PATH"])
    assert "serial pass" not in result.stdout.str()


def test_a_rootdir_package_keeps_its_doctest_ids_in_the_probes(dagtester: DagTester) -> None:
    # With an __init__.py in the rootdir pytest names the package after its
    # folder: a probe's copy must resolve the same node ids.  The search and the
    # -n 2 check run; no conflict (test_c.py), whose overlaps add nothing here.
    for name in ("test_a", "test_b"):
        dagtester.pytester.makepyfile(**{name: textwrap.dedent(HIDDEN[name])})
    dagtester.pytester.makepyfile(__init__="", lib='''
        def double(x):
            """
            >>> double(2)
            4
            """
            return 2 * x
    ''')
    result = dagtester.run(*FIND, "--doctest-modules")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["dagorder: serial pass: 7 passed in * s*"])


#: Seven tests with declared prerequisites: test_get reads what test_set left in
#: the process; test_read a file test_write writes after test_get; the free ones
#: only follow test_set; test_chained reads what test_free_c left in the process.
#: Each prerequisite changes the process's state, so the screening runs none of
#: them alone (``MissingFinder._combined``): all go to the edge runs.
#: Each writes its name and process id to $DAGORDER_E2E_LOG (a path outside the
#: copies the probes run in).
BATCHED = """
    import os, pathlib
    from pytest_dagorder import depends_on
    HERE = pathlib.Path(__file__).parent
    STATE = {}

    def log(name):
        with open(os.environ["DAGORDER_E2E_LOG"], "a") as f:
            f.write(f"{os.getpid()} {name}\\n")

    def test_set():
        STATE["x"] = 1

    @depends_on("test_set")
    def test_get():
        log("get")
        assert STATE["x"] == 1

    def test_write():
        (HERE / "f.txt").write_text("1")
        STATE["written"] = True

    @depends_on("test_write")
    def test_read():
        log("read")
        assert (HERE / "f.txt").read_text() == "1"
""" + "".join(f"""
    @depends_on("test_set")
    def test_free_{c}():
        log("free_{c}")
        Box.seen = "{c}"
""" for c in "abcd") + """
    class Box:  # a class attribute: state the probe's record does not see
        seen = ""

    @depends_on("test_free_c")
    def test_chained():
        log("chained")
        assert Box.seen in ("c", "d")
"""


def test_tests_alone_share_a_fresh_process_and_a_failure_there_is_taken_anew(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    log = dagtester.path.parent / "alone.log"
    monkeypatch.setenv("DAGORDER_E2E_LOG", str(log))
    dagtester.pytester.makepyfile(test_e=textwrap.dedent(BATCHED))
    result = dagtester.run(*FIND, "--dag-edges", "edges.json")
    assert result.ret == 0, result.stdout.str()
    verdicts = json.loads((dagtester.path / "edges.json").read_text())["verdicts"]
    assert {(v["test"].split("::")[1], v["separable"]) for v in verdicts} == {
        ("test_get", False), ("test_read", True), ("test_free_a", True), ("test_free_b", True),
        ("test_free_c", True), ("test_free_d", True), ("test_chained", False)}
    by_process: dict[str, list[str]] = {}
    for line in log.read_text().splitlines():
        pid, name = line.split()
        by_process.setdefault(pid, []).append(name)
    runs = sorted(by_process.values())
    # Split over the two probe slots: test_read failed in test_get's batch (its
    # file not yet written there) and was run anew at its own place, with what
    # follows it; test_chained never shares a process with its prerequisite.
    assert ["get", "read"] in runs
    assert ["read", "free_a", "free_b"] in runs
    assert ["free_c", "free_d"] in runs
    assert ["chained"] in runs


#: A table outside the rootdir (as a database server's): test_insert and
#: test_insert_other add their row and fail if it is there already; test_count
#: depends on test_insert and reads the table.
OUTSIDE = """
    import pathlib
    from pytest_dagorder import depends_on
    TABLE = pathlib.Path(TABLE_PATH)

    def test_insert():
        rows = TABLE.read_text().splitlines() if TABLE.exists() else []
        assert "row" not in rows, "duplicate key"
        TABLE.write_text("\\n".join([*rows, "row"]))

    @depends_on("test_insert")
    def test_count():
        assert "row" in TABLE.read_text().splitlines()

    def test_insert_other():
        rows = TABLE.read_text().splitlines()
        assert "other" not in rows, "duplicate key"
        TABLE.write_text("\\n".join([*rows, "other"]))
"""


def test_tests_the_probes_do_not_repeat_are_named_and_their_edges_kept(
        dagtester: DagTester) -> None:
    table = dagtester.path.parent / f"{dagtester.path.name}-table"
    dagtester.pytester.makepyfile(test_db=textwrap.dedent(OUTSIDE).replace(
        "TABLE_PATH", repr(str(table))))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: declared edges: 0 of 1 edge separable*",
        "dagorder: 3 tests did not repeat the serial pass in a fresh copy of the rootdir*"
        "a database server*they keep the serial order on one worker: "
        '@pytest.mark.xdist_group("state outside the rootdir") on each:',
        "    test_db.py::test_insert (passed, then failed)",
        "    test_db.py::test_count (passed, then skipped)",
        "    test_db.py::test_insert_other"])
    assert "needs" not in result.stdout.str()
    written = json.loads((dagtester.path / "edges.json").read_text())
    assert written["groups"] == [{"name": "state outside the rootdir", "tests": [
        "test_db.py::test_insert", "test_db.py::test_count", "test_db.py::test_insert_other"]}]
    verdicts = written["verdicts"]
    assert [(v["test"], v["separable"]) for v in verdicts] == [("test_db.py::test_count", False)]
    assert verdicts[0]["probe"].startswith("no evidence: test_db.py::test_insert failed when "
                                           "the serial order ran again in a fresh copy")


#: A table outside the rootdir, in a file (``DAGORDER_E2E_SHARED``: its folder)
#: or behind a server (``DAGORDER_E2E_SERVER``: its ``host:port``).  The two
#: inserts fail on a row that is there already (the probes do not repeat them;
#: the second declares the first, so the edge pass runs the serial order again);
#: test_count reads their rows, which it finds whenever it runs again, so no
#: probe names it: it declares nothing and runs in another module.
SHARED = {
    "shared": """
        import os, pathlib, socket

        def talk(line):
            server = os.environ.get("DAGORDER_E2E_SERVER")
            if server:
                host, port = server.rsplit(":", 1)
                with socket.create_connection((host, int(port)), timeout=10) as s:
                    s.sendall(line.encode() + b"\\n")
                    return s.makefile().readline().strip()
            table = pathlib.Path(os.environ["DAGORDER_E2E_SHARED"]) / "table.txt"
            rows = table.read_text().split() if table.exists() else []
            return answer(rows, line, lambda: table.write_text(" ".join(rows)))

        def answer(rows, line, save):
            if line == "read":
                return " ".join(rows)
            row = line.split()[1]
            if row in rows:
                return "duplicate"
            rows.append(row)
            save()
            return str(len(rows))
    """,
    "test_a": """
        import os, time
        from pytest_dagorder import depends_on
        from shared import talk

        def test_insert_a():
            if "PYTEST_XDIST_WORKER" in os.environ:
                # A reader on the other worker starts first (only -n runs have
                # one: the serial pass and the probes need not wait).
                time.sleep(1.0)
            assert talk("insert a") == "1"

        @depends_on("test_insert_a")
        def test_insert_b():
            assert talk("insert b") == "2"
    """,
    "test_b": """
        from shared import talk

        def test_count():
            assert talk("read").split() == ["a", "b"]

        def test_free():
            pass
    """,
}


class _Table(socketserver.StreamRequestHandler):
    """One request a connection: a line in, the answer out (as ``shared.answer``)."""

    rows: ClassVar[list[str]] = []

    def handle(self) -> None:
        line = self.rfile.readline().decode().strip()
        if line == "read":
            said = " ".join(self.rows)
        elif line.split()[1] in self.rows:
            said = "duplicate"
        else:
            self.rows.append(line.split()[1])
            said = str(len(self.rows))
        self.wfile.write((said + "\n").encode())


@pytest.mark.parametrize("where", ["file", "server"])
def test_the_readers_of_state_outside_the_rootdir_join_its_group(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    for name, body in SHARED.items():
        dagtester.pytester.makepyfile(**{name: textwrap.dedent(body)})
    shared = dagtester.path.parent / f"{dagtester.path.name}-shared"
    shared.mkdir()
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Table)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    if where == "server":
        host, port = server.server_address[:2]
        place = f"{host!s}:{port}"
        monkeypatch.setenv("DAGORDER_E2E_SERVER", place)
    else:
        monkeypatch.setenv("DAGORDER_E2E_SHARED", str(shared))
        place = str(shared / "table.txt")
    try:
        result = dagtester.run(*FIND, "--dag-edges=edges.json")
        assert result.ret == 0, result.stdout.str()
        result.stdout.fnmatch_lines([
            "dagorder: with the findings, -n 2 gave the serial outcomes (not compared: *; "
            f"it ran against what the probes left at {place}, not a fresh state: *)",
            "dagorder: 2 tests did not repeat the serial pass in a fresh copy*",
            f"    their state lives at {place}; 1 more test touches it and joins them:",
            "    test_b.py::test_count"])
        written = json.loads((dagtester.path / "edges.json").read_text())
        assert written["groups"] == [{"name": "state outside the rootdir", "tests": [
            "test_a.py::test_insert_a", "test_a.py::test_insert_b", "test_b.py::test_count"]}]
        if where == "server":
            # The same file as the "file" case's: its run with the file shows the group.
            return
        # A fresh table, as a CI run starts from: the default with the file gives
        # the serial outcomes under -n 2.
        _Table.rows.clear()
        (shared / "table.txt").unlink(missing_ok=True)
        result = dagtester.run("-n", "2", "--dag-edges=edges.json")
        assert result.ret == 0, result.stdout.str()
        result.assert_outcomes(passed=4)
    finally:
        server.shutdown()
        server.server_close()
        _Table.rows.clear()


#: The conftest logs each process's configuration (xdist workers by name); the
#: first test, wherever it runs, waits (bounded) until an xdist worker logged one.
STARTS_CONFTEST = """
    import os, time

    def pytest_configure(config):
        name = getattr(config, "workerinput", {}).get("workerid", "main")
        with open(os.environ["DAGORDER_E2E_LOG"], "a") as f:
            f.write(f"conf {name}\\n")
"""
STARTS = """
    import os, pathlib, time
    HERE = pathlib.Path(__file__).parent
    LOG = pathlib.Path(os.environ["DAGORDER_E2E_LOG"])

    def test_first():
        end = time.monotonic() + 20
        while "conf gw" not in LOG.read_text() and time.monotonic() < end:
            time.sleep(0.05)
        with LOG.open("a") as f:
            f.write("ran test_first\\n")

    def test_write():
        (HERE / "data.txt").write_text("42")

    def test_read():
        assert (HERE / "data.txt").read_text() == "42"
"""


def _shared_log(dagtester: DagTester, monkeypatch: pytest.MonkeyPatch, name: str) -> Path:
    """An empty file beside the inner run's folder that its processes append to
    (named to them by ``DAGORDER_E2E_LOG``)."""
    log = dagtester.path.parent / name
    log.write_text("")
    monkeypatch.setenv("DAGORDER_E2E_LOG", str(log))
    return log


def test_the_n2_check_starts_with_the_search_and_collects_once_the_findings_are_written(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # Where no process can fork (no probe server to fork the check from).
    monkeypatch.setattr(find_missing, "FORKS", False)
    log = _shared_log(dagtester, monkeypatch, "starts.log")
    # The check read the findings: its workers collected after they were written.
    checked_learning(dagtester, STARTS_CONFTEST, "test_s", STARTS)
    lines = log.read_text().splitlines()
    # Its workers started up before the serial pass ran its first test.
    first = next(k for k, line in enumerate(lines) if line.startswith("conf gw"))
    assert first < lines.index("ran test_first"), lines


#: The conftest logs each configuration, the test module each import of it,
#: with the process id.
FORKED_CONFTEST = """
    import os

    def pytest_configure(config):
        name = getattr(config, "workerinput", {}).get("workerid", "main")
        with open(os.environ["DAGORDER_E2E_LOG"], "a") as f:
            f.write(f"conf {name} {os.getpid()}\\n")
"""
FORKED = """
    import os, pathlib
    HERE = pathlib.Path(__file__).parent
    with open(os.environ["DAGORDER_E2E_LOG"], "a") as f:
        f.write(f"import {os.getpid()}\\n")

    def test_write():
        (HERE / "data.txt").write_text("42")

    def test_read():
        assert (HERE / "data.txt").read_text() == "42"
"""


@pytest.mark.skipif(not find_missing.FORKS, reason="needs os.fork")
def test_the_n2_check_is_forked_from_a_probe_server_and_stays_a_real_n2_run(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _shared_log(dagtester, monkeypatch, "forked.log")
    # The check read the findings and kept the two tests in order.
    checked_learning(dagtester, FORKED_CONFTEST, "test_f", FORKED)
    lines = [line.split() for line in log.read_text().splitlines()]
    imported = {words[1] for words in lines if words[0] == "import"}
    workers = {words[2] for words in lines if words[0] == "conf" and words[1].startswith("gw")}
    # Two xdist workers configured for the check and collected the test module
    # without importing it: forks of a process that collected the copy.
    assert {words[1] for words in lines if words[0] == "conf" and words[1] != "main"} \
        == {"gw0", "gw1"}, lines
    assert len(workers) >= 2 and not workers & imported, lines


#: FORKED's two tests, and test_depth, which logs, in an xdist worker, how deep
#: its stack is and whether it runs in the process's main thread (signals can be
#: set there).
DEPTH = FORKED + """
    import inspect, signal, threading

    def test_depth(request):
        if hasattr(request.config, "workerinput"):  # an xdist worker
            main = threading.current_thread() is threading.main_thread()
            signal.signal(signal.SIGUSR1, signal.getsignal(signal.SIGUSR1))
            with open(os.environ["DAGORDER_E2E_DEPTH"], "a") as f:
                f.write(f"{len(inspect.stack(0))} {main}\\n")
"""


@pytest.mark.skipif(not find_missing.FORKS, reason="needs os.fork")
def test_a_forked_check_worker_runs_on_a_stack_as_shallow_as_a_fresh_workers(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # Forked from a new thread of the probe server, not from its own deep in its
    # pytest session: each frame a call pushes then lands where it would in a
    # fresh worker (CPython 3.11 maps its frames in chunks: shapepy's tests
    # unmapped and mapped one per call at the old depth).  On the old code the
    # forked worker's stack was 18 frames deeper than the fresh one's (60, 42).
    beside = dagtester.path.parent / dagtester.path.name  # outside the probes' copies
    monkeypatch.setenv("DAGORDER_E2E_LOG", f"{beside}-imports.log")
    dagtester.pytester.makepyfile(test_f=textwrap.dedent(DEPTH))
    depths = {}
    learned = ("--dag-edges", "edges.json")
    for name, args in (("forked", (*FIND, *learned)), ("fresh", ("-n", "2", *learned))):
        log = Path(f"{beside}-{name}.depth")
        monkeypatch.setenv("DAGORDER_E2E_DEPTH", str(log))
        result = dagtester.run(*args)
        assert result.ret == 0, result.stdout.str()
        depths[name] = [line.split() for line in log.read_text().splitlines()]
    assert depths["forked"] and depths["fresh"], depths
    assert all(main == "True" for _, main in depths["forked"]), depths
    assert int(depths["forked"][0][0]) <= int(depths["fresh"][0][0]) + 3, depths


#: An xdist worker's session ends slowly (a plugin flushing a report) and then
#: leaves a mark: after every test's outcome is in.
SLOW_FINISH = """
    import pathlib, time

    def pytest_sessionfinish(session):
        if hasattr(session.config, "workerinput"):  # an xdist worker
            # Long beside the check's run (a worker with no test gets here
            # first), even on a loaded machine.
            time.sleep(20)
            pathlib.Path(MARK).touch()
"""


@pytest.mark.skipif(not find_missing.FORKS, reason="needs os.fork")
def test_the_forked_n2_check_ends_once_every_test_has_its_outcome(
        dagtester: DagTester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its workers are stopped in their session's finish: the old code waited
    # for it (the mark was made, 20 s later).
    mark = tmp_path / "finished"
    monkeypatch.setenv("DAGORDER_E2E_LOG", str(tmp_path / "imports.log"))
    checked_learning(dagtester, SLOW_FINISH.replace("MARK", repr(str(mark))), "test_f", FORKED)
    assert not mark.exists()


#: A per-worker name read when the test module is imported, as suites name a
#: database per xdist worker: serially and in xdist's own workers it matches
#: the environment the tests run in; in a worker forked from a process that
#: imported the module before xdist set the variable, it would not.
WORKER_NAMED = """
    import os
    from pytest_dagorder import depends_on

    AT_IMPORT = os.environ.get("PYTEST_XDIST_WORKER", "none")

    def test_first():
        assert AT_IMPORT == os.environ.get("PYTEST_XDIST_WORKER", "none")

    @depends_on("test_first")
    def test_second():
        assert AT_IMPORT == os.environ.get("PYTEST_XDIST_WORKER", "none")
"""


def test_the_n2_check_of_a_suite_that_reads_xdists_variables_has_fresh_workers(
        dagtester: DagTester) -> None:
    # Its workers are fresh interpreters: forks of the probe server would
    # keep the module's value from before xdist set the variable.
    dagtester.pytester.makepyfile(test_w=textwrap.dedent(WORKER_NAMED))
    result = dagtester.run(*FIND, "--dag-edges", "edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: declared edges: 1 of 1 edge separable*",
        "dagorder: with the findings, -n 2 gave the serial outcomes"])


def test_the_check_workers_launcher_starts_a_fresh_interpreter_without_its_server(
        tmp_path: Path) -> None:
    launcher = tmp_path / "python"
    launcher.write_text(
        f"#!{sys.executable} -IS\n" + probe_plugin.LAUNCHER_SOURCE.read_text(encoding="utf-8")
        + f"\nmain({str(tmp_path / 'gone.sock')!r}, {sys.executable!r})\n", encoding="utf-8")
    launcher.chmod(0o700)
    done = subprocess.run([str(launcher), "-u", "-c", "import sys; print(sys.flags.isolated)"],
                          capture_output=True, text=True, timeout=60)
    # The launcher runs isolated (-I); what printed is the interpreter it became.
    assert (done.returncode, done.stdout) == (0, "0\n"), done.stderr


#: The conftest logs each probe server as it configures.
SERVERS_CONFTEST = """
    import os, pytest

    def pytest_configure(config):
        if os.environ.get("DAGORDER_PROBE_SERVE"):
            with open(os.environ["DAGORDER_E2E_LOG"], "a") as f:
                f.write(f"server {os.getpid()}\\n")

    @pytest.fixture(autouse=True)
    def _session_of_the_run():
        # A probe server starts a session of its own: each test run names the
        # server its process came from.
        with open(os.environ["DAGORDER_E2E_LOG"], "a") as f:
            f.write(f"test {os.getsid(0)}\\n")
"""


#: A test module's helper: wait (bounded) until a second probe server logged its
#: configure.
SECOND_SERVER = textwrap.dedent("""
    import os, time

    def _second_server():
        end = time.monotonic() + 30
        while sum(line.startswith("server ")
                  for line in open(os.environ["DAGORDER_E2E_LOG"])) < 2:
            assert time.monotonic() < end
            time.sleep(0.05)
""")


def _logged(log: Path, kind: str) -> list[str]:
    return [line.split()[1] for line in log.read_text().splitlines()
            if line.startswith(kind + " ")]


def _servers_run(dagtester: DagTester, monkeypatch: pytest.MonkeyPatch, before: str,
                 after: str, summary: str) -> Path:
    """The learning pass over FORKED's two tests between ``before`` and ``after``,
    with SERVERS_CONFTEST: it ended well with the ``summary`` line; the servers'
    shared log."""
    log = _shared_log(dagtester, monkeypatch, "servers.log")
    dagtester.pytester.makeconftest(textwrap.dedent(SERVERS_CONFTEST))
    dagtester.pytester.makepyfile(test_f="".join(
        textwrap.dedent(part) for part in (before, FORKED, after)))
    result = dagtester.run(*FIND)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([summary])
    return log


@pytest.mark.skipif(not find_missing.FORKS, reason="needs os.fork")
def test_tests_shorter_than_a_start_up_are_searched_with_one_probe_process(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # A second server starts with the serial pass (before its pace is known),
    # and is stopped unused.
    log = _servers_run(dagtester, monkeypatch, "", "",
                       "dagorder: 1 missing prerequisite, * in 1 pytest process;*")
    assert len(set(_logged(log, "test"))) == 1


@pytest.mark.skipif(not find_missing.FORKS, reason="needs os.fork")
def test_the_second_probe_server_starts_with_the_serial_pass_before_its_pace_is_known(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # The serial pass's first test waits (bounded) for a second server: no test
    # has ended yet, so nothing measured the pass.
    _servers_run(dagtester, monkeypatch, SECOND_SERVER + textwrap.dedent("""
        def test_first():
            _second_server()
    """), "", "dagorder: 1 missing prerequisite, *")


@pytest.mark.skipif(not find_missing.FORKS, reason="needs os.fork")
def test_a_slot_started_after_a_spare_was_stopped_unused_has_a_folder_of_its_own(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # The serial pass is short (the spare slot is stopped unused); the search's
    # two probes at once then start a slot at once (WIDEN_WAIT 0 here: the
    # finder runs in this process).
    monkeypatch.setattr(find_missing, "WIDEN_WAIT", 0.0)
    _servers_run(dagtester, monkeypatch, "", """
        def test_write_2():
            (HERE / "data2.txt").write_text("43")

        def test_read_2():
            assert (HERE / "data2.txt").read_text() == "43"
    """, "dagorder: 2 missing prerequisites, * in 2 pytest processes;*")


@pytest.mark.skipif(not find_missing.FORKS, reason="needs os.fork")
def test_the_spare_slot_joins_the_search_once_the_serial_pass_calls_for_it(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # The pace's verdict is forced (its arithmetic: test_finder_speed; the finder
    # runs in this process); the last test, in the serial pass (its first run),
    # holds the pass a second after the spare's server started.  Two servers in
    # all: the spare joined, and none was started instead of it.
    monkeypatch.setattr(find_missing, "_worth_a_slot", lambda *measures: True)
    log = _servers_run(dagtester, monkeypatch, "", SECOND_SERVER + textwrap.dedent("""
        def test_long():
            with open(os.environ["DAGORDER_E2E_LOG"]) as f:
                if "long\\n" in f.read():
                    return
            _second_server()
            time.sleep(1)
            with open(os.environ["DAGORDER_E2E_LOG"], "a") as f:
                f.write("long\\n")
    """), "dagorder: 1 missing prerequisite, * in 2 pytest processes;*")
    assert len(_logged(log, "server")) == 2


#: The finder's own ``pytest_configure`` (after its conftests' import) waits,
#: bounded, for a probe server to have started (each logs ``server``), then
#: ``{then}``; the servers' conftests only log.
EARLY_CONFTEST = """
    import os, pathlib, time
    LOG = pathlib.Path(os.environ["DAGORDER_E2E_LOG"])

    def pytest_configure(config):
        if os.environ.get("DAGORDER_PROBE_SERVE"):
            with LOG.open("a") as f:
                f.write("server\\n")
            return
        if config.getoption("dag_find_missing", None) is None:  # the -n 2 check's
            return
        end = time.monotonic() + 30
        while "server" not in LOG.read_text() and time.monotonic() < end:
            time.sleep(0.05)
        with LOG.open("a") as f:
            f.write("session configured\\n")
        {then}
"""


@pytest.mark.skipif(not find_missing.FORKS, reason="needs os.fork")
def test_the_first_probe_server_starts_before_the_session_and_is_kept(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # It starts once the rootdir's copy is made, as the conftests are imported,
    # with the command line the session gives it (the paths named: test_f.py).
    log = _shared_log(dagtester, monkeypatch, "early.log")
    dagtester.pytester.makeconftest(textwrap.dedent(EARLY_CONFTEST.format(then="pass")))
    dagtester.pytester.makepyfile(test_f=textwrap.dedent(FORKED))
    result = dagtester.run(*FIND, "test_f.py")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["dagorder: 1 missing prerequisite, * in 1 pytest process;*"])
    assert [line for line in log.read_text().splitlines() if not line.startswith("import")] \
        == ["server", "session configured"]


@pytest.mark.skipif(not find_missing.FORKS, reason="needs os.fork")
def test_an_early_probe_server_whose_copy_changed_since_is_started_anew(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # The session's conftest writes a module its tests import once that server
    # started: a server that collected the copy without it would fail them all.
    log = _shared_log(dagtester, monkeypatch, "early.log")
    then = 'pathlib.Path(config.rootpath, "made.py").write_text("VALUE = 42\\n")'
    dagtester.pytester.makeconftest(textwrap.dedent(EARLY_CONFTEST.format(then=then)))
    dagtester.pytester.makepyfile(test_f="import made\n" + textwrap.dedent(FORKED))
    result = dagtester.run(*FIND, "test_f.py")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["dagorder: test_f.py::test_read needs test_f.py::test_write",
                                 "dagorder: 1 missing prerequisite, * in 2 pytest processes;*"])
    # The early one and the one started anew, and the spare slot's where it came
    # as far as its configure before it was stopped unused (two slots: no more).
    assert log.read_text().splitlines().count("server") in (2, 3)


def test_a_held_probe_ends_when_the_finder_is_gone(pytester: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_h="def test_h():\n    pass\n")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    monkeypatch.setenv(probe_plugin.OUT, str(pytester.path / "out.jsonl"))
    monkeypatch.setenv(probe_plugin.HOLD, f"{pytester.path / 'never'}|{gone.pid}")
    with forked_workers():  # a probe is a process of its own, as the finder starts it
        result = pytester.runpytest_subprocess("-p", probe_plugin.__name__, "-p", "no:randomly",
                                               timeout=60)
    assert result.ret == 1
    assert not (pytester.path / "out.jsonl").exists()
    result.stdout.no_fnmatch_line("*1 passed*")


#: Every test declares test_base: each screening batch runs it (with its users).
DENSE = """
    import os
    from pytest_dagorder import depends_on

    def test_base():
        with open(os.environ["DAGORDER_E2E_LOG"], "a") as f:
            f.write(f"base {os.getpid()} {os.environ.get('PYTEST_XDIST_WORKER', '-')}\\n")
""" + "".join(f"""
    @depends_on("test_base")
    def test_user_{c}():
        pass
""" for c in "abcd")


def test_the_screening_takes_one_batch_a_slot_where_prerequisites_fill_every_batch(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    log = dagtester.path.parent / "base.log"
    monkeypatch.setenv("DAGORDER_E2E_LOG", str(log))
    dagtester.pytester.makepyfile(test_d=textwrap.dedent(DENSE))
    result = dagtester.run(*FIND)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["dagorder: 0 tests fail without the tests before them*"])
    # The serial pass, then two screening batches (one a probe slot), not four;
    # the rest is the -n 2 check.  No serial prefix runs again for the declared
    # edges: each user passed alone after its screening batch ran test_base.
    serially = [line for line in log.read_text().splitlines() if line.endswith(" -")]
    assert len(serially) == 3, serially


def _runs(logs: Path) -> dict[str, int]:
    """How many times each test logged a run outside the ``-n 2`` check's workers."""
    return {log.stem: log.read_text().split().count("-") for log in logs.glob("*.log")}


#: Each test logs its runs (its worker, ``-`` outside xdist) to a file of its
#: own (a path two tests wrote would be a pair to overlap).
_LOGGED = """
    import os
    from pytest_dagorder import depends_on

    def _log(name):
        with open(os.path.join(os.environ["DAGORDER_E2E_LOG"], name + ".log"), "a") as f:
            f.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + "\\n")
"""

#: Two components: each base with the three users that declare it.
TWO_BASES = _LOGGED + "".join(f"""
    def test_{b}_base():
        _log("{b}_base")
""" + "".join(f"""
    @depends_on("test_{b}_base")
    def test_{b}_user{u}():
        _log("{b}_user{u}")
""" for u in range(3)) for b in "ab")


def test_the_screening_runs_each_component_in_one_batch(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    log = dagtester.path.parent / f"{dagtester.path.name}-runs"
    log.mkdir()
    monkeypatch.setenv("DAGORDER_E2E_LOG", str(log))
    dagtester.pytester.makepyfile(test_two=textwrap.dedent(TWO_BASES))
    result = dagtester.run(*FIND)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["dagorder: 0 tests fail without the tests before them*",
                                 "*6 of 6 declared edges separable*"])
    # Taken in turn, the screening's two batches each held users of both bases,
    # so both bases ran in both; whole components run each base once there
    # (and once in the serial pass).
    runs = _runs(log)
    assert runs["a_base"] == runs["b_base"] == 2, runs


#: A chain: each test declares the one before it, and reads nothing of it.
LOGGED_CHAIN = _LOGGED + "".join(f"""
    {f'@depends_on("test_c{k - 1}")' if k else ''}
    def test_c{k}():
        _log("c{k}")
""" for k in range(4))


def test_a_batch_of_tests_all_checked_alone_runs_each_once(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    log = dagtester.path.parent / f"{dagtester.path.name}-runs"
    log.mkdir()
    monkeypatch.setenv("DAGORDER_E2E_LOG", str(log))
    dagtester.pytester.makepyfile(test_chain=textwrap.dedent(LOGGED_CHAIN))
    result = dagtester.run(*FIND)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["dagorder: 0 tests fail without the tests before them*",
                                 "*3 of 3 declared edges separable*"])
    # The serial pass, then each test once, alone in a fresh process (its
    # verdict), with no second run in the batch's process.
    assert _runs(log) == {f"c{k}": 2 for k in range(4)}, _runs(log)


#: test_end declares both users, each user only the base: in one batch (the
#: whole component) test_user_b would run after test_user_a, not its prerequisite.
SIBLINGS = _LOGGED + """
    def test_base():
        _log("base")

    @depends_on("test_base")
    def test_user_a():
        _log("user_a")

    @depends_on("test_base")
    def test_user_b():
        _log("user_b")

    @depends_on("test_user_a", "test_user_b")
    def test_end():
        _log("end")
"""


def test_the_screening_keeps_a_stride_where_one_batch_would_run_a_test_after_a_sibling(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    log = dagtester.path.parent / f"{dagtester.path.name}-runs"
    log.mkdir()
    monkeypatch.setenv("DAGORDER_E2E_LOG", str(log))
    dagtester.pytester.makepyfile(test_sib=textwrap.dedent(SIBLINGS))
    result = dagtester.run(*FIND)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["dagorder: 0 tests fail without the tests before them*"])
    # Two batches, test_user_b's without test_user_a: test_base runs in both
    # (and in the serial pass), so the screening could still show a need of
    # test_user_b for test_user_a.
    assert _runs(log)["base"] == 3, _runs(log)


#: test_b reads what test_a left where the serial pass records no state (a
#: standard module's attribute): its run alone fails, and the batch's process,
#: run as before, is what says so.
UNSEEN_STATE = """
    import json
    from pytest_dagorder import depends_on

    def test_a():
        json.left_by_a = 1

    @depends_on("test_a")
    def test_b():
        assert getattr(json, "left_by_a", 0) == 1

    @depends_on("test_a")
    def test_c():
        pass
"""


def test_a_test_failing_alone_in_an_alone_only_batch_keeps_its_edge(
        dagtester: DagTester) -> None:
    dagtester.pytester.makepyfile(test_unseen=textwrap.dedent(UNSEEN_STATE))
    edges = dagtester.path.parent / "edges.json"
    result = dagtester.run(*FIND, f"--dag-edges={edges}")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["dagorder: 0 tests fail without the tests before them*",
                                 "*1 of 2 declared edges separable*"])
    verdicts = {v["test"].rsplit("::", 1)[1]: v["separable"]
                for v in json.loads(edges.read_text())["verdicts"]}
    assert verdicts == {"test_b": False, "test_c": True}


#: test_read reads what test_fill left in their module's fixture (no path, no
#: module global: nothing the serial pass records); 12 free tests run before
#: both, test_f00 logging each run.
MODULE_MATES = {
    "test_a": """
        import os

        def test_f00():
            with open(os.environ["DAGORDER_E2E_LOG"], "a") as f:
                f.write("f00\\n")
    """ + "".join(f"""
        def test_f{k:02d}():
            pass
    """ for k in range(1, 12)),
    "test_m": """
        import pytest

        @pytest.fixture(scope="module")
        def store():
            return {}

        def test_fill(store):
            store["x"] = 1

        def test_read(store):
            assert store["x"] == 1
    """,
}


def test_a_test_is_searched_among_the_tests_sharing_its_module_fixture_first(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    log = dagtester.path.parent / "f00.log"
    monkeypatch.setenv("DAGORDER_E2E_LOG", str(log))
    for name, body in MODULE_MATES.items():
        dagtester.pytester.makepyfile(**{name: textwrap.dedent(body)})
    result = dagtester.run(*FIND)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["dagorder: 1 test fails without the tests before them*"])
    assert "test_m.py::test_read needs test_m.py::test_fill" in result.stdout.str()
    # test_f00 (the first test: not screened) runs in the serial pass and the -n 2
    # check; no probe of the search (bisecting the whole prefix would) runs it.
    assert log.read_text().splitlines() == ["f00"] * 2, result.stdout.str()


#: test_b.py::test_read needs test_write (a file: found at once, by its hint);
#: test_s.py::test_get needs test_slow, which sleeps from its third run on (the
#: serial pass and the screening run it once each): every probe of test_get's
#: search but the first one (test_get alone) runs it, and sleeps.
CUT = {
    "test_b": """
        import pathlib
        HERE = pathlib.Path(__file__).parent

        def test_write():
            (HERE / "data.txt").write_text("42")

        def test_read():
            assert (HERE / "data.txt").read_text() == "42"
    """,
    "test_s": """
        import os, pathlib, time
        COUNT = pathlib.Path(os.environ["DAGORDER_E2E_COUNT"])
        STATE = {}

        def test_slow():
            n = int(COUNT.read_text()) if COUNT.exists() else 0
            COUNT.write_text(str(n + 1))
            if n >= 2:
                time.sleep(60)
            STATE["x"] = 1

        def test_get():
            assert STATE.get("x") == 1
    """,
}


def make_cut(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Outside the rootdir (the probes' copies share it), one per test.
    count = pytester.path.with_name(pytester.path.name + "-count")
    monkeypatch.setenv("DAGORDER_E2E_COUNT", str(count))
    for name, body in CUT.items():
        pytester.makepyfile(**{name: textwrap.dedent(body)})
    return count


def test_a_probe_the_budget_cuts_is_no_timeout_and_no_answer(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    make_cut(dagtester.pytester, monkeypatch)
    result = dagtester.run(*FIND, "-o", "dag_find_budget=8")
    out = result.stdout.str()
    assert result.ret == 0, out
    result.stdout.fnmatch_lines([
        "dagorder: the time budget ran out before 1 test was searched:",
        "    test_s.py::test_get"])
    assert "past its time" not in out and "repeat" not in out, out


def test_a_sigterm_during_the_search_keeps_the_searches_that_ended(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    count = make_cut(pytester, monkeypatch)
    with forked_workers():  # sys.executable: the fork server's launcher (signals pass through)
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", *base_args(), "-p", "no:randomly", *FIND,
             "--dag-edges=edges.json"],
            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    stream = proc.stdout
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(line.decode() for line in stream), daemon=True)
    reader.start()
    try:
        end = time.monotonic() + 120
        # Until test_get's search sleeps in its second probe and the progress line
        # says test_read's (two short probes) has ended: a fixed pause after the
        # first was too short for those probes on a loaded CI machine.
        while time.monotonic() < end and not (
                count.exists() and count.read_text() == "3"
                and any(line.startswith("dagorder: 1 test left to search") for line in lines)):
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
        stream.close()
    out = "".join(lines)
    assert "dagorder: test_b.py::test_read needs test_b.py::test_write" in out, out
    assert "before 1 test was searched:\n    test_s.py::test_get" in out, out
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out  # as pytest's own Ctrl-C
    written = json.loads((pytester.path / "edges.json").read_text())
    assert "test_b.py::test_write" in json.dumps(written), written


#: test_slow runs for a second: long enough for a signal to arrive in the pass.
SLOW_PASS = """
    import time

    def test_slow():
        time.sleep(1.0)

    def test_after():
        pass
"""


def test_a_ctrl_c_the_command_started_ignoring_stays_ignored(
        pytester: pytest.Pytester) -> None:
    # A background job of a shell that is not interactive starts with SIGINT
    # ignored; plain pytest then runs on through a Ctrl-C, and so does the
    # learning pass (on the old code its own handler stopped it: "interrupted").
    pytester.makepyfile(test_p=textwrap.dedent(SLOW_PASS))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *base_args(), "-p", "no:randomly", *FIND,
         "--dag-edges=edges.json"],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=120)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert "interrupted" not in out and "no missing prerequisite" in out, out


#: test_check waits for test_create with pytest-dependency's run-time depends(),
#: test_first and test_second through a module fixture that calls it.
RUNTIME = """
    import pathlib
    import pytest
    from pytest_dependency import depends
    HERE = pathlib.Path(__file__).parent

    @pytest.mark.dependency()
    def test_create():
        (HERE / "made.txt").write_text("1")

    def test_check(request):
        depends(request, ["test_create"])
        assert (HERE / "made.txt").read_text() == "1"

    @pytest.fixture(scope="module")
    def made(request):
        depends(request, ["test_create"])  # serially: for test_first only

    def test_first(made):
        assert (HERE / "made.txt").read_text() == "1"

    def test_second(made):
        assert (HERE / "made.txt").read_text() == "1"
"""




#: test_b's declared edge is separable, so the findings are checked under -n 2;
#: in that run (the only one under xdist) test_b says whether the probe servers'
#: folders (their probes' tmp_path folders) were still there: they are removed
#: beside the check, not after it.
SWEPT = """
    import os, pathlib, time
    from pytest_dagorder import depends_on
    HERE = pathlib.Path(__file__).parent

    def test_a(tmp_path):
        (tmp_path / "made.txt").write_text("1")

    @depends_on("test_a")
    def test_b(tmp_path):
        if not os.environ.get("PYTEST_XDIST_WORKER"):
            return
        work = HERE.parents[1]  # WORK/check/ROOT: the finder's work folder
        end = time.monotonic() + 20
        while list(work.glob("slot*/basetemp-server-*")) and time.monotonic() < end:
            time.sleep(0.1)
        left = sorted(p.name for p in work.glob("slot*/basetemp-server-*"))
        pathlib.Path(os.environ["DAGORDER_E2E_SWEPT"]).write_text(" ".join(left) or "swept")
"""


def test_the_probe_servers_folders_are_removed_beside_the_n2_check(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    told = dagtester.path.parent / f"{dagtester.path.name}-swept"
    monkeypatch.setenv("DAGORDER_E2E_SWEPT", str(told))
    dagtester.pytester.makepyfile(test_s=textwrap.dedent(SWEPT))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["dagorder: with the findings, -n 2 gave the serial outcomes"])
    assert told.read_text() == "swept"


#: Eight users of one module fixture whose run-time depends() names test_create:
#: serially it is called once, for test_u0 (the others use the instance it set
#: up).  A screening batch runs its tests in reverse serial order: a later user
#: sets the fixture up first, without test_create before it, and pytest keeps
#: the fixture's skip for the instance's other users of that run.
RUNTIME_SHARED = """
    import pathlib
    import pytest
    from pytest_dependency import depends
    HERE = pathlib.Path(__file__).parent

    @pytest.mark.dependency()
    def test_create():
        (HERE / "made.txt").write_text("1")

    @pytest.fixture(scope="module")
    def made(request):
        depends(request, ["test_create"])
""" + "".join(f"""
    def test_u{k}(made):
        assert (HERE / "made.txt").read_text() == "1"
""" for k in range(8))


@pytest.mark.parametrize("source", [
    # Each probe runs test_create with test_check: it is no suspect.
    RUNTIME,
    # Every probe runs test_create before the fixture's first user: no suspect
    # (before: 4 of the 8 were searched and 3 were said to need test_create,
    # which the fixture names already).
    RUNTIME_SHARED,
], ids=["test", "module-fixture"])
def test_a_prerequisite_named_by_a_run_time_depends_is_declared(
        dagtester: DagTester, source: str) -> None:
    dagtester.pytester.makepyfile(test_r=textwrap.dedent(source))
    result = dagtester.run(*FIND)
    out = result.stdout.str()
    assert result.ret == 0, out
    result.stdout.fnmatch_lines(["dagorder: 0 tests fail without the tests before them*"])
    assert " needs " not in out, out


#: A chain through files only: each test reads the file its prerequisite wrote
#: and changes nothing in the process; test_free declares nothing.
CHAIN = """
    import pathlib
    from pytest_dagorder import depends_on
    HERE = pathlib.Path(__file__).parent

    def test_a():
        (HERE / "a.txt").write_text("a")

    @depends_on("test_a")
    def test_b():
        assert (HERE / "a.txt").read_text() == "a"
        (HERE / "b.txt").write_text("b")

    @depends_on("test_b")
    def test_c():
        assert (HERE / "b.txt").read_text() == "b"

    def test_free():
        pass
"""


def test_the_screening_runs_dependents_alone_and_no_edge_run_follows(
        dagtester: DagTester) -> None:
    # Each dependent passed alone in a fresh process after its prerequisites ran
    # in its screening batch: that settles its screening and its declared edges,
    # so no serial prefix runs again: the serial pass, one probe per screening
    # batch (three targets, two slots: three batches) and the -n 2 check, where
    # the edge check's two serial prefixes came on top.
    dagtester.pytester.makepyfile(test_chain=textwrap.dedent(CHAIN))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: declared edges: 2 of 2 edges separable*",
        "dagorder: 0 missing prerequisites, 0 conflicts, 2 of 2 declared edges separable "
        "in * s with 4 probes in *"])
    verdicts = json.loads((dagtester.path / "edges.json").read_text())["verdicts"]
    assert [(v["test"], v["after"], v["separable"]) for v in verdicts] == [
        ("test_chain.py::test_b", "test_chain.py::test_a", True),
        ("test_chain.py::test_c", "test_chain.py::test_b", True)]


def test_a_prerequisite_that_only_set_up_the_suites_package_keeps_its_dependents_alone(
        dagtester: DagTester) -> None:
    # test_a fills a value of the suite's own package (slurk's lazy set-up): a
    # fresh process sets it up again, so its dependents still run alone in the
    # screening (no serial prefix after it); a value of a test module would not.
    dagtester.pytester.makepyfile(**{"lazy/__init__.py": "CACHE = {}\n"})
    dagtester.pytester.makepyfile(test_chain=textwrap.dedent(CHAIN).replace(
        "def test_a():\n", "def test_a():\n    import lazy\n    lazy.CACHE['a'] = object()\n"))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*checking 2 tests with declared prerequisites in a fresh process (2 alone after "
        "their screening batch)",
        "dagorder: 0 missing prerequisites, 0 conflicts, 2 of 2 declared edges separable "
        "in * s with 4 probes in *"])


def test_a_skipped_dependent_is_checked_alone_in_the_screening_too(
        dagtester: DagTester) -> None:
    # test_d is skipped (a skip mark): the screening screens no skipped test, but
    # runs it alone in a batch, so it costs the edge check no serial prefix.
    dagtester.pytester.makepyfile(test_chain=textwrap.dedent(CHAIN) + textwrap.dedent("""
        import pytest

        @pytest.mark.skip(reason="not yet")
        @depends_on("test_c")
        def test_d():
            pass
    """))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*checking 3 tests with declared prerequisites in a fresh process (3 alone after "
        "their screening batch)",
        "dagorder: 0 missing prerequisites, 0 conflicts, 3 of 3 declared edges separable "
        "in * s with 4 probes in *"])


#: pytest-order sorts x1 and x2 (order 1) before y (order 2): a fence holds y
#: until both were handed out.  The durations file makes y the most urgent.
#: Neither x test ends before y said it started (y looks first), unless the
#: other x test started (x2) or ended (x1), each wait bounded: freed, y saw no
#: x test ended whichever worker ran which x test first (x2 alone on a worker
#: could end before y looked, a flake under load); fenced, y starts only once
#: both ended.  y writes down which.
FENCED = """
    import pathlib, time
    import pytest
    HERE = pathlib.Path(__file__).parent

    def wait_for(*names):
        for _ in range(600):
            if any((HERE / name).exists() for name in names):
                return
            time.sleep(0.05)

    @pytest.mark.order(1)
    def test_x1():
        (HERE / "x1-started").touch()
        wait_for("y-started", "x-ended")
        (HERE / "x-ended").touch()

    @pytest.mark.order(1)
    def test_x2():
        wait_for("y-started", "x1-started")
        (HERE / "x-ended").touch()

    @pytest.mark.order(2)
    def test_y():
        (HERE / "y-saw").write_text(str((HERE / "x-ended").exists()))
        (HERE / "y-started").touch()
"""


def fence_verdicts(root: Path, free: dict[str, bool]) -> None:
    from pytest_dagorder.declaring import edges_file, evidence

    prints = evidence.Fingerprints(root)
    edges_file.write(root / "edges.json", edges_file.EdgesFile(fences=[
        edges_file.FenceVerdict(nid, ok, "" if ok else "not shown free", prints.of((nid,)))
        for nid, ok in free.items()]))
    (root / "durations.json").write_text(json.dumps(
        {"test_f.py::test_x1": 0.1, "test_f.py::test_x2": 0.1, "test_f.py::test_y": 30.0}))


@pytest.mark.parametrize("changed", [False, True], ids=["valid", "stale"])
def test_a_fence_verdict_frees_a_pytest_order_test_unless_its_module_changed(
        dagtester: DagTester, changed: bool) -> None:
    pytest.importorskip("pytest_order")
    dagtester.pytester.makepyfile(test_f=textwrap.dedent(FENCED))
    fence_verdicts(dagtester.path, {"test_f.py::test_x1": False,
                                    "test_f.py::test_x2": True, "test_f.py::test_y": True})
    if changed:
        with (dagtester.path / "test_f.py").open("a") as f:
            f.write("\n# changed\n")
    result = dagtester.run("-n", "2", "--dag-edges=edges.json",
                           "--dag-durations=durations.json", "--dag-explain")
    result.assert_outcomes(passed=3)
    saw = (dagtester.path / "y-saw").read_text()
    if not changed:
        result.stdout.fnmatch_lines([
            "dagorder: 1 of 1 fenced test free by evidence from edges.json",
            "dagorder: fence lifted by evidence (*): test_f.py::test_y"])
        result.stdout.no_fnmatch_line("*edges and 0 resources from*")
        assert saw == "False"  # y went before every test sorted before it ended
    else:
        result.stdout.fnmatch_lines([
            "dagorder: 0 of 1 fenced test free by evidence from edges.json (3 stale: a file "
            "they rest on changed; renew with pytest --dag-find-missing -n 2 "
            "--dag-edges=edges.json)"])
        assert saw == "True"  # fenced: handed out once x1 and x2 were, after one ended


#: Every test has an ordinal.  test_u declares test_p and test_t: one
#: component, so one screening batch (whatever the batching), in which test_u's
#: prerequisites run first in serial order: test_t (which declares test_o)
#: passed there only after test_p, sorted before it and not its prerequisite.
#: Run alone in a fresh process at its place, test_t had test_p's files: it is
#: free if test_p wrote none.  test_b changes a module-level value, test_c
#: writes the file test_a read; test_a and test_u (after its prerequisites
#: only) are free.
SCREENED = """
    import pathlib
    import pytest
    HERE = pathlib.Path(__file__).parent
    SEEN = []

    @pytest.mark.order(0)
    def test_o():
        pass

    @pytest.mark.order(1)
    def test_p():
        WRITE

    @pytest.mark.order(2)
    @pytest.mark.run_after("test_o")
    def test_t():
        pass

    @pytest.mark.order(3)
    def test_a():
        (HERE / "data.txt").read_text()

    @pytest.mark.order(4)
    def test_b():
        SEEN.append(1)

    @pytest.mark.order(5)
    def test_c():
        (HERE / "data.txt").write_text("changed")

    @pytest.mark.order(6)
    @pytest.mark.run_after("test_p", "test_t")
    def test_u():
        pass
"""


@pytest.mark.parametrize("writes", [False, True], ids=["p-writes-nothing", "p-writes"])
def test_the_learning_pass_writes_fence_verdicts_and_checks_them_under_n2(
        dagtester: DagTester, writes: bool) -> None:
    pytest.importorskip("pytest_order")
    body = SCREENED.replace("WRITE", '(HERE / "p.txt").write_text("p")' if writes else "pass")
    dagtester.pytester.makepyfile(test_s=textwrap.dedent(body))
    (dagtester.path / "data.txt").write_text("original")
    result = dagtester.run(*FIND, "--dag-edges", "edges.json")
    assert result.ret == 0, result.stdout.str()
    free = 3 if writes else 4
    result.stdout.fnmatch_lines([
        "dagorder: checking the findings: the selection under -n 2 with them",
        "dagorder: with the findings, -n 2 gave the serial outcomes",
        "dagorder: 0 missing prerequisites, 0 conflicts, 3 of 3 declared edges separable, "
        f"{free} of 7 tests free of pytest-order's fences in * s*"])
    fences = {v["test"].split("::")[1]: v["why"]
              for v in json.loads((dagtester.path / "edges.json").read_text())["fences"]}
    assert fences == {
        "test_o": "the first test",
        "test_p": "",
        "test_t": "in the screening, tests sorted before it that are not its prerequisites "
                  "ran first" if writes else "",
        "test_a": "",
        "test_b": "changed the process's state (the environment or a module-level value), "
                  "which a test sorted before it could read",
        "test_c": "wrote data.txt, which test_s.py::test_a sorted before it touched",
        "test_u": ""}
    result = dagtester.run("-n", "2", "--dag-edges=edges.json")
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines([
        f"dagorder: {free} of 6 fenced tests free by evidence from edges.json"])
