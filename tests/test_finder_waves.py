"""``--dag-find-missing``'s screening answers the declared edges' check where its
runs alone are the evidence a serial prefix would give: no serial prefix after
it (issue 50, point 7: the learning pass's passes over the suite)."""

from __future__ import annotations

import json
import textwrap

import pytest
from support.dagtester import DagTester

pytestmark = [pytest.mark.dag_modes("own"), pytest.mark.dagtester(timeout=300)]
FIND = ("--dag-find-missing", "-n", "2")

#: bpypolyskel's pattern: the first test fills a module global; test_get needs
#: it filled (it needs its prerequisite's process), test_each loops over it (it
#: passes alone).  No test writes a path or reaches a service.  Each test logs
#: its name and process id to a file opened when the module is imported (outside
#: any test: no path a test touches).
QUIET = """
    import os
    from pytest_dagorder import depends_on
    LOG = os.open(os.environ["DAGORDER_E2E_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    STATE = []

    def log(name):
        os.write(LOG, f"{os.getpid()} {name}\\n".encode())

    def test_set():
        log("set")
        STATE.append(1)

    @depends_on("test_set")
    def test_get():
        log("get")
        assert STATE

    @depends_on("test_set")
    def test_each():
        log("each")
        for x in STATE:
            assert x == 1
"""


def test_a_dependent_that_fails_alone_where_nothing_is_written_takes_no_serial_prefix(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both dependents run alone in the screening although their prerequisite
    changed a test module's value; test_get's failure there (it passed in the
    batch's process right after) is its verdict.  Before: both went to the edge
    check's serial prefixes, which ran test_set again (on the old code the
    "(2 alone ...)" line is missing and test_set runs two more times)."""
    log = dagtester.path.parent / "quiet.log"
    monkeypatch.setenv("DAGORDER_E2E_LOG", str(log))
    dagtester.pytester.makepyfile(test_q=textwrap.dedent(QUIET))
    result = dagtester.run(*FIND, "--dag-edges", "edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*checking 2 tests with declared prerequisites in a fresh process (2 alone after their "
        "screening batch)",
        "dagorder: declared edges: 1 of 2 edges separable*"])
    verdicts = json.loads((dagtester.path / "edges.json").read_text())["verdicts"]
    assert [(v["test"], v["separable"]) for v in verdicts] == [
        ("test_q.py::test_get", False), ("test_q.py::test_each", True)]
    assert verdicts[0]["probe"] == ("test_q.py::test_get failed in a fresh process after "
                                    "its prerequisites ran in another (serially: passed)")
    runs: dict[str, list[str]] = {}
    for line in log.read_text().splitlines():
        pid, name = line.split()
        runs.setdefault(pid, []).append(name)
    # test_get ran alone (a process without test_set) and failed there; test_set
    # ran in the serial pass, the screening's batches (one per dependent at
    # most) and the -n 2 check: never in a serial prefix of the edge check.
    assert ["get"] in runs.values() or any(r[0] == "get" for r in runs.values()), runs
    sets = sum(r.count("set") for r in runs.values())
    assert sets <= 4, runs


#: test_b's prerequisite test_r has none of its own; no test changes the
#: process's state.  Logged as above.
ROOTED = """
    import os
    from pytest_dagorder import depends_on
    LOG = os.open(os.environ["DAGORDER_E2E_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def log(name):
        os.write(LOG, f"{os.getpid()} {name}\\n".encode())

    def test_base():
        log("base")

    @depends_on("test_base")
    def test_a():
        log("a")

    def test_r():
        log("r")

    @depends_on("test_r")
    def test_b():
        log("b")
"""


def test_a_batch_with_a_test_of_no_prerequisite_runs_its_tests_alone_only(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    """test_r and test_b share a screening batch; test_r has no declared
    prerequisite, so it used to be screened in the batch's own process, and
    test_b ran there too after its run alone.  Now test_r's screening is its run
    alone as well, and each test of the batch runs once (on the old code
    test_b ran four times: the serial pass, alone, the batch, the -n 2 check)."""
    log = dagtester.path.parent / "rooted.log"
    monkeypatch.setenv("DAGORDER_E2E_LOG", str(log))
    dagtester.pytester.makepyfile(test_r=textwrap.dedent(ROOTED))
    result = dagtester.run(*FIND, "--dag-edges", "edges.json")
    assert result.ret == 0, result.stdout.str()
    verdicts = json.loads((dagtester.path / "edges.json").read_text())["verdicts"]
    assert [(v["test"], v["separable"]) for v in verdicts] == [
        ("test_r.py::test_a", True), ("test_r.py::test_b", True)]
    names = [line.split()[1] for line in log.read_text().splitlines()]
    # The serial pass, its run alone in the screening, the -n 2 check.
    assert names.count("b") == 3, names


#: test_last, in the serial pass, waits (bounded) until a test ran in another
#: process than the pass's: the log grew past what the pass's own tests wrote.
#: It reads the log's size by its descriptor (no path a test touches: the suite
#: stays quiet).  Logged as above.
BESIDE = """
    import os
    import time
    from pytest_dagorder import depends_on
    LOG = os.open(os.environ["DAGORDER_E2E_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def log(name):
        os.write(LOG, f"{os.getpid()} {name}\\n".encode())

    def test_a():
        log("a")

    @depends_on("test_a")
    def test_b():
        log("b")

    def test_last():
        mine = sum(len(f"{os.getpid()} {name}\\n") for name in "ab")
        end = time.monotonic() + 30
        while os.fstat(LOG).st_size <= mine:
            assert time.monotonic() < end, "no test ran beside the serial pass"
            time.sleep(0.05)
"""


def test_the_screening_starts_on_the_free_slot_while_the_serial_pass_runs(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    """test_b is screened, and its edge checked, alone in a fresh process on the
    second probe slot while the serial pass still runs (test_last waits for
    that: on the old code the screening began after the pass, so test_last
    failed serially and the finder refused the suite)."""
    log = dagtester.path.parent / "beside.log"
    monkeypatch.setenv("DAGORDER_E2E_LOG", str(log))
    dagtester.pytester.makepyfile(test_s=textwrap.dedent(BESIDE))
    result = dagtester.run(*FIND, "--dag-edges", "edges.json")
    assert result.ret == 0, result.stdout.str()
    verdicts = json.loads((dagtester.path / "edges.json").read_text())["verdicts"]
    assert [(v["test"], v["separable"]) for v in verdicts] == [("test_s.py::test_b", True)]
    runs: dict[str, list[str]] = {}
    for line in log.read_text().splitlines():
        pid, name = line.split()
        runs.setdefault(pid, []).append(name)
    # Its run beside the pass is its screening: test_b runs alone once, in the
    # serial pass and in the -n 2 check, no more.
    assert sum(r.count("b") for r in runs.values()) == 3, runs


def test_the_screening_beside_the_pass_stops_where_runs_alone_cost_far_more() -> None:
    # Runs alone that cost what the pass's runs cost go on; once they cost over
    # BESIDE_COST times as much (each fresh process sets an application up
    # again), the screening after the pass takes the rest.
    from pytest_dagorder.core.missing import Touches
    from pytest_dagorder.finder.find_missing import BESIDE_COST, MissingFinder, Result

    ids = ["t0", "t1", "t2"]
    seen = {nid: Result("passed", Touches(), seconds=1.0) for nid in ids}
    cheap = ([1], {"t1": Result("passed", Touches(), seconds=1.2)})
    assert not MissingFinder._beside_dear(ids, seen, [cheap])
    dear = ([2], {"t2": Result("passed", Touches(), seconds=1.0 + 2 * BESIDE_COST)})
    assert MissingFinder._beside_dear(ids, seen, [cheap, dear])
